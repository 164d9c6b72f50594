"""The prompt rule (SPEC §8), one function shared by the create decision and the strict decoder.

A prompt is stored trimmed of leading and trailing Unicode whitespace: the characters with the
``White_Space`` property (:data:`WHITE_SPACE`; not ``str.strip``, which also strips the control
characters U+001C to U+001F). Once trimmed it must be non-empty, at most a configurable number
of characters long, free of lone surrogates (half characters that cannot be encoded) and of
control characters (Unicode category ``Cc``: U+0000 to U+001F and U+007F to U+009F) other than
newline and tab. The create decision trims what a model sent (:func:`trim`) and applies
:func:`prompt_fault`; the strict decoder requires the stored prompt to be trimmed already
(:func:`is_trimmed`) and applies the same function, without the length limit (a host setting: a
log written under a larger limit stays readable).
"""

from __future__ import annotations

import re
from typing import Final, Literal, NamedTuple, assert_never, final

from session_schedule.core.visible import first_surrogate

WHITE_SPACE: Final = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)
"""The characters with Unicode's ``White_Space`` property (PropList.txt; unchanged since Unicode
6.3 took U+180E out). ``str.isspace`` is true for these and for U+001C to U+001F, control
characters a prompt refuses, which ``str.strip`` would silently drop. U+0009 to U+000D and U+0085
are both white space and control characters: trimmed at the ends, refused inside."""

# Category Cc is closed by Unicode's stability policy; a character class is far faster than
# asking unicodedata about every character.
_FORBIDDEN_CONTROL: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")

PromptFaultKind = Literal["empty", "too_long", "surrogate", "control"]


@final
class PromptFault(NamedTuple):
    """Why a trimmed prompt is invalid."""

    kind: PromptFaultKind
    at: int
    """``control``, ``surrogate``: where the character is; ``too_long``: the prompt's length;
    ``empty``: 0."""
    character: str
    """``control``, ``surrogate``: the character; otherwise empty."""


def prompt_fault(prompt: str, *, max_chars: int | None) -> PromptFault | None:
    """What is wrong with the already-trimmed ``prompt`` (``None``: nothing).

    ``max_chars`` ``None`` skips the length limit.
    """
    if not prompt:
        return PromptFault("empty", 0, "")
    if max_chars is not None and len(prompt) > max_chars:
        return PromptFault("too_long", len(prompt), "")
    surrogate = first_surrogate(prompt)
    if surrogate is not None:
        return PromptFault("surrogate", surrogate, prompt[surrogate])
    found = _FORBIDDEN_CONTROL.search(prompt)
    if found is not None:
        return PromptFault("control", found.start(), found.group())
    return None


def trim(text: str) -> str:
    """``text`` without its leading and trailing :data:`WHITE_SPACE`."""
    return text.strip(WHITE_SPACE)


def is_trimmed(prompt: str) -> bool:
    """Whether ``prompt`` has no leading or trailing :data:`WHITE_SPACE`.

    A prompt stored before the trim was :data:`WHITE_SPACE` (when it was ``str.strip``) never
    starts or ends with U+001C to U+001F either, so this refuses no prompt a create ever wrote.
    """
    return not prompt or not (prompt[0] in WHITE_SPACE or prompt[-1] in WHITE_SPACE)


def describe_fault(fault: PromptFault) -> str:
    """The fault as a clause about a stored prompt (``the prompt is empty``, …)."""
    match fault.kind:
        case "empty":
            return "the prompt is empty"
        case "too_long":
            return f"the prompt has {fault.at} characters, more than allowed"
        case "surrogate":
            return (
                f"the prompt contains the lone surrogate U+{ord(fault.character):04X} at index "
                f"{fault.at}, half of a character that cannot be encoded"
            )
        case "control":
            return (
                f"the prompt contains the control character U+{ord(fault.character):04X} at "
                f"index {fault.at}; only newline and tab are allowed"
            )
        case _:
            assert_never(fault.kind)
