"""Text that is safe to show: characters that cannot be encoded, or cannot be seen, as escapes.

A prompt may carry characters a person does not see but a model reads: Unicode tag characters
(U+E0000 block), bidi overrides and isolates, zero-width characters, variation selectors and
other format characters. A page would show "buy milk" while the model read a hidden
instruction. The rule, applied the same way by the follow-up frame, the CLI and the page:

Rule 1 — **hidden characters.** A character is hidden when its general category is ``Cc``
(control), ``Cf`` (format), ``Cs`` (surrogate), ``Co`` (private use: no agreed glyph, so what a
person sees depends on the font), ``Zl`` or ``Zp`` (line and paragraph separators), or ``Cn``
(unassigned in the running Python's Unicode database — except code points reserved for
emoji, so a newer emoji still reads as one), or when it has the Unicode property
``Default_Ignorable_Code_Point`` (which adds the variation selectors, the Hangul fillers, the
combining grapheme joiner and the rest of the characters renderers skip). Newline and tab are
shown as line breaks and tabs (the frame escapes them as JSON does).

Rule 2 — **emoji stay emoji.** Two hidden characters are kept where emoji need them: a ZERO
WIDTH JOINER (U+200D) between two emoji — the one before may carry a skin-tone modifier or a
VARIATION SELECTOR-16 — and a VARIATION SELECTOR-16 (U+FE0F) right after an emoji, or between
``0``-``9``, ``#`` or ``*`` and the keycap U+20E3. Anywhere else they are escaped, so a run of
joiners or selectors cannot carry hidden text either.

:func:`frame_escape` writes a hidden character as a JSON escape ``\\uXXXX`` (above U+FFFF as a
UTF-16 surrogate pair ``\\udb40\\udc41``, as JSON requires), so the frame's string literal still
decodes to the exact prompt. :func:`reveal` writes it for a person: a control character as
``\\xNN``, anything else as ``\\uXXXX``, or ``\\U000XXXXX`` above U+FFFF.

:func:`escape_unencodable` is for error messages that echo what a model sent: a lone surrogate
(what ``json.loads`` makes of a model's unpaired ``"\\ud83d"`` escape) cannot be encoded as UTF-8,
so it is written as the six characters ``\\ud83d`` instead.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Callable
from typing import Final


def _ranges(table: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    starts: list[int] = []
    ends: list[int] = []
    for item in table.split():
        first, _, last = item.partition("-")
        starts.append(int(first, 16))
        ends.append(int(last or first, 16))
    return tuple(starts), tuple(ends)


# Unicode 17 `Extended_Pictographic` (emoji-data.txt): every emoji, and the blocks reserved for
# future ones.
_EXTENDED_PICTOGRAPHIC: Final = _ranges(
    """
    A9 AE 203C 2049 2122 2139 2194-2199 21A9-21AA 231A-231B 2328 23CF 23E9-23F3 23F8-23FA 24C2
    25AA-25AB 25B6 25C0 25FB-25FE 2600-2604 260E 2611 2614-2615 2618 261D 2620 2622-2623 2626
    262A 262E-262F 2638-263A 2640 2642 2648-2653 265F-2660 2663 2665-2666 2668 267B 267E-267F
    2692-2697 2699 269B-269C 26A0-26A1 26A7 26AA-26AB 26B0-26B1 26BD-26BE 26C4-26C5 26C8
    26CE-26CF 26D1 26D3-26D4 26E9-26EA 26F0-26F5 26F7-26FA 26FD 2702 2705 2708-270D 270F 2712
    2714 2716 271D 2721 2728 2733-2734 2744 2747 274C 274E 2753-2755 2757 2763-2764 2795-2797
    27A1 27B0 27BF 2934-2935 2B05-2B07 2B1B-2B1C 2B50 2B55 3030 303D 3297 3299 1F004 1F02C-1F02F
    1F094-1F09F 1F0AF-1F0B0 1F0C0 1F0CF-1F0D0 1F0F6-1F0FF 1F170-1F171 1F17E-1F17F 1F18E
    1F191-1F19A 1F1AE-1F1E5 1F201-1F20F 1F21A 1F22F 1F232-1F23A 1F23C-1F23F 1F249-1F25F
    1F266-1F321 1F324-1F393 1F396-1F397 1F399-1F39B 1F39E-1F3F0 1F3F3-1F3F5 1F3F7-1F3FA
    1F400-1F4FD 1F4FF-1F53D 1F549-1F54E 1F550-1F567 1F56F-1F570 1F573-1F57A 1F587 1F58A-1F58D
    1F590 1F595-1F596 1F5A4-1F5A5 1F5A8 1F5B1-1F5B2 1F5BC 1F5C2-1F5C4 1F5D1-1F5D3 1F5DC-1F5DE
    1F5E1 1F5E3 1F5E8 1F5EF 1F5F3 1F5FA-1F64F 1F680-1F6C5 1F6CB-1F6D2 1F6D5-1F6E5 1F6E9
    1F6EB-1F6F0 1F6F3-1F6FF 1F7DA-1F7FF 1F80C-1F80F 1F848-1F84F 1F85A-1F85F 1F888-1F88F
    1F8AE-1F8AF 1F8BC-1F8BF 1F8C2-1F8CF 1F8D9-1F8FF 1F90C-1F93A 1F93C-1F945 1F947-1F9FF
    1FA58-1FA5F 1FA6E-1FAFF 1FC00-1FFFD
    """
)
# Unicode 17 `Default_Ignorable_Code_Point` (DerivedCoreProperties.txt).
_DEFAULT_IGNORABLE: Final = _ranges(
    """
    AD 34F 61C 115F-1160 17B4-17B5 180B-180F 200B-200F 202A-202E 2060-206F 3164 FE00-FE0F FEFF
    FFA0 FFF0-FFF8 1BCA0-1BCA3 1D173-1D17A E0000-E0FFF
    """
)
_HIDDEN_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})
_ZWJ: Final = "\u200d"
_VS16: Final = "\ufe0f"
_KEYCAP: Final = "\u20e3"
_KEYCAP_BASES: Final = frozenset("0123456789#*")
_SKIN_TONES: Final = range(0x1F3FB, 0x1F400)
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_ASCII_CONTROL: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


def _within(table: tuple[tuple[int, ...], tuple[int, ...]], code: int) -> bool:
    starts, ends = table
    index = bisect.bisect_right(starts, code) - 1
    return index >= 0 and code <= ends[index]


def is_emoji(char: str) -> bool:
    """Whether ``char`` is ``Extended_Pictographic``: an emoji, or reserved for one."""
    return _within(_EXTENDED_PICTOGRAPHIC, ord(char))


def is_hidden(char: str) -> bool:
    """Whether ``char`` is hidden by Rule 1 (newline and tab are not)."""
    if char in "\n\t":
        return False
    code = ord(char)
    category = unicodedata.category(char)
    if category in _HIDDEN_CATEGORIES or _within(_DEFAULT_IGNORABLE, code):
        return True
    return category == "Cn" and not _within(_EXTENDED_PICTOGRAPHIC, code)


def _kept(text: str, index: int) -> bool:
    """Whether the hidden character at ``index`` joins or selects an emoji (Rule 2)."""
    char = text[index]
    before = text[index - 1] if index > 0 else ""
    after = text[index + 1] if index + 1 < len(text) else ""
    if char == _VS16:
        return bool(before) and (is_emoji(before) or (before in _KEYCAP_BASES and after == _KEYCAP))
    if char == _ZWJ and after and before and is_emoji(after):
        if before == _VS16:
            return _kept(text, index - 1)
        return is_emoji(before) or ord(before) in _SKIN_TONES
    return False


def _escape(text: str, write: Callable[[str], str]) -> str:
    if text.isascii() and not _ASCII_CONTROL.search(text):
        return text
    out: list[str] = []
    for index, char in enumerate(text):
        out.append(write(char) if is_hidden(char) and not _kept(text, index) else char)
    return "".join(out)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _person_escape(char: str) -> str:
    code = ord(char)
    if unicodedata.category(char) == "Cc" and code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def frame_escape(literal: str) -> str:
    """``literal`` (JSON text) with every hidden character written as a JSON escape."""
    return _escape(literal, _json_escape)


def reveal(text: str) -> str:
    """``text`` for a person: every hidden character written as a visible escape."""
    return _escape(text, _person_escape)


def escape_unencodable(text: str) -> str:
    """``text`` with every lone surrogate written as ``\\uXXXX``, so it always encodes as UTF-8."""
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def first_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in ``text``, or ``None``."""
    match = _SURROGATE.search(text)
    return None if match is None else match.start()
