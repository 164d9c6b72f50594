"""Text that is safe to show: characters that cannot be encoded, or cannot be seen, as escapes.

:func:`escape_unencodable` is for error messages that echo what a model sent: a lone surrogate
(what ``json.loads`` makes of a model's unpaired ``"\\ud83d"`` escape) cannot be encoded as UTF-8,
so it is written as the six characters ``\\ud83d`` instead.
"""

from __future__ import annotations

import re
from typing import Final

_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def escape_unencodable(text: str) -> str:
    """``text`` with every lone surrogate written as ``\\uXXXX``, so it always encodes as UTF-8."""
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def first_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in ``text``, or ``None``."""
    match = _SURROGATE.search(text)
    return None if match is None else match.start()
