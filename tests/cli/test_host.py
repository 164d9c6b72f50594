"""``session-schedule host`` end to end: a reminder set in a chat comes due after the chat has
closed; a host process answers it with the (scripted) model, and the answer is waiting in the
transcript when the person comes back."""

from __future__ import annotations

import asyncio
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from session_schedule.cli.host import host_settings
from session_schedule.cli.main import build_parser, main
from session_schedule.core.changes import CHANGE_EVENT_TYPE, ScheduleDispatchChange
from session_schedule.core.instants import MS_PER_SECOND, Instant
from session_schedule.harness.transcript import messages_of
from session_schedule.host import HostSettings
from session_schedule.runtime.clock import SystemClock
from session_schedule.runtime.live import Settings
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.location import opened_store, parse_store_url
from session_schedule.session.message import MessageEntry
from session_schedule.session.turns import TurnFinished, TurnQueued
from session_schedule.testing.session_contract import CHANGE, at_create
from tests.cli.chat_endpoint import Answer, CallTool, Reply, ScriptedEndpoint
from tests.cli.chat_process import TIMEOUT, ChatProcess, child_environment

CREATE_ARGUMENTS = '{"prompt": "Tell the user to stretch.", "after_seconds": 2}'


def transcript(data_dir: Path, session_id: str) -> list[MessageEntry]:
    snapshot = asyncio.run(JsonlSessionStore(data_dir).read(session_id))
    return messages_of(snapshot.entries)


def dispatches(data_dir: Path, session_id: str) -> int:
    snapshot = asyncio.run(JsonlSessionStore(data_dir).read(session_id))
    return sum(
        1
        for entry in snapshot.entries
        if entry.type == CHANGE_EVENT_TYPE and isinstance(entry.payload, ScheduleDispatchChange)
    )


def start_host(
    data_dir: Path, *arguments: str, environment: dict[str, str]
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-W",
            "error",
            "-m",
            "session_schedule",
            "--data-dir",
            str(data_dir),
            "host",
            "--lead",
            "1",
            "--poll",
            "0.2",
            *arguments,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_environment(environment),
    )


def wait_until(condition: object, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {TIMEOUT} s")


def stop(host: subprocess.Popen[str]) -> tuple[int, str, str]:
    host.send_signal(signal.SIGTERM)
    out, err = host.communicate(timeout=TIMEOUT)
    return host.returncode, out, err


def test_a_reminder_due_while_the_chat_is_closed_is_answered_by_the_host(tmp_path: Path) -> None:
    script: list[Reply] = [
        CallTool("call_1", "schedule_create", CREATE_ARGUMENTS),
        Answer("I'll remind you."),
        Answer("Time to stretch!"),
    ]
    model = ("--model", "scripted")
    with ScriptedEndpoint(script) as endpoint:
        environment = {"OPENAI_API_KEY": "test"}
        with ChatProcess(
            tmp_path, *model, "--base-url", endpoint.base_url, environment=environment
        ) as chat:
            session_id = chat.session_id()
            chat.send("remind me in two seconds to stretch")
            chat.expect("assistant> I'll remind you.\n")
            finished = chat.finish()
        assert (finished.returncode, finished.stderr) == (0, "")
        assert dispatches(tmp_path, session_id) == 0
        host = start_host(
            tmp_path, *model, "--base-url", endpoint.base_url, environment=environment
        )
        try:
            wait_until(
                lambda: any(
                    m.content == "Time to stretch!" for m in transcript(tmp_path, session_id)
                ),
                "the host's answer",
            )
        finally:
            code, out, err = stop(host)
    assert (code, err) == (0, "")
    assert out == (
        f"session-schedule host: keeping the sessions in jsonl:{tmp_path} live (answering with "
        "scripted); stop with Ctrl-C\n"
        "session-schedule host: stopped; sessions opened 1, closed 1, found open elsewhere 0, "
        "failed 0; turns retried 0, turns failed 0\n"
    )
    messages = transcript(tmp_path, session_id)
    followup, answer = messages[-2:]
    assert followup.role == "user"
    assert followup.origin == "followup"
    assert followup.content.startswith("[session-schedule] Reminder follow-up")
    assert "Tell the user to stretch." in followup.content
    assert (answer.role, answer.content) == ("assistant", "Time to stretch!")
    assert dispatches(tmp_path, session_id) == 1
    # The model saw the whole conversation, the follow-up last.
    last = endpoint.requests[-1].body["messages"]
    assert last[-1] == {"role": "user", "content": followup.content}
    assert len(endpoint.requests) == 3


def test_an_offline_host_records_the_followup_and_skips_a_session_open_in_a_chat(
    tmp_path: Path,
) -> None:
    async def prepare() -> tuple[str, str]:
        store = JsonlSessionStore(tmp_path)
        now = SystemClock().now()
        ids = []
        for _ in range(2):
            async with await store.create(now=now) as handle:
                # Due once both the chat and the host have started, even on a loaded machine:
                # the host must find the held session due while the chat holds it.
                handle.append(CHANGE, at_create(1, Instant(now + 4 * MS_PER_SECOND)))
                await handle.barrier()
            ids.append(handle.id)
        return ids[0], ids[1]

    free, held = asyncio.run(prepare())
    # The second session is open in a chat all along.
    with ChatProcess(tmp_path, held) as chat:
        chat.expect(f"resumed session {held}")
        host = start_host(tmp_path, "--busy-retry", "0.2", environment={})
        try:
            wait_until(lambda: dispatches(tmp_path, free) == 1, "the offline delivery")
            # The chat delivers its own session's reminder; the host leaves it alone.
            wait_until(lambda: dispatches(tmp_path, held) == 1, "the chat's delivery")
            time.sleep(0.5)
        finally:
            code, out, err = stop(host)
        chat.finish()
    assert (code, err) == (0, "")
    assert out.startswith(
        f"session-schedule host: keeping the sessions in jsonl:{tmp_path} live (offline); "
    )
    assert "sessions opened 1, closed 1, found open elsewhere " in out
    assert "found open elsewhere 0," not in out
    assert dispatches(tmp_path, held) == 1
    followup = transcript(tmp_path, free)[-1]
    assert (followup.role, followup.origin) == ("user", "followup")
    assert followup.content.startswith("[session-schedule] Reminder follow-up")


def test_an_offline_host_serves_a_sqlite_store(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'sessions.db'}"
    location = parse_store_url(url)

    async def prepare() -> str:
        async with opened_store(location) as store:
            now = SystemClock().now()
            async with await store.create(now=now) as handle:
                handle.append(CHANGE, at_create(1, Instant(now + 2 * MS_PER_SECOND)))
                await handle.barrier()
            return handle.id

    async def dispatched(session_id: str) -> int:
        async with opened_store(location) as store:
            snapshot = await store.read(session_id)
        return sum(
            1
            for entry in snapshot.entries
            if entry.type == CHANGE_EVENT_TYPE and isinstance(entry.payload, ScheduleDispatchChange)
        )

    session_id = asyncio.run(prepare())
    host = start_host(tmp_path / "unused", "--store", url, environment={})
    try:
        wait_until(lambda: asyncio.run(dispatched(session_id)) == 1, "the offline delivery")
    finally:
        code, out, err = stop(host)
    assert (code, err) == (0, "")
    assert out.startswith(f"session-schedule host: keeping the sessions in {url} live (offline); ")
    assert "sessions opened 1, closed " in out
    assert "found open elsewhere 0, failed 0;" in out
    assert not (tmp_path / "unused").exists()


def test_the_settings_that_bound_a_takeover_are_options() -> None:
    arguments = build_parser().parse_args(
        [
            "host",
            "--max-wait-seconds",
            "2",
            "--failed-retry-seconds",
            "3.5",
            "--drain-seconds",
            "20",
            "--followup-limit",
            "12",
        ]
    )
    assert host_settings(arguments) == HostSettings(
        max_wait_seconds=2.0,
        failed_retry_seconds=3.5,
        drain_seconds=20.0,
        schedule=Settings(followup_limit=12),
    )
    assert host_settings(build_parser().parse_args(["host"])) == HostSettings()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--poll", "0.001", "'0.001' is less than 0.01 seconds; a shorter wait lets the host spin"),
        ("--max-wait-seconds", "1e-6", "'1e-6' is less than 0.01 seconds; a shorter wait lets the host spin"),
        ("--busy-retry", "0", "'0' is not a positive number of seconds"),
        ("--failed-retry-seconds", "inf", "'inf' is not a positive number of seconds"),
    ],
)  # fmt: skip
def test_a_wait_that_would_let_the_host_spin_is_a_usage_error(
    option: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["host", option, value])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"session-schedule host: error: argument {option}: {message}"
    )


def test_the_issues_reproduction_a_reminder_due_while_the_endpoint_is_down(
    tmp_path: Path,
) -> None:
    """A one-shot set in an offline chat; a host whose model endpoint is a closed port when the
    reminder comes due. The reminder is not used up: the host retries, logs each failed
    attempt, and answers it once an endpoint listens on that port."""
    with ChatProcess(tmp_path) as chat:
        session_id = chat.session_id()
        chat.send("/create after 3s x")
        chat.expect("tool result> ")
        finished = chat.finish()
    assert finished.returncode == 0, finished.stderr
    with socket.socket() as probe:  # a free port, closed again: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    host = start_host(
        tmp_path,
        "--model",
        "scripted",
        "--base-url",
        f"http://127.0.0.1:{port}/v1",
        environment={"OPENAI_API_KEY": "test"},
    )
    try:
        wait_until(lambda: len(turns_queued(tmp_path, session_id)) == 1, "the reminder turn")
        time.sleep(3)  # about three refused attempts (back-off 1-2 s, then 2-4 s)
        assert dispatches(tmp_path, session_id) == 1
        assert not finished_turns(tmp_path, session_id)  # not used up: still unfinished
        with ScriptedEndpoint([Answer("done")], port=port):
            wait_until(lambda: finished_turns(tmp_path, session_id), "the answer")
    finally:
        code, out, err = stop(host)
    assert code == 0, err
    [turn] = finished_turns(tmp_path, session_id)
    assert turn.outcome == "completed"
    assert turn.attempts >= 2
    retried = turn.attempts - 1
    assert out.endswith(f"; turns retried {retried}, turns failed 0\n"), out
    assert err.count("turn-retry retrying schedule=sch_1 occurrence=sch_1@") == retried, err
    assert "Connection error" in err
    print(f"\nhost reproduction: answered at attempt {turn.attempts}")


def turns_queued(data_dir: Path, session_id: str) -> list[TurnQueued]:
    snapshot = asyncio.run(JsonlSessionStore(data_dir).read(session_id))
    return [e.payload for e in snapshot.entries if isinstance(e.payload, TurnQueued)]


def finished_turns(data_dir: Path, session_id: str) -> list[TurnFinished]:
    snapshot = asyncio.run(JsonlSessionStore(data_dir).read(session_id))
    return [e.payload for e in snapshot.entries if isinstance(e.payload, TurnFinished)]


def test_a_dsn_url_names_its_schema_as_store_does(capsys: pytest.CaptureFixture[str]) -> None:
    """``--dsn URL`` is ``--store URL``: its ``?schema=`` is the schema, not a parameter passed
    to the driver (which refused it), and a bad one is a usage error."""
    from tests.postgres import execute, fresh_schema_name, server_dsn  # noqa: PLC0415

    dsn = server_dsn()
    schema = fresh_schema_name()  # never created: the host stops at its first read
    joined = "&" if "?" in dsn else "?"
    url = f"{dsn}{joined}schema={schema}"
    assert main(["host", "--dsn", url]) == 6
    database = execute(dsn, "SELECT current_database()")[0][0]
    where = f"schema {schema} of PostgreSQL database {database}"
    assert capsys.readouterr() == (
        "",
        f"session-schedule: {where} holds no session store; create it with "
        f"`session-schedule --store {shlex.quote(url)} db init`\n",
    )
    assert main(["host", "--dsn", f"{dsn}{joined}schema=Bad"]) == 2
    assert capsys.readouterr() == (
        "",
        "session-schedule: 'Bad' cannot name a schema: use 1 to 63 lower-case letters, digits or "
        "underscores, not starting with a digit\n",
    )


@pytest.mark.parametrize(
    ("arguments", "given"),
    [
        (["host", "--store", "sqlite:s.db", "--dsn", "postgresql:///x"], "--dsn"),
        (["--store", "sqlite:s.db", "host", "--dsn", "postgresql:///x"], "--dsn"),
        (["host", "--postgres", "--store", "sqlite:s.db"], "--postgres"),
    ],
)
def test_two_stores_on_the_command_line_are_a_usage_error(
    arguments: list[str], given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--store`` and ``--dsn`` (or ``--postgres``) name two stores: neither silently wins."""
    assert main(arguments) == 2
    assert capsys.readouterr().err == f"session-schedule: host takes {given} or --store, not both\n"
