"""Request bodies: their exact shapes, and the one strict way they are read.

A body is JSON (``Content-Type: application/json``, checked for an empty body too), UTF-8, at
most :data:`MAX_BODY_BYTES`, nested at most :data:`MAX_DEPTH` deep, with every key once per
object, and decodes to exactly one of the structs below — an unknown field, a missing one or a
wrong type is refused. Malformed JSON (invalid UTF-8 and too deep included) is 400, a body that
does not arrive within the body deadline 408, a body that is too large 413, another content type
415, a wrong shape (a repeated key included) 422; each with one sentence saying what was wrong.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Annotated, Final, TypeVar, final

import msgspec
from starlette.requests import Request

from session_schedule.tools.nesting import json_depth
from session_schedule.tools.written import refuse_constant
from session_schedule.web.problems import HttpProblem, shorten

MAX_BODY_BYTES: Final = 64 * 1024
MAX_PROMPT_CHARS: Final = 16_000
MAX_ZONE_CHARS: Final = 100
MAX_DEPTH: Final = 32
"""How deep arrays and objects may nest in a body (the deepest real body nests 3 deep)."""
DEFAULT_BODY_SECONDS: Final = 10.0
"""How long a body may take to arrive, once its headers have (a slow body is refused, 408)."""

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
    at: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """How many leading log entries the fork copies; ``null`` (or absent, or an empty body) for
    all of them."""


@final
class CreateBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Creating a Session takes nothing (an empty body or ``{}``)."""


async def read_json(
    request: Request,
    shape: type[T],
    *,
    empty: T | None = None,
    timeout: float = DEFAULT_BODY_SECONDS,
    lone_surrogates: bool = False,
) -> T:
    """The request body decoded strictly as ``shape``; ``empty`` stands for an empty body (which
    is refused when ``empty`` is ``None``). The body must arrive within ``timeout`` seconds.
    ``lone_surrogates``: see :func:`decode_json`. Raises :class:`HttpProblem`."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise HttpProblem(415, "send the body as JSON, with 'Content-Type: application/json'.")
    body = await read_body(request, timeout=timeout)
    if not body and empty is not None:
        return empty
    return decode_json(body, shape, lone_surrogates=lone_surrogates)


def decode_json(body: bytes, shape: type[T], *, lone_surrogates: bool = False) -> T:
    """``body`` decoded strictly as ``shape``; raises :class:`HttpProblem` (400 or 422).

    With ``lone_surrogates`` (a tool's arguments), a string may hold a lone surrogate's escape,
    as a browser's ``JSON.stringify`` writes one (``"\\ud83d"``): such a body is read by the
    standard library's parser instead, so that the tool says which value holds it, as it does
    for a model."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        raise HttpProblem(400, "the body is not valid UTF-8.") from None
    if json_depth(body) > MAX_DEPTH:
        raise HttpProblem(
            400, f"the body nests arrays or objects more than {MAX_DEPTH} deep; send less."
        )
    try:
        value = msgspec.json.decode(body, type=shape, strict=True)
    except msgspec.ValidationError as error:
        raise HttpProblem(422, f"the body has the wrong shape: {_lower(str(error))}.") from None
    except msgspec.DecodeError:
        if not (lone_surrogates and _SURROGATE_ESCAPE.search(body)):
            raise HttpProblem(400, "the body is not valid JSON.") from None
        try:
            parsed = json.loads(
                body, parse_constant=refuse_constant, object_pairs_hook=_unique_keys
            )
        except ValueError:
            raise HttpProblem(400, "the body is not valid JSON.") from None
        try:
            return msgspec.convert(parsed, type=shape, strict=True)
        except msgspec.ValidationError as error:
            raise HttpProblem(422, f"the body has the wrong shape: {_lower(str(error))}.") from None
    # msgspec keeps the last of repeated keys; the stdlib parser (safe now: valid, shallow JSON)
    # shows every one, so a body cannot mean two things to two readers.
    json.loads(body, object_pairs_hook=_unique_keys)
    return value


async def read_body(
    request: Request, limit: int = MAX_BODY_BYTES, *, timeout: float = DEFAULT_BODY_SECONDS
) -> bytes:
    """The raw body, refused with 413 past ``limit`` bytes (checked before and while reading) and
    with 408 when it has not all arrived within ``timeout`` seconds."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not (declared.isascii() and declared.isdigit()):
            raise HttpProblem(400, "the Content-Length header is not a number.")
        if int(declared) > limit:
            raise HttpProblem(413, f"the body is larger than {limit} bytes; send less.")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise HttpProblem(413, f"the body is larger than {limit} bytes; send less.")
                chunks.append(chunk)
    except TimeoutError:
        # The rest of the body may still come: the connection cannot carry another request.
        raise HttpProblem(
            408,
            f"the body did not arrive within {timeout:g} seconds; send it all at once.",
            {"connection": "close"},
        ) from None
    return b"".join(chunks)


_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")
"""The JSON escape of a surrogate (paired or lone), which the strict decoder refuses alone."""


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    found: dict[str, object] = {}
    for key, value in pairs:
        if key in found:
            raise HttpProblem(
                422, f"the body has the key {shorten(key)!r} more than once; send each key once."
            )
        found[key] = value
    return found


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:]
