"""The hidden-character rule: what the frame, the CLI and the page escape, and what stays."""

from __future__ import annotations

import json
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from session_schedule.core.framing import embed_prompt
from session_schedule.core.visible import (
    escape_unencodable,
    first_surrogate,
    frame_escape,
    is_emoji,
    is_hidden,
    reveal,
)

ZWJ = "\u200d"
VS16 = "\ufe0f"


@pytest.mark.parametrize(
    ("text", "framed", "shown"),
    [
        ("buy milk", '"buy milk"', "buy milk"),
        # Tag characters spelling a hidden instruction, astral: a surrogate pair in JSON.
        ("buy milk\U000e0041\U000e0042", '"buy milk\\udb40\\udc41\\udb40\\udc42"', "buy milk\\U000e0041\\U000e0042"),
        # Bidi override and isolate, zero-width space, word joiner, BOM, soft hyphen.
        ("a\u202eb\u2066c\u200bd\u2060e\ufeff\u00ad", '"a\\u202eb\\u2066c\\u200bd\\u2060e\\ufeff\\u00ad"', "a\\u202eb\\u2066c\\u200bd\\u2060e\\ufeff\\u00ad"),
        # Line and paragraph separators, NEL and DEL; newline and tab are JSON-escaped in the frame.
        ("a\u2028b\u2029c\x85d\x7fe\nf\tg", '"a\\u2028b\\u2029c\\u0085d\\u007fe\\nf\\tg"', "a\\u2028b\\u2029c\\x85d\\x7fe\nf\tg"),
        # Private use, unassigned, Hangul filler, variation selector on a letter, CGJ.
        ("\ue000\U000f0000\u0378\u3164a\ufe0e\u034f", '"\\ue000\\udb80\\udc00\\u0378\\u3164a\\ufe0e\\u034f"', "\\ue000\\U000f0000\\u0378\\u3164a\\ufe0e\\u034f"),
        # Emoji: ZWJ sequences, skin tones, VS16, keycaps and flags read as emoji.
        ("👨\u200d👩\u200d👧 ❤️\u200d🔥 👩🏽\u200d💻 1️⃣ 🏳️\u200d🌈 🇯🇵 ☺️", '"👨\u200d👩\u200d👧 ❤️\u200d🔥 👩🏽\u200d💻 1️⃣ 🏳️\u200d🌈 🇯🇵 ☺️"', "👨\u200d👩\u200d👧 ❤️\u200d🔥 👩🏽\u200d💻 1️⃣ 🏳️\u200d🌈 🇯🇵 ☺️"),
        # ... but not a joiner or selector anywhere else, nor a run of them after an emoji.
        (f"a{ZWJ}b 😀{ZWJ}{ZWJ}😀 x{VS16} 😀{VS16}{VS16} {ZWJ}😀 😀{ZWJ} 1{VS16}", '"a\\u200db 😀\\u200d\\u200d😀 x\\ufe0f 😀️\\ufe0f \\u200d😀 😀\\u200d 1\\ufe0f"', "a\\u200db 😀\\u200d\\u200d😀 x\\ufe0f 😀️\\ufe0f \\u200d😀 😀\\u200d 1\\ufe0f"),
        # A subdivision flag is a tag sequence: its tags are escaped like any others.
        ("🏴\U000e0067\U000e0062\U000e007f", '"🏴\\udb40\\udc67\\udb40\\udc62\\udb40\\udc7f"', "🏴\\U000e0067\\U000e0062\\U000e007f"),
    ],
)  # fmt: skip
def test_hidden_characters_are_escaped_and_emoji_stay(text: str, framed: str, shown: str) -> None:
    assert embed_prompt(text) == framed
    assert json.loads(framed) == text
    assert reveal(text) == shown


def test_the_category_rule() -> None:
    assert [is_hidden(char) for char in "\n\t a\u00a0é"] == [False] * 6
    assert all(is_hidden(char) for char in "\x00\x1f\x7f\x9f\u200b\u200f\u2064\ufe00\U000e0100")
    # Unassigned in this Python's database but reserved for emoji: still an emoji.
    assert is_emoji("\U0001faff")
    assert not is_hidden("\U0001faff")
    assert not is_emoji("a")
    assert is_emoji("\u00a9")


def test_lone_surrogates_are_escaped_for_messages() -> None:
    assert escape_unencodable("a\ud83db\udc00") == "a\\ud83db\\udc00"
    assert first_surrogate("ab\udfffc") == 2
    assert first_surrogate("ab😀") is None


# -- properties ------------------------------------------------------------------------------

_pictographs = st.sampled_from([*list("😀👩👨👧💻🔥❤☺🏳🌈🐕🦺✈⚽"), "\U0001faff"])
_skin_tones = st.sampled_from(["", "", "🏻", "🏿"])
_emoji_parts = st.tuples(_pictographs, _skin_tones, st.sampled_from(["", VS16])).map(
    lambda part: part[0] + (part[1] if part[1] else part[2])
)
_emoji_sequences = st.lists(_emoji_parts, min_size=1, max_size=4).map(ZWJ.join)
_hostile = st.one_of(
    st.characters(min_codepoint=0xE0000, max_codepoint=0xE007F),
    st.sampled_from(list("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")),
    st.sampled_from(list("\u200b\u200c\u200d\u200e\u200f\u2060\ufeff\ufe0f\ufe0e\u2028\u2029")),
    st.characters(categories=["Cf", "Co", "Cn", "Zl", "Zp", "Cc"]),
    st.characters(min_codepoint=0xFE00, max_codepoint=0xFE0F),
    st.characters(min_codepoint=0xE0100, max_codepoint=0xE01EF),
)
_prompts = st.lists(st.one_of(_hostile, _emoji_sequences, st.text(max_size=4)), max_size=12).map(
    "".join
)


def _survivors(text: str) -> list[int]:
    """Indexes of hidden characters left in ``text`` that are not a joiner or selector of an
    emoji: there must be none."""
    found = []
    for index, char in enumerate(text):
        if not is_hidden(char) or char not in (ZWJ, VS16):
            if is_hidden(char):
                found.append(index)
            continue
        before = text[index - 1] if index else ""
        if char == VS16 and before and (is_emoji(before) or before in "0123456789#*"):
            continue
        if char == ZWJ and before and index + 1 < len(text) and is_emoji(text[index + 1]):
            continue
        found.append(index)
    return found


@settings(max_examples=500)
@given(prompt=_prompts)
def test_no_hidden_character_survives_and_the_frame_decodes_back(prompt: str) -> None:
    framed = embed_prompt(prompt)
    assert json.loads(framed) == prompt
    assert "\n" not in framed
    assert _survivors(framed) == []
    shown = reveal(prompt)
    assert _survivors(shown.replace("\n", "").replace("\t", "")) == []


@settings(max_examples=300)
@given(
    before=st.text(alphabet=st.characters(categories=["L", "N", "Zs"]), max_size=5),
    emoji=_emoji_sequences,
    after=st.text(alphabet=st.characters(categories=["L", "N", "Zs"]), max_size=5),
)
def test_emoji_sequences_survive(before: str, emoji: str, after: str) -> None:
    text = f"{before} {emoji} {after}"
    assert emoji in reveal(text)
    assert emoji in embed_prompt(text)
    assert frame_escape(emoji) == emoji
    assert all(unicodedata.category(char) != "Cf" or char == ZWJ for char in emoji)
