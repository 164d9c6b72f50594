"""The server's stdout: a wire only protocol messages reach, that says which answers it wrote."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from session_schedule.mcp.stdout import StdoutWire, claimed_stdout, fd_writer
from session_schedule.runtime.clock import SystemClock
from session_schedule.session.jsonl import JsonlSessionStore


class Pipe:
    """Bytes written to the wire, and a gate that holds each write until it is opened."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.gate = asyncio.Event()
        self.broken = False

    async def write(self, data: bytes) -> None:
        await self.gate.wait()
        if self.broken:
            raise BrokenPipeError("the host closed its end")
        self.written.append(data)


def _line(message: Mapping[str, object]) -> str:
    return json.dumps(message) + "\n"


async def test_a_response_counts_as_written_only_once_its_write_has_returned() -> None:
    pipe = Pipe()
    wire = StdoutWire(pipe.write)
    written = wire.written(7)
    line = _line({"jsonrpc": "2.0", "id": 7, "result": {}})
    writing = asyncio.create_task(wire.write(line))
    await asyncio.sleep(0)
    assert not written.done()
    pipe.gate.set()
    await writing
    await wire.flush()
    assert pipe.written == [line.encode()]
    assert written.result() is True


async def test_only_the_response_to_the_request_resolves_its_future() -> None:
    pipe = Pipe()
    pipe.gate.set()
    wire = StdoutWire(pipe.write)
    by_number = wire.written(3)
    by_text = wire.written("3")
    others: list[dict[str, object]] = [
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},  # a request of the server's own
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"id": 3}},
        {"jsonrpc": "2.0", "id": 4, "result": {}},
    ]
    for message in others:
        await wire.write(_line(message))
    assert not by_number.done()
    assert not by_text.done()
    await wire.write(_line({"jsonrpc": "2.0", "id": "3", "error": {"code": 0, "message": "x"}}))
    assert by_text.result() is True
    assert not by_number.done()
    await wire.write(_line({"jsonrpc": "2.0", "id": 3, "result": {}}))
    assert by_number.result() is True


async def test_a_failed_write_says_the_response_did_not_go_out() -> None:
    pipe = Pipe()
    pipe.gate.set()
    pipe.broken = True
    wire = StdoutWire(pipe.write)
    written = wire.written(1)
    with pytest.raises(BrokenPipeError, match=r"^the host closed its end$"):
        await wire.write(_line({"jsonrpc": "2.0", "id": 1, "result": {}}))
    assert written.result() is False


async def test_a_cancelled_write_says_the_response_did_not_go_out() -> None:
    wire = StdoutWire(Pipe().write)
    written = wire.written(1)
    writing = asyncio.create_task(wire.write(_line({"jsonrpc": "2.0", "id": 1, "result": {}})))
    await asyncio.sleep(0)
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writing
    assert written.result() is False


async def test_a_forgotten_response_is_no_longer_watched() -> None:
    pipe = Pipe()
    pipe.gate.set()
    wire = StdoutWire(pipe.write)
    forgotten = wire.written(1)
    wire.forget(1, forgotten)
    wire.forget(1, forgotten)  # a second time changes nothing
    await wire.write(_line({"jsonrpc": "2.0", "id": 1, "result": {}}))
    assert not forgotten.done()


async def test_the_fd_writer_writes_everything_across_partial_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reader, writer = os.pipe()
    real_write = os.write
    calls = 0

    def short_write(fd: int, data: bytes) -> int:
        nonlocal calls
        if fd != writer:
            return real_write(fd, data)
        calls += 1
        return real_write(fd, bytes(data[:5]))

    monkeypatch.setattr(os, "write", short_write)
    data = b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
    try:
        await fd_writer(writer)(data)
        assert os.read(reader, 1024) == data
    finally:
        os.close(reader)
        os.close(writer)
    assert calls == 8


def test_stdout_is_claimed_for_the_wire_and_restored(capfd: pytest.CaptureFixture[str]) -> None:
    before = os.fstat(1)
    with claimed_stdout() as wire:
        assert wire > 2
        assert fcntl.fcntl(wire, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        os.write(1, b"stray\n")
        os.write(wire, b"on the wire\n")
    after = os.fstat(1)
    os.write(1, b"after\n")
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(wire)
    assert capfd.readouterr() == ("on the wire\nafter\n", "stray\n")


_NOISY_SERVER = """
import asyncio, contextlib, os, subprocess, sys
from pathlib import Path
import session_schedule.mcp.server as server

real_stdio_server = server.stdio_server

@contextlib.asynccontextmanager
async def noisy_stdio_server(**streams):
    async with real_stdio_server(**streams) as transport:
        print("stray flushed print", flush=True)
        os.write(1, b"stray write\\n")
        subprocess.run([sys.executable, "-c", "print('stray child')"], check=True)
        print("stray print")  # left in the buffer, to be flushed after serving
        yield transport

server.stdio_server = noisy_stdio_server
asyncio.run(server.serve_stdio(Path(sys.argv[1]), sys.argv[2]))
print("after serving")
"""


def test_stray_output_while_serving_misses_the_wire_and_stdout_is_restored_after(
    tmp_path: Path,
) -> None:
    session_id = asyncio.run(_new_session(tmp_path))
    errlog = tmp_path / "server-stderr.txt"
    with (
        errlog.open("wb") as stderr,
        subprocess.Popen(
            [sys.executable, "-c", _NOISY_SERVER, str(tmp_path), session_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            # Buffered, as stdout to a pipe is by default: the stray print stays in the buffer.
            env={name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"},
        ) as process,
    ):
        assert process.stdin is not None
        assert process.stdout is not None
        initialize = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "stdout-test", "version": "1"},
        }
        requests: list[dict[str, object]] = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        ]
        for message in requests:
            process.stdin.write(_line(message).encode())
        process.stdin.flush()
        answers = [json.loads(process.stdout.readline()) for _ in range(2)]
        process.stdin.close()
        rest = process.stdout.read()
        assert process.wait(timeout=60) == 0
    assert [(answer["id"], sorted(answer)) for answer in answers] == [
        (1, ["id", "jsonrpc", "result"]),
        (2, ["id", "jsonrpc", "result"]),
    ]
    assert rest == b"after serving\n"
    stray = [line for line in errlog.read_text().splitlines() if line.startswith("stray")]
    assert sorted(stray) == ["stray child", "stray flushed print", "stray print", "stray write"]


async def _new_session(directory: Path) -> str:
    session = await JsonlSessionStore(directory).create(now=SystemClock().now())
    await session.close()
    return session.id
