"""Session ids: ``s_`` and twelve lower-case letters or digits (``s_7k2m4q9x3v5b``).

An id names a file in a data directory and a row in a database, so every id that comes from
outside is checked against this exact form before it touches storage: nothing else can pass for
one (no path separators, no ``..``, no trailing newline). Stores mint new ids with
:func:`new_session_id`; a caller may choose its own id of the same form.
"""

from __future__ import annotations

import base64
import re
import secrets
from typing import Final, NewType

from session_schedule.session.errors import not_a_session_id

SessionId = NewType("SessionId", str)

SESSION_ID_PATTERN: Final = r"^s_[0-9a-z]{12}$"
"""The id form as a JSON-Schema (ECMA-262) pattern."""
_ID: Final = re.compile(r"s_[0-9a-z]{12}", re.ASCII)


def parse_session_id(text: str) -> SessionId | None:
    """The id ``text`` names, or ``None`` when it is not of the id form."""
    return SessionId(text) if _ID.fullmatch(text) else None


def new_session_id() -> SessionId:
    """A fresh random id (60 bits of entropy, base32 lower-case)."""
    token = base64.b32encode(secrets.token_bytes(10)).decode("ascii").lower()
    return SessionId(f"s_{token[:12]}")


def require_session_id(text: str) -> SessionId:
    """The id ``text`` names; ``SessionNotFound`` when it is not of the id form."""
    session_id = parse_session_id(text)
    if session_id is None:
        raise not_a_session_id(text)
    return session_id


def chosen_session_id(session_id: str | None) -> SessionId | None:
    """Check an id a caller chose for a new session; ``ValueError`` when it is not of the form."""
    if session_id is None:
        return None
    parsed = parse_session_id(session_id)
    if parsed is None:
        raise ValueError(not_a_session_id(session_id).message)
    return parsed
