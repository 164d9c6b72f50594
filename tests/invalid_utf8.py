"""How the installed msgspec reports invalid UTF-8 inside a JSON string, for the tests that
compare whole error messages.

msgspec before 0.23 lets Python's ``UnicodeDecodeError`` through, and the decoders word it
themselves with its reason (``invalid UTF-8 in a string (invalid continuation byte)``); 0.23
checks UTF-8 itself and raises its own ``DecodeError`` (``Invalid UTF-8 encoded string``), which
the decoders report as malformed JSON. Both are supported (``msgspec>=0.19,<0.24``).
"""

from __future__ import annotations

from typing import Final

import msgspec


def _msgspec_checks_utf8() -> bool:
    try:
        msgspec.json.decode(b'"\xe1"')
    except UnicodeDecodeError:
        return False
    except msgspec.DecodeError:
        return True
    raise AssertionError("msgspec decoded invalid UTF-8 without complaint")


MSGSPEC_CHECKS_UTF8: Final = _msgspec_checks_utf8()
MALFORMED: Final = "malformed JSON (Invalid UTF-8 encoded string)"
"""What the decoders say with msgspec 0.23 and later."""


def in_a_string(reason: str) -> str:
    """The schedule decoders' message for invalid UTF-8 in a string whose Python reason (before
    msgspec 0.23) is ``reason``."""
    return MALFORMED if MSGSPEC_CHECKS_UTF8 else f"invalid UTF-8 in a string ({reason})"
