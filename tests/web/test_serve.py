"""``session-schedule serve``: its options, its refusals, and a real server stopped by Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from session_schedule.cli import serve as serve_cli
from session_schedule.cli.main import add_store_option
from session_schedule.web import server as web_server
from session_schedule.web.app import OverlayApp
from session_schedule.web.live import LiveLimits
from session_schedule.web.server import Limits, bind

WAIT_SECONDS = 15
SCRIPT = """\
import argparse, sys
from pathlib import Path
from session_schedule.cli import serve
parser = argparse.ArgumentParser(prog="session-schedule")
parser.add_argument("--data-dir", type=Path)
serve.register(parser.add_subparsers(dest="command"))
arguments = parser.parse_args()
try:
    sys.exit(arguments.handler(arguments))
except KeyboardInterrupt:  # as the program's main() does
    sys.exit(0)
"""
MODEL_VARIABLES = ("SESSION_SCHEDULE_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY")


def parser() -> argparse.ArgumentParser:
    parsed = argparse.ArgumentParser(prog="session-schedule")
    parsed.add_argument("--data-dir", type=Path)
    add_store_option(parsed, default=None)
    serve_cli.register(parsed.add_subparsers(dest="command"))
    return parsed


def run(argv: list[str]) -> int:
    arguments = parser().parse_args(argv)
    code: int = arguments.handler(arguments)
    return code


@pytest.fixture(autouse=True)
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in MODEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_help_names_the_options_and_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args(["serve", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: session-schedule serve [-h] [--host HOST] [--port PORT]")
    for option in ("--model MODEL", "--base-url URL", "--token TOKEN"):
        assert option in out
    assert "\nexample: session-schedule serve --model" in out


def test_defaults_are_loopback_port_8765_and_offline() -> None:
    arguments = parser().parse_args(["serve"])
    assert (arguments.host, arguments.port, arguments.model, arguments.token) == (
        "127.0.0.1",
        8765,
        None,
        None,
    )


@pytest.mark.parametrize("port", ["70000", "-1", "http"])
def test_a_port_out_of_range_is_a_usage_error(
    port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args(["serve", "--port", port])
    assert exit_info.value.code == 2
    assert "is not a port number (0-65535)" in capsys.readouterr().err


STRONG = "q8Zr2-Lm_x7Vb3Nc9Tk4Wd"  # 22 url-safe characters: 132 bits


@pytest.mark.parametrize("token", ["has space in it", "ünïcödé-token", "x" * 257])
def test_an_odd_token_is_refused(token: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["serve", "--token", token]) == 2
    assert capsys.readouterr().err == (
        "session-schedule: --token must be 1 to 256 characters: letters, digits, '-', '_', '.' "
        "or '~'\n"
    )


@pytest.mark.parametrize(
    ("token", "bits"),
    [
        ("short", 0),
        ("abcdefgabcdefgabcdefgabcdefgabcdefg", 0),  # fewer than 8 distinct characters
        ("a-chosen-token", 68),
        ("3f9a0c7e12b48d65e0a9c3f71d2b658", 124),  # 31 hex digits
        ("q8Zr2-Lm_x7Vb3Nc9Tk4W", 126),  # 21 url-safe characters
        ("correcthorsebatterystaple", 117),
        ("abcdefgh" * 4, 37),  # one period of 8 lower-case letters
        ("0123456789abcdef0123456789abcdef", 64),  # 16 hex digits, twice
    ],
)
def test_a_token_with_less_than_128_bits_is_refused(
    token: str, bits: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert serve_cli.token_bits(token) == bits
    assert run(["serve", "--token", token]) == 2
    assert capsys.readouterr().err == (
        f"session-schedule: --token is too easy to guess: about {bits} bits, and it needs at "
        "least 128 (for example 32 random url-safe characters or 32 hex digits; python3 -c "
        "'import secrets; print(secrets.token_urlsafe(32))' makes one), or leave it out and one "
        "is generated\n"
    )


@pytest.mark.parametrize(
    ("token", "bits"),
    [
        (STRONG, 132),
        ("3f9a0c7e12b48d65e0a9c3f71d2b6584", 128),
        ("Kf83jD0sL2mQ9xZ1vB7nR4tY6wE5uI0p", 190),
        ("q8zr2lmx7vb3nc9tk4wdh5jy6fpa0ge1", 165),
        (STRONG * 2, 132),  # a strong part twice is as strong as once
    ],
)
def test_a_token_with_128_bits_or_more_is_accepted(token: str, bits: int) -> None:
    assert serve_cli.token_bits(token) == bits


def test_no_token_is_for_loopback_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["serve", "--host", "0.0.0.0", "--no-token"]) == 2  # noqa: S104
    assert capsys.readouterr().err == (
        "session-schedule: --no-token is for a loopback --host only; 0.0.0.0 is reachable from "
        "other machines, so it always needs the token\n"
    )


def test_token_options_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args(["serve", "--token", STRONG, "--no-token"])
    assert exit_info.value.code == 2
    assert "not allowed with argument --token" in capsys.readouterr().err


def test_an_unreadable_token_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing"
    assert run(["serve", "--token-file", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"session-schedule: cannot read --token-file {missing} (No such file or directory)\n"
    )
    weak = tmp_path / "weak"
    weak.write_text("hunter2\n")
    weak.chmod(0o600)
    assert run(["serve", "--token-file", str(weak)]) == 2
    assert capsys.readouterr().err.startswith(
        "session-schedule: --token-file is too easy to guess: about 0 bits"
    )


def test_a_token_file_others_can_read_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = tmp_path / "token"
    token.write_text(f"{STRONG}\n")
    for mode in (0o644, 0o640, 0o604):
        token.chmod(mode)
        assert run(["serve", "--token-file", str(token)]) == 2
        assert capsys.readouterr().err == (
            f"session-schedule: --token-file {token} can be read by other users (mode "
            f"{mode:04o}); make it readable by its owner only (chmod 600 {token})\n"
        )


def test_a_token_file_that_is_a_link_a_fifo_or_a_device_is_refused_without_blocking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "target"
    target.write_text(f"{STRONG}\n")
    target.chmod(0o600)
    link = tmp_path / "link"
    link.symlink_to(target)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 5000)
    big.chmod(0o600)
    expected = {
        link: "it is a symbolic link, not a regular file",
        fifo: "it is a named pipe (FIFO), not a regular file",
        Path("/dev/zero"): "it is a character device, not a regular file",
        big: "it holds 5000 bytes, more than 4096",
    }
    for path, reason in expected.items():
        assert run(["serve", "--token-file", str(path)]) == 2
        assert capsys.readouterr().err == (
            f"session-schedule: cannot read --token-file {path} ({reason})\n"
        )


def first_address(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().out.splitlines()[0]


def test_the_generated_token_is_kept_0600_and_survives_a_restart(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(web_server, "OverlayServer", _FakeServer)
    monkeypatch.delenv("SESSION_SCHEDULE_TOKEN", raising=False)
    data = tmp_path / "new" / "data"
    old_umask = os.umask(0)
    try:
        assert run(["--data-dir", str(data), "serve", "--port", "0"]) == 0
    finally:
        os.umask(old_umask)
    first = first_address(capsys)
    token = first.partition("/?token=")[2]
    kept = data / serve_cli.TOKEN_FILE
    assert kept.read_text() == f"{token}\n"
    assert kept.stat().st_mode & 0o777 == 0o600
    assert (data.stat().st_mode & 0o777, data.parent.stat().st_mode & 0o777) == (0o700, 0o700)
    # A restart: the same address, so an open page's cookie still works.
    assert run(["--data-dir", str(data), "serve", "--port", "0"]) == 0
    assert first_address(capsys).partition("/?token=")[2] == token
    # --new-token replaces it, and the next restart keeps the new one.
    assert run(["--data-dir", str(data), "serve", "--port", "0", "--new-token"]) == 0
    renewed = first_address(capsys).partition("/?token=")[2]
    assert renewed != token
    assert len(renewed) == 32
    assert kept.read_text() == f"{renewed}\n"
    assert run(["--data-dir", str(data), "serve", "--port", "0"]) == 0
    assert first_address(capsys).partition("/?token=")[2] == renewed
    assert sorted(path.name for path in data.iterdir()) == [serve_cli.TOKEN_FILE]


def test_a_kept_token_that_was_tampered_with_is_refused_with_what_to_do(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.delenv("SESSION_SCHEDULE_TOKEN", raising=False)
    kept = tmp_path / serve_cli.TOKEN_FILE
    kept.write_text("abcdefgh" * 4)
    kept.chmod(0o600)
    argv = ["--data-dir", str(tmp_path), "serve", "--port", "0"]
    assert run(argv) == 2
    assert capsys.readouterr().err.startswith(
        f"session-schedule: the kept token {kept} is too easy to guess: about 37 bits"
    )
    kept.chmod(0o644)
    assert run(argv) == 2
    assert capsys.readouterr().err == (
        f"session-schedule: the kept token {kept} can be read by other users (mode "
        f"0644); make it readable by its owner only (chmod 600 {kept}); or start with "
        "--new-token to replace it\n"
    )
    kept.unlink()
    kept.symlink_to(tmp_path / "elsewhere")
    assert run(argv) == 2
    assert capsys.readouterr().err == (
        f"session-schedule: cannot read the kept token {kept} (it is a symbolic link, not a "
        "regular file); move it away\n"
    )


def test_new_token_with_the_variable_set_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("SESSION_SCHEDULE_TOKEN", STRONG)
    assert run(["--data-dir", str(tmp_path), "serve", "--new-token"]) == 2
    assert capsys.readouterr().err == (
        "session-schedule: --new-token replaces the token kept in the data directory, but "
        "$SESSION_SCHEDULE_TOKEN is set and would be used instead; unset it, or change it to "
        "change the token\n"
    )


def test_a_model_without_a_key_or_endpoint_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(["serve", "--model", "gpt-4o-mini"]) == 2
    assert "needs an API key: set OPENAI_API_KEY" in capsys.readouterr().err


def test_a_port_in_use_is_a_clear_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert run(["serve", "--port", str(port)]) == 2
    assert capsys.readouterr().err == (
        f"session-schedule: cannot listen on 127.0.0.1:{port} (Address already in use); "
        "choose another --host or --port\n"
    )


def test_the_bound_socket_listens_so_a_client_is_queued_not_refused() -> None:
    with bind("127.0.0.1", 0) as sock, socket.create_connection(sock.getsockname(), timeout=5):
        pass  # nothing accepts yet: the kernel queues the connection


class _ConnectAtStart:
    """Stands in for uvicorn: connects to the socket it is given before serving anything, as a
    browser opening the printed address at once does."""

    connected: list[str] = []  # noqa: RUF012 - a record for the test

    def __init__(self, app: OverlayApp, *, limits: Limits) -> None:
        del app, limits

    async def serve(self, sockets: list[socket.socket]) -> None:
        with socket.create_connection(sockets[0].getsockname(), timeout=5):
            _ConnectAtStart.connected.append("yes")


def test_the_address_is_printed_once_the_server_listens(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(web_server, "OverlayServer", _ConnectAtStart)
    _ConnectAtStart.connected.clear()
    assert run(["--data-dir", str(tmp_path), "serve", "--port", "0"]) == 0
    assert capsys.readouterr().out.startswith("session-schedule: the web overlay is at http://")
    assert _ConnectAtStart.connected == ["yes"]


class _FakeServer:
    """Stands in for uvicorn: records the app it was given and how it answers a request
    without a token, then returns at once."""

    apps: list[tuple[OverlayApp, int]] = []  # noqa: RUF012 - a record for the test
    limits: list[Limits] = []  # noqa: RUF012 - a record for the test

    def __init__(self, app: OverlayApp, *, limits: Limits) -> None:
        self._app = app
        _FakeServer.limits.append(limits)

    async def serve(self, sockets: list[socket.socket]) -> None:
        transport = httpx2.ASGITransport(app=self._app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            status = (await client.get("/api/info")).status_code
        _FakeServer.apps.append((self._app, status))


def test_a_non_loopback_host_gets_a_generated_token_printed_at_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bound: list[tuple[str, int]] = []

    def bind_loopback(host: str, port: int) -> socket.socket:
        bound.append((host, port))
        return bind("127.0.0.1", 0)  # the test binds nothing else

    monkeypatch.setattr(web_server, "bind", bind_loopback)
    monkeypatch.setattr(web_server, "OverlayServer", _FakeServer)
    _FakeServer.apps.clear()
    argv = ["--data-dir", str(tmp_path), "serve", "--host", "0.0.0.0", "--port", "8080"]  # noqa: S104
    assert run(argv) == 0
    assert bound == [("0.0.0.0", 8080)]  # noqa: S104
    assert [status for _, status in _FakeServer.apps] == [401]
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("session-schedule: the web overlay is at http://127.0.0.1:")
    token = out[0].partition("/?token=")[2]
    assert len(token) == 32
    assert out[1:] == [
        "session-schedule: listening on every address of this machine; from another one, use "
        "its address in place of 127.0.0.1",
        "session-schedule: every request needs the token; keep the address secret",
        f"session-schedule: offline mode (you call the tools on the page); sessions in jsonl:{tmp_path}",
    ]


def test_a_token_given_on_loopback_is_required_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(web_server, "OverlayServer", _FakeServer)
    _FakeServer.apps.clear()
    argv = ["--data-dir", str(tmp_path), "serve", "--port", "0", "--token", STRONG]
    assert run(argv) == 0
    assert f"/?token={STRONG}" in capsys.readouterr().out
    assert [status for _, status in _FakeServer.apps] == [401]


def test_loopback_gets_a_generated_token_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(web_server, "OverlayServer", _FakeServer)
    _FakeServer.apps.clear()
    assert run(["--data-dir", str(tmp_path), "serve", "--port", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out[0].partition("/?token=")[2]) == 32
    assert out[1] == "session-schedule: every request needs the token; keep the address secret"
    assert [status for _, status in _FakeServer.apps] == [401]


@pytest.mark.parametrize("source", ["variable", "file"])
def test_the_token_comes_from_the_environment_or_a_file_so_ps_does_not_show_it(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    source: str,
) -> None:
    monkeypatch.setattr(web_server, "OverlayServer", _FakeServer)
    _FakeServer.apps.clear()
    argv = ["--data-dir", str(tmp_path), "serve", "--port", "0"]
    if source == "variable":
        monkeypatch.setenv("SESSION_SCHEDULE_TOKEN", STRONG)
    else:
        (tmp_path / "token").write_text(f"{STRONG}\n")
        (tmp_path / "token").chmod(0o600)
        argv += ["--token-file", str(tmp_path / "token")]
    assert run(argv) == 0
    assert f"/?token={STRONG}" in capsys.readouterr().out
    [(app, status)] = _FakeServer.apps
    assert status == 401
    transport = httpx2.ASGITransport(app=app)

    async def with_token() -> int:
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            headers = {"authorization": f"Bearer {STRONG}"}
            return (await client.get("/api/info", headers=headers)).status_code

    assert asyncio.run(with_token()) == 200


def test_the_limits_are_configurable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(web_server, "OverlayServer", _FakeServer)
    _FakeServer.apps.clear()
    _FakeServer.limits.clear()
    argv = ["--data-dir", str(tmp_path), "serve", "--port", "0", "--max-connections", "50"]
    argv += ["--max-live", "7", "--idle-close", "90", "--max-pages", "12"]
    assert run(argv) == 0
    assert _FakeServer.limits == [Limits(max_connections=50)]
    [(app, _status)] = _FakeServer.apps
    assert app.sessions.limits == LiveLimits(max_live=7, idle_seconds=90, max_streams=12)
    assert app.streams.limit == 12
    with pytest.raises(SystemExit):
        parser().parse_args(["serve", "--max-live", "0"])
    assert "'0' is not a positive whole number" in capsys.readouterr().err


def test_no_token_on_loopback_serves_without_one_and_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(web_server, "OverlayServer", _FakeServer)
    _FakeServer.apps.clear()
    assert run(["--data-dir", str(tmp_path), "serve", "--port", "0", "--no-token"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "token" not in out[0]
    assert out[1] == (
        "session-schedule: no access token (--no-token): every program and user of this "
        "machine can use the overlay and read its sessions"
    )
    assert [status for _, status in _FakeServer.apps] == [200]


def test_a_model_with_a_local_endpoint_is_announced(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(web_server, "OverlayServer", _FakeServer)
    _FakeServer.apps.clear()
    argv = ["--data-dir", str(tmp_path), "serve", "--port", "0", "--model", "llama3.2"]
    argv += ["--base-url", "http://127.0.0.1:9/v1", "--no-token"]
    assert run(argv) == 0
    assert "session-schedule: model llama3.2; sessions in" in capsys.readouterr().out
    [(app, status)] = _FakeServer.apps
    assert (app.sessions.offline, status) == (False, 200)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``serve --port 0`` in a child process, offline; the process and the address it printed."""
    environment = {k: v for k, v in os.environ.items() if k not in MODEL_VARIABLES}
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, "--data-dir", str(tmp_path), "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )
    try:
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            assert selector.select(WAIT_SECONDS), "serve printed nothing within 15 s"
        line = process.stdout.readline()
        prefix = "session-schedule: the web overlay is at "
        assert line.startswith(prefix), line
        yield process, line.removeprefix(prefix).strip()
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=WAIT_SECONDS)


def test_a_real_server_serves_and_stops_on_ctrl_c_with_a_page_still_open(
    served: tuple[subprocess.Popen[str], str], tmp_path: Path
) -> None:
    process, url = served
    address, _, token = url.partition("?token=")
    headers = {"authorization": f"Bearer {token}"}
    with httpx2.Client(base_url=address, headers=headers, timeout=WAIT_SECONDS) as client:
        assert client.get("/api/info").json()["mode"] == "offline"
        assert client.get("/api/info", headers={"host": "rebound.example"}).status_code == 403
        session = client.post("/api/sessions", json={}).json()["session"]["id"]
        assert (tmp_path / f"{session}.jsonl").exists()
        with client.stream("GET", f"/api/sessions/{session}/events") as stream:
            lines = stream.iter_lines()
            assert next(lines) == "retry: 2000"
            started = time.monotonic()
            process.send_signal(signal.SIGINT)
            assert list(lines) == [""]  # the server ends the stream itself
    assert process.wait(WAIT_SECONDS) == 0
    assert time.monotonic() - started < 5
    _, err = process.communicate(timeout=WAIT_SECONDS)
    assert "Traceback" not in err
    assert "Application shutdown complete." in err


def test_a_real_server_logs_refused_websocket_handshakes_as_one_count(
    served: tuple[subprocess.Popen[str], str],
) -> None:
    """100 WebSocket upgrades, each refused (403): uvicorn's two lines for each are not
    written, only the app's count of refusals: the first at once, the rest as the server
    stops."""
    process, url = served
    port = int(url.partition("?token=")[0].rstrip("/").rpartition(":")[2])
    handshake = (
        b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    for _ in range(100):
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT_SECONDS) as sock:
            sock.sendall(handshake)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 403 ")
    process.send_signal(signal.SIGINT)
    assert process.wait(WAIT_SECONDS) == 0
    _, err = process.communicate(timeout=WAIT_SECONDS)
    assert "WebSocket /ws" not in err
    assert "connection rejected" not in err
    refusals = [line for line in err.splitlines() if "websockets are not served" in line]
    assert refusals == [
        "WARNING:     session_schedule.web.security: refused 1 request since the last report: "
        "websockets are not served (first WEBSOCKET /ws; from 127.0.0.1)",
        "WARNING:     session_schedule.web.security: refused 99 requests since the last report: "
        "websockets are not served (first WEBSOCKET /ws; from 127.0.0.1)",
    ]


def test_a_real_server_with_few_descriptors_survives_a_flood_of_idle_sockets(
    tmp_path: Path,
) -> None:
    """1,100 idle sockets against a token server whose process may open 256 descriptors: a
    request with the token is still served, and the log stays a few lines long."""

    def few_descriptors() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    environment = {k: v for k, v in os.environ.items() if k not in MODEL_VARIABLES}
    log = tmp_path / "stderr.log"
    with log.open("w") as stderr:
        argv = ["--data-dir", str(tmp_path / "data"), "serve", "--port", "0"]
        process = subprocess.Popen(
            [sys.executable, "-c", SCRIPT, *argv],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=environment,
            preexec_fn=few_descriptors,  # noqa: PLW1509 - no threads in the child before exec
        )
    try:
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            assert selector.select(WAIT_SECONDS), "serve printed nothing within 15 s"
        url = process.stdout.readline().removeprefix("session-schedule: the web overlay is at ")
        address, _, token = url.strip().partition("?token=")
        port = int(address.rstrip("/").rpartition(":")[2])
        with contextlib.ExitStack() as stack:
            for _ in range(1100):
                sock = stack.enter_context(socket.socket())
                sock.setblocking(False)
                sock.connect_ex(("127.0.0.1", port))
            time.sleep(1)  # let the server accept what it can
            headers = {"authorization": f"Bearer {token}"}
            with httpx2.Client(base_url=address, headers=headers, timeout=WAIT_SECONDS) as client:
                assert client.get("/api/info").status_code == 200
                assert client.post("/api/sessions", json={}).status_code == 201
        process.send_signal(signal.SIGINT)
        assert process.wait(WAIT_SECONDS) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=WAIT_SECONDS)
    text = log.read_text()
    assert "Traceback" not in text
    assert len(text) < 4000, text


def test_the_overlay_serves_the_store_it_is_given_and_names_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(web_server, "OverlayServer", _FakeServer)
    _FakeServer.apps.clear()
    url = f"sqlite:{tmp_path / 'sessions.db'}"
    argv = ["--data-dir", str(tmp_path / "unused"), "--store", url, "serve", "--port", "0"]
    assert run(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        out[-1]
        == f"session-schedule: offline mode (you call the tools on the page); sessions in {url}"
    )
    assert [status for _, status in _FakeServer.apps] == [401]


def test_the_commands_defaults_are_the_overlays() -> None:
    """``serve`` states them itself, so that its help needs no ``web`` extra."""
    live = LiveLimits()
    assert (Limits().max_connections, live.max_live, live.max_streams, live.idle_seconds) == (
        serve_cli.MAX_CONNECTIONS,
        serve_cli.MAX_LIVE,
        serve_cli.MAX_PAGES,
        serve_cli.IDLE_CLOSE_SECONDS,
    )
