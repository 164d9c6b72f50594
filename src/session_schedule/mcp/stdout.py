"""The server's stdout: the wire to the host, and word of which answers have reached it.

The SDK's stdio transport hands each outgoing message to a writer task through a stream that
lets the sender go as soon as the writer has *received* the message — before a byte of it is
written. A take's follow-up may leave the outbox only once its answer is in the stdout pipe
(after that, killing the process no longer loses it: the host reads what the pipe holds). So
the server serves stdout itself:

- :func:`claimed_stdout` takes fd 1 for the wire while serving: the wire is written through a
  private duplicate of it, and fd 1 points at stderr meanwhile, so a stray ``print`` or a child
  process's output never lands between two protocol messages. fd 1 is restored on exit.
- :class:`StdoutWire` is what the SDK's writer writes each message to. A write returns once the
  message's bytes are all in the pipe, and then says which request it answered:
  :meth:`StdoutWire.written` is the future a sender waits on.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeAlias, final

import anyio.to_thread
import msgspec

RequestId: TypeAlias = int | str
"""A JSON-RPC request id, as the host chose it."""


class _Frame(msgspec.Struct, frozen=True):
    """The only fields of an outgoing JSON-RPC message the wire reads."""

    id: RequestId | None = None
    method: str | None = None


@final
class StdoutWire:
    """The stdout the SDK's writer writes to (it calls ``write`` and then ``flush``).

    ``write_bytes`` puts bytes on the wire and returns once all of them are there; it is
    :func:`fd_writer` of the wire's descriptor in the server, a stand-in in tests.
    """

    def __init__(self, write_bytes: Callable[[bytes], Awaitable[None]]) -> None:
        self._write_bytes = write_bytes
        self._waiting: dict[RequestId, asyncio.Future[bool]] = {}
        self._lock = asyncio.Lock()

    def written(self, request_id: RequestId) -> asyncio.Future[bool]:
        """A future of whether the response to ``request_id`` reached the wire: ``True`` once
        its write has returned, ``False`` if the write failed or was cancelled.

        Ask before sending the response, so that its write cannot be missed. A response that is
        never written leaves the future pending: :meth:`forget` it when its send fails.
        """
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = waiter
        return waiter

    def forget(self, request_id: RequestId, waiter: asyncio.Future[bool]) -> None:
        """Stop watching for the response to ``request_id`` (``waiter`` from :meth:`written`)."""
        if self._waiting.get(request_id) is waiter:
            del self._waiting[request_id]

    async def write(self, line: str) -> None:
        """Write one message to the wire; return once all its bytes are there.

        Raises what writing raises (a host that closed its end: :class:`BrokenPipeError`).
        """
        data = line.encode()
        answered = _answered(data)
        waiter = None if answered is None else self._waiting.pop(answered, None)
        went_out = False
        try:
            async with self._lock:
                await self._write_bytes(data)
            went_out = True
        finally:
            if waiter is not None and not waiter.done():
                waiter.set_result(went_out)

    async def write_unwatched(self, line: str) -> None:
        """Write one message to the wire between the others, resolving no :meth:`written`
        future (the server's answer to a line that never reached the SDK: its id, which the
        host chose, may be that of a request still under way)."""
        async with self._lock:
            await self._write_bytes(line.encode())

    async def flush(self) -> None:
        """Nothing to do: :meth:`write` returns only once its bytes are on the wire."""


def fd_writer(fd: int) -> Callable[[bytes], Awaitable[None]]:
    """Write bytes whole to ``fd``, in a worker thread so that a full pipe never blocks the event
    loop. A cancelled write still waits for its thread: once it returns, nothing writes to
    ``fd`` any more, so the caller may close it."""

    async def write_bytes(data: bytes) -> None:
        await anyio.to_thread.run_sync(_write_fully, fd, data)

    return write_bytes


@contextlib.contextmanager
def claimed_stdout() -> Iterator[int]:
    """Take fd 1 for the wire: yield a private duplicate of it (close-on-exec, above fd 2),
    with fd 1 pointing at stderr meanwhile; on exit, point fd 1 back at the wire and close the
    duplicate.

    Text still buffered in ``sys.stdout`` at exit is flushed first, to stderr: it was written
    while fd 1 was not the wire, and must not reach the wire once it is again.

    Raises :class:`OSError` when fd 1 cannot be duplicated (it is closed).
    """
    wire = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    try:
        os.dup2(2, 1)
        try:
            yield wire
        finally:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                sys.stdout.flush()  # ValueError: closed; AttributeError: None
            os.dup2(wire, 1)
    finally:
        os.close(wire)


def _write_fully(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _answered(data: bytes) -> RequestId | None:
    """The id of the request ``data`` answers; ``None`` for a request or a notification."""
    try:
        frame = msgspec.json.decode(data, type=_Frame)
    except msgspec.DecodeError:
        return None
    return frame.id if frame.method is None else None
