"""The server's stdin: bounded lines, and a JSON-RPC answer to every request that does not decode.

The SDK's stdio transport reads stdin a line at a time without a bound (a line with no newline
grows until memory runs out) and drops a line it cannot decode without answering it; a line
whose ``id`` is a float, an object or ``true`` even passes as a notification, which is never
answered. A host that sent one of those waits for an answer forever. So the server reads stdin
itself:

- :func:`claimed_stdin` takes fd 0 while serving: the wire is read through a private duplicate,
  and fd 0 reads the null device meanwhile (a child process never eats a request).
- :class:`StdinLines` is what the SDK reads lines from. Each line is screened first
  (:func:`screen`): at most :data:`MAX_LINE_BYTES` bytes, UTF-8, nested at most
  :data:`MAX_DEPTH` deep (found by a linear scan, before any decoder recurses), JSON that
  decodes (no lone surrogate, no number out of range), one message (not a batch), an object,
  whose ``id`` — if it has one — is a string or an integer. A line that fails is answered with
  the JSON-RPC error it deserves, on the wire, and never reaches the SDK: ``-32700`` (parse
  error) for what does not decode, ``-32600`` (invalid request) for the rest, with the request's
  ``id`` when one could be read and ``null`` otherwise, as JSON-RPC 2.0 says. A notification
  (no ``id``) that does not decode as one gets no answer, as notifications never do.

  One exception: a ``tools/call`` request that does not decode only because of its
  ``arguments`` — a lone surrogate escape (a broken emoji a model wrote) or a number out of
  range (``1e400``) in them — is the model's mistake, which the model must hear about as the
  tool's error. Such a line reaches the SDK rewritten (:func:`arguments_as_text`): the
  arguments as JSON text under :data:`ARGUMENTS_TEXT`, which the server hands to the tool.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Final, final

import anyio.to_thread
import msgspec
from mcp import types

from session_schedule.core.visible import escape_unencodable
from session_schedule.tools.nesting import json_depth
from session_schedule.tools.written import holds_written_number, json_text, loads_as_written

MAX_LINE_BYTES: Final = 4 * 1024 * 1024
"""The longest line read (a message, its newline excluded); a longer one is answered -32600."""
MAX_DEPTH: Final = 64
"""How deep arrays and objects may nest in a message."""
READ_BYTES: Final = 65536
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
ARGUMENTS_TEXT: Final = f"session-schedule/arguments-text-{secrets.token_hex(8)}"
"""The ``tools/call`` params key under which :func:`arguments_as_text` puts the arguments as
JSON text. It holds a random part, drawn once per process, so that no client can send it."""
_OUT_OF_RANGE: Final = "a number in the message is out of range; send smaller numbers."
_NOT_JSON: Final = "the message is not valid JSON; send one JSON-RPC message per line."
_LONE_SURROGATE: Final = (
    "the message is not valid JSON: it holds a lone surrogate escape, half of a character that "
    "cannot be encoded; send the whole character or remove it."
)
_NOT_A_NUMBER: Final = (
    "the message is not valid JSON: JSON has no NaN or Infinity; send finite numbers."
)

_encoder = msgspec.json.Encoder()


@final
class StdinLines:
    """The lines of the wire, screened: iterating yields each message the SDK may decode, and
    answers every other one through ``answer`` (which writes one line to the wire).

    ``read_bytes`` returns the next bytes of the wire, ``b""`` at its end (:func:`fd_reader` of
    the wire's descriptor in the server, a stand-in in tests).
    """

    def __init__(
        self,
        read_bytes: Callable[[], Awaitable[bytes]],
        answer: Callable[[str], Awaitable[None]],
        *,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self._read_bytes = read_bytes
        self._answer = answer
        self._max = max_line_bytes

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        buffer = bytearray()
        skipping = False  # inside a line that was too long: drop bytes up to its newline
        while True:
            chunk = await self._read_bytes()
            if not chunk:
                break
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                piece = chunk[start:end]
                start = end + 1
                if skipping:
                    skipping = False
                    continue
                if len(buffer) + len(piece) > self._max:
                    buffer.clear()
                    await self._too_long()
                    continue
                buffer += piece
                line = bytes(buffer)
                buffer.clear()
                text = await self._screened(line)
                if text is not None:
                    yield text
            if skipping:
                continue
            buffer += chunk[start:]
            if len(buffer) > self._max:
                buffer.clear()
                skipping = True
                await self._too_long()
        if buffer and not skipping:
            text = await self._screened(bytes(buffer))
            if text is not None:
                yield text

    async def _screened(self, line: bytes) -> str | None:
        text, error = screen(line)
        if error is not None:
            await self._answer(error)
        return text

    async def _too_long(self) -> None:
        await self._answer(
            _error(
                None,
                INVALID_REQUEST,
                f"the message is longer than {self._max} bytes; send less in one request.",
            )
        )


class _Id(msgspec.Struct):
    id: str | int | msgspec.UnsetType | None = msgspec.UNSET


def _request_id(line: bytes) -> str | int | msgspec.UnsetType | None:
    """The ``id`` of a message the server will not decode whole (too deep, a number out of
    range, a lone surrogate), read without building the rest where the message allows it, so
    that its sender gets the answer it waits for: ``UNSET`` for a message without one (a
    notification, never answered), ``None`` when it cannot be read (the error's ``id`` is then
    ``null``, as JSON-RPC 2.0 says)."""
    try:
        return msgspec.json.decode(line, type=_Id).id
    except (msgspec.DecodeError, RecursionError):
        pass
    if json_depth(line) > MAX_DEPTH:
        return None
    # msgspec refuses a lone surrogate escape anywhere in the line; the standard library's
    # decoder reads it (the line is at most MAX_DEPTH deep, so it does not recurse far).
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    found: object = value.get("id", msgspec.UNSET)
    if isinstance(found, msgspec.UnsetType):
        return found
    if type(found) is int:
        return found
    if isinstance(found, str) and escape_unencodable(found) == found:
        return found  # an id an answer can carry (no lone surrogate)
    return None


def _refused(line: bytes, message: str) -> tuple[None, str | None]:
    """A line that does not decode, answered ``-32700`` with its request's ``id`` when that can
    be read (see :func:`_request_id`), or not at all when it is a notification."""
    request_id = _request_id(line)
    if isinstance(request_id, msgspec.UnsetType):
        return None, None  # a notification: never answered
    return None, _error(request_id, PARSE_ERROR, message)


def screen(line: bytes) -> tuple[str | None, str | None]:
    """``(text, None)`` for a line the SDK may decode; ``(None, answer)`` for one answered here
    (``answer`` is the JSON-RPC error line, newline included); ``(None, None)`` for a blank line
    or a notification that does not decode (nothing to answer)."""
    if not line.strip():
        return None, None
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None, _error(None, PARSE_ERROR, "the message is not valid UTF-8; send UTF-8 JSON.")
    if json_depth(line) > MAX_DEPTH:
        return _refused(
            line, f"the message nests arrays or objects more than {MAX_DEPTH} deep; send less."
        )
    try:
        value = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError) as error:
        rewritten = arguments_as_text(text)
        if rewritten is None:
            out_of_range = isinstance(error, msgspec.ValidationError)
            return _refused(line, _OUT_OF_RANGE if out_of_range else _why_not_json(text))
        line, text = rewritten, rewritten.decode()
        value = msgspec.json.decode(line)
    if isinstance(value, list):
        return None, _error(
            None,
            INVALID_REQUEST,
            "batches are not supported; send one JSON-RPC message per line.",
        )
    if not isinstance(value, dict):
        return None, _error(
            None, INVALID_REQUEST, "the message is not a JSON-RPC object; send one per line."
        )
    if "id" in value:
        request_id = value["id"]
        if type(request_id) not in {str, int}:
            return None, _error(
                None,
                INVALID_REQUEST,
                "the id must be a string or an integer; send the request again with one.",
            )
    else:
        request_id = None
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:
        if request_id is None:
            return None, None  # a notification: never answered
        return None, _error(
            request_id,
            INVALID_REQUEST,
            "the message is not a valid JSON-RPC 2.0 request; send jsonrpc, id, method and params.",
        )
    return text, None


def _why_not_json(text: str) -> str:
    """The message for ``text``, a line msgspec refuses as malformed JSON, naming why where
    that is one thing: it decodes but for a lone surrogate escape (which the standard
    library's decoder reads), or for ``NaN`` or ``Infinity`` (which it reads when asked to).

    ``text`` is at most :data:`MAX_DEPTH` deep (checked before), so that decoder does not
    recurse far."""
    try:
        loads_as_written(text, constants=False)
    except (ValueError, RecursionError):
        pass
    else:
        return _LONE_SURROGATE
    try:
        loads_as_written(text, constants=True)
    except (ValueError, RecursionError):
        return _NOT_JSON
    return _NOT_A_NUMBER


def arguments_as_text(text: str) -> bytes | None:
    """``text``, a ``tools/call`` request that msgspec refuses only for what its ``arguments``
    hold — a lone surrogate escape, a number out of range — with the arguments moved to
    :data:`ARGUMENTS_TEXT` as JSON text (numbers as written, lone surrogates as their escapes:
    the tool answers as ``ScheduleTools.call`` does for that text); ``None`` for any other line
    (not JSON — ``NaN`` is not —, not such a request, or the rest of it holding one too).

    ``text`` is at most :data:`MAX_DEPTH` deep (checked before), so the standard library's
    decoder, which reads lone surrogates, does not recurse far."""
    try:
        value = loads_as_written(text, constants=False)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or value.get("method") != "tools/call":
        return None
    if type(value.get("id")) not in {str, int}:
        return None  # a notification, or an id no answer can carry: refused as before
    params = value.get("params")
    if not isinstance(params, dict) or "arguments" not in params:
        return None
    rest = {key: item for key, item in params.items() if key != "arguments"}
    rest[ARGUMENTS_TEXT] = json_text(params["arguments"])
    message = {**value, "params": rest}
    if holds_written_number(message):
        return None
    try:
        return _encoder.encode(message)
    except UnicodeEncodeError:  # a lone surrogate outside the arguments
        return None


def _error(request_id: str | int | None, code: int, message: str) -> str:
    return (
        _encoder.encode(
            {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
        ).decode()
        + "\n"
    )


def fd_reader(fd: int) -> Callable[[], Awaitable[bytes]]:
    """Read the next bytes of ``fd`` (``b""`` at its end) in a worker thread. A cancelled read
    leaves its thread to finish on its own, so ``fd`` must stay open (see
    :func:`claimed_stdin`)."""

    async def read_bytes() -> bytes:
        return await anyio.to_thread.run_sync(os.read, fd, READ_BYTES, abandon_on_cancel=True)

    return read_bytes


@contextlib.contextmanager
def claimed_stdin() -> Iterator[int]:
    """Take fd 0 for the wire: yield a private duplicate of it (close-on-exec, above fd 2),
    with fd 0 reading the null device meanwhile; on exit, point fd 0 back at the wire.

    The duplicate is not closed: a read abandoned at shutdown may still be blocked on it in a
    worker thread, and a closed descriptor could be reused under it (one descriptor, once per
    process that serves).

    Raises :class:`OSError` when fd 0 cannot be duplicated (it is closed).
    """
    wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield wire
    finally:
        os.dup2(wire, 0)
