"""``session-schedule chat`` in a child process, its stdin a pipe the test writes lines to."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Final, NamedTuple, Self

TIMEOUT: Final = 20.0
"""Generous, for slow CI machines; every wait is bounded by it."""
SESSION_ID: Final = re.compile(r"session-schedule chat: (?:new|resumed) session (s_[0-9a-z]{12})")


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the variables the chat reads, plus ``extra``."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("OPENAI_", "SESSION_SCHEDULE_"))
    }
    environment["PYTHONIOENCODING"] = "utf-8"
    environment.update(extra or {})
    return environment


class Finished(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


class ChatProcess:
    """Runs ``python -W error -m session_schedule --data-dir DIR chat ARGS…``.

    Use it as a context manager: leaving kills the child if it is still running and joins the
    reader threads, so nothing outlives the test.
    """

    def __init__(
        self, data_dir: Path, *arguments: str, environment: Mapping[str, str] | None = None
    ) -> None:
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-W",
                "error",
                "-m",
                "session_schedule",
                "--data-dir",
                str(data_dir),
                "chat",
                *arguments,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            env=child_environment(environment),
        )
        self._changed = threading.Condition()
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        self._seen = 0
        assert self._process.stdout is not None
        assert self._process.stderr is not None
        self._readers = [
            threading.Thread(target=self._drain, args=(self._process.stdout, self._stdout)),
            threading.Thread(target=self._drain, args=(self._process.stderr, self._stderr)),
        ]
        for reader in self._readers:
            reader.start()

    def _drain(self, stream: IO[str], into: list[str]) -> None:
        for line in stream:
            with self._changed:
                into.append(line)
                self._changed.notify_all()

    @property
    def output(self) -> str:
        with self._changed:
            return "".join(self._stdout)

    def send(self, line: str) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        stdin.write(line + "\n")
        stdin.flush()

    def expect(self, text: str, timeout: float = TIMEOUT) -> str:
        """Wait until ``text`` appears in stdout after what earlier calls matched; the output
        up to the end of the match."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                output = "".join(self._stdout)
                found = output.find(text, self._seen)
                if found >= 0:
                    self._seen = found + len(text)
                    return output[: self._seen]
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (self._process.poll() is not None and not self._more()):
                    raise AssertionError(
                        f"{text!r} did not appear within {timeout} s; stdout:\n{output}\n"
                        f"stderr:\n{''.join(self._stderr)}"
                    )
                self._changed.wait(min(remaining, 0.2))

    def _more(self) -> bool:
        return any(reader.is_alive() for reader in self._readers)

    def session_id(self) -> str:
        self.expect("session-schedule chat: ")
        found = SESSION_ID.search(self.output)
        assert found is not None, self.output
        return found.group(1)

    def finish(self, timeout: float = TIMEOUT, *, interrupt: bool = False) -> Finished:
        """Close stdin (end of input) — or, with ``interrupt``, send SIGINT as Ctrl-C would —
        and wait for the child to exit."""
        stdin = self._process.stdin
        assert stdin is not None
        if interrupt:
            self._process.send_signal(signal.SIGINT)
            returncode = self._process.wait(timeout)
            stdin.close()
        else:
            stdin.close()
            returncode = self._process.wait(timeout)
        for reader in self._readers:
            reader.join(timeout)
        with self._changed:
            return Finished(returncode, "".join(self._stdout), "".join(self._stderr))

    def kill(self) -> Finished:
        """SIGKILL the child at once and collect what it wrote."""
        self._process.send_signal(signal.SIGKILL)
        returncode = self._process.wait(TIMEOUT)
        for reader in self._readers:
            reader.join(TIMEOUT)
        with self._changed:
            return Finished(returncode, "".join(self._stdout), "".join(self._stderr))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        for reader in self._readers:
            reader.join()
        for stream in (self._process.stdin, self._process.stdout, self._process.stderr):
            if stream is not None:
                stream.close()
