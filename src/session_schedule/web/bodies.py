"""Request bodies: their exact shapes, and the one strict way they are read.

A body is JSON (``Content-Type: application/json``), at most :data:`MAX_BODY_BYTES`, and decodes
to exactly one of the structs below — an unknown field, a missing one or a wrong type is refused.
Malformed JSON is 400, a body that is too large 413, another content type 415, a wrong shape 422;
each with one sentence saying what was wrong.
"""

from __future__ import annotations

from typing import Annotated, Final, TypeVar, final

import msgspec
from starlette.requests import Request

from session_schedule.web.problems import HttpProblem

MAX_BODY_BYTES: Final = 64 * 1024
MAX_PROMPT_CHARS: Final = 16_000
MAX_ZONE_CHARS: Final = 100

T = TypeVar("T")


@final
class PromptBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A prompt typed by the person, with the IANA zone the browser reported for it."""

    text: Annotated[str, msgspec.Meta(max_length=MAX_PROMPT_CHARS)]
    zone: Annotated[str, msgspec.Meta(max_length=MAX_ZONE_CHARS)] | None
    """``Intl.DateTimeFormat().resolvedOptions().timeZone``, or ``null`` when the browser gave
    none. Not checked here: an unrecognised zone makes the time context tell the model to ask."""


@final
class ForkBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    at: Annotated[int, msgspec.Meta(ge=0)] | None
    """How many leading log entries the fork copies; ``null`` for all of them."""


@final
class CreateBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Creating a Session takes nothing (an empty body or ``{}``)."""


async def read_json(request: Request, shape: type[T], *, empty: T | None = None) -> T:
    """The request body decoded strictly as ``shape``; ``empty`` stands for an empty body (which
    is refused when ``empty`` is ``None``). Raises :class:`HttpProblem`."""
    body = await read_body(request)
    if not body and empty is not None:
        return empty
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise HttpProblem(415, "send the body as JSON, with 'Content-Type: application/json'.")
    try:
        return msgspec.json.decode(body, type=shape, strict=True)
    except msgspec.ValidationError as error:
        raise HttpProblem(422, f"the body has the wrong shape: {_lower(str(error))}.") from None
    except msgspec.DecodeError:
        raise HttpProblem(400, "the body is not valid JSON.") from None


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The raw body, refused with 413 past ``limit`` bytes (checked before and while reading)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise HttpProblem(400, "the Content-Length header is not a number.")
        if int(declared) > limit:
            raise HttpProblem(413, f"the body is larger than {limit} bytes; send less.")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HttpProblem(413, f"the body is larger than {limit} bytes; send less.")
        chunks.append(chunk)
    return b"".join(chunks)


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:]
