"""The web overlay under a flood of idle sockets: does a real request still get through, how
fast, and how much does the server log?

    python3 dev.py bench web_flood [--sockets N] [--descriptors L] [--window S]

Runs ``session-schedule serve --port 0`` (token mode, offline, a temporary data directory) in a
child process whose descriptor limit is ``L`` (default 1024, the common default), opens ``N``
idle TCP connections to it (default 2,000: more than the server may hold), waits a second, then
sends one ``GET /api/info`` with the token and times it (10 s timeout). It keeps the idle sockets
open until ``S`` seconds (default 15) have passed, stops the server with SIGINT and prints the
size of everything the server wrote to stderr. A baseline for the request is the same request
with no flood, measured first in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2

SCRIPT = """\
import sys
from session_schedule.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _request(address: str, token: str) -> tuple[str, float]:
    started = time.monotonic()
    try:
        with httpx2.Client(
            base_url=address, headers={"authorization": f"Bearer {token}"}, timeout=10
        ) as client:
            status = str(client.get("/api/info").status_code)
    except httpx2.HTTPError as error:
        status = type(error).__name__
    return status, time.monotonic() - started


def run(sockets: int, descriptors: int, window: float, directory: Path) -> None:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (descriptors, descriptors))

    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in {"SESSION_SCHEDULE_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"}
    }
    log = directory / "stderr.log"
    argv = ["--data-dir", str(directory / "data"), "serve", "--port", "0"]
    with log.open("w") as stderr:
        process = subprocess.Popen(  # noqa: S603 - this interpreter, our own arguments
            [sys.executable, "-c", SCRIPT, *argv],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=environment,
            preexec_fn=limit,  # noqa: PLW1509 - no threads in the child before exec
        )
    try:
        if process.stdout is None:
            raise SystemExit("serve's output is not readable")
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            if not selector.select(15):
                raise SystemExit("serve printed nothing within 15 s")
        url = process.stdout.readline().partition(" is at ")[2].strip()
        address, _, token = url.partition("?token=")
        port = int(address.rstrip("/").rpartition(":")[2])
        status, seconds = _request(address, token)
        print(f"baseline (no flood): {status} in {seconds * 1000:.1f} ms")
        started = time.monotonic()
        with contextlib.ExitStack() as stack:
            for _ in range(sockets):
                sock = stack.enter_context(socket.socket())
                sock.settimeout(0.0)  # non-blocking: connect and move on
                sock.connect_ex(("127.0.0.1", port))
            time.sleep(1)
            status, seconds = _request(address, token)
            print(
                f"with {sockets:,} idle sockets (server limit {descriptors} descriptors): "
                f"{status} in {seconds * 1000:.1f} ms"
            )
            time.sleep(max(0.0, window - (time.monotonic() - started)))
        process.send_signal(signal.SIGINT)
        process.wait(15)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=15)
    print(f"server stderr after {window:g} s: {log.stat().st_size:,} bytes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sockets", type=int, default=2000)
    parser.add_argument("--descriptors", type=int, default=1024)
    parser.add_argument("--window", type=float, default=15.0)
    arguments = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < arguments.sockets + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, arguments.sockets + 64), hard))
    with tempfile.TemporaryDirectory() as directory:
        run(arguments.sockets, arguments.descriptors, arguments.window, Path(directory))


if __name__ == "__main__":
    main()
