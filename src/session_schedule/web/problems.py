"""Refused requests: one exception for the handlers, one JSON shape for the page.

Every refusal — bad input, an unknown session, a security check — is answered with a status code
and ``{"error": "<one lower-case sentence saying what to do>"}``, and logged by whoever refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, final

from starlette.responses import JSONResponse


@final
class HttpProblem(Exception):  # noqa: N818 - a refusal, named for what the client gets
    """Refuse the request with ``status`` and ``message`` (raised by handlers)."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


def problem_response(
    status: int, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """The JSON answer to a refused request."""
    return JSONResponse({"error": message}, status_code=status, headers=headers)


MAX_ECHO_CHARS: Final = 64
"""How much of a client's id, path or name an error message or a log line repeats."""


def shorten(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with "…" when it was longer."""
    return text if len(text) <= limit else text[:limit] + "…"


def loggable(text: str) -> str:
    """``text`` safe for a log line: with a control character in it (a forged log line, say),
    its ``repr`` instead."""
    return text if text.isprintable() else repr(text)
