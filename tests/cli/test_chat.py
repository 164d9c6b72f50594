"""``session-schedule chat`` without a terminal: stdin lines in, plain transcript lines out.

Most tests run ``main`` in-process with stdin replaced; the two that wait for a follow-up run the
command in a child process whose stdin stays open meanwhile (one of them on the real clock, 1 s).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import io
import os
import re
import threading
import time
from pathlib import Path

import msgspec
import pytest
from rich.console import Console

from session_schedule.cli.chat import (
    OFFLINE_BANNER,
    Display,
    Line,
    plain_text,
    standings,
    styled_writer,
)
from session_schedule.cli.common import schedule_settings
from session_schedule.cli.main import build_parser, main
from session_schedule.cli.model import API_KEY_PLACEHOLDER, ModelConfig, model_config
from session_schedule.core.changes import (
    CHANGE_EVENT_TYPE,
    ScheduleCreateChange,
    ScheduleDeleteChange,
    ScheduleDispatchChange,
)
from session_schedule.core.instants import Instant
from session_schedule.core.quiet import QuietHours
from session_schedule.harness.agent import ChatEvent
from session_schedule.harness.chat import live_chat
from session_schedule.harness.transcript import messages_of
from session_schedule.runtime.clock import SystemClock
from session_schedule.runtime.live import Settings
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.jsonl.next_targets import INDEX_NAME, KEY_NAME
from session_schedule.session.jsonl.store import OWNERS_NAME
from session_schedule.session.message import MessageEntry, ToolCall
from session_schedule.session.port import SessionSnapshot
from session_schedule.testing.clock import FakeClock
from tests.cli.chat_process import SESSION_ID, ChatProcess
from tests.session.faults import one_shot


def followup_frame(*, after_seconds: int) -> re.Pattern[str]:
    """The printed follow-up turn of reminder sch_1 with the prompt "stretch"."""
    return re.compile(
        r"follow-up>\n"
        r"\[session-schedule\] Reminder follow-up\n"
        r"A reminder you scheduled earlier in this conversation is due\. .*\n"
        r"All times are UTC\.\n"
        r"decided at: \S+\n"
        r"\n"
        r"reminder 1 of 1: sch_1\n"
        rf"kind: after \({after_seconds} seconds? after it was set\)\n"
        r"due at: \S+\n"
        r"occurrence key: sch_1@\S+\n"
        r'prompt: "stretch"\n'
    )


def run_chat(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    data_dir: Path,
    *arguments: str,
    stdin: str = "",
) -> tuple[int, str, str]:
    for name in ("SESSION_SCHEDULE_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(["--data-dir", str(data_dir), "chat", *arguments])
    out, err = capsys.readouterr()
    return code, out, err


def session_id_of(output: str) -> str:
    found = SESSION_ID.search(output)
    assert found is not None, output
    return found.group(1)


def read(data_dir: Path, session_id: str) -> SessionSnapshot:
    return asyncio.run(JsonlSessionStore(data_dir).read(session_id))


def changes(snapshot: SessionSnapshot) -> list[object]:
    return [entry.payload for entry in snapshot.entries if entry.type == CHANGE_EVENT_TYPE]


def test_offline_chat_records_lines_and_calls_the_tools_with_the_arguments_shown(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run_chat(
        monkeypatch,
        capsys,
        tmp_path,
        stdin="hello [bold]there[/bold]\n"
        "/create after 1h drink water\n"
        "/create every 1m too often\n"
        "/list\n"
        "/delete sch_1\n"
        "/create tomorrow x\n"
        "/frobnicate\n"
        "//not a command\n",
    )
    assert (code, err) == (0, "")
    session_id = session_id_of(out)
    lines = out.splitlines()
    assert lines[:4] == [
        f"session-schedule chat: new session {session_id}",
        OFFLINE_BANNER,
        f"store: jsonl:{tmp_path}",
        "/help lists the commands; Ctrl-D or /quit leaves (the session can be resumed)",
    ]
    assert lines[4:8] == [
        "you> hello [bold]there[/bold]",
        "note> recorded as a user turn; no model is connected to answer (offline mode)",
        'tool call> schedule_create {"prompt":"drink water","after_seconds":3600}',
        lines[7],
    ]
    created = msgspec.json.decode(lines[7].removeprefix("tool result> "))
    assert created["ok"] is True
    assert created["schedule"]["id"] == "sch_1"
    assert lines[8:10] == [
        'tool call> schedule_create {"prompt":"too often","every_seconds":60}',
        'tool result> {"ok":false,"error":{"code":"frequency_too_high","message":'
        '"every_seconds must be at least 300 (5 minutes), got 60; choose a longer interval."}}',
    ]
    assert lines[10] == "tool call> schedule_list {}"
    listed = msgspec.json.decode(lines[11].removeprefix("tool result> "))
    assert [view["id"] for view in listed["schedules"]] == ["sch_1"]
    assert lines[12:] == [
        'tool call> schedule_delete {"id":"sch_1"}',
        'tool result> {"ok":true,"id":"sch_1","deleted":true}',
        "error> /create tomorrow: start with in, after, every, at, daily or calendar",
        "usage> /create in 5m|after 90s|every 10m|at 2026-12-01T09:00:00+09:00"
        "|at 2026-12-01 09:00 Asia/Tokyo|daily 09:00 Asia/Tokyo [mon wed fri]"
        "|calendar FREQ=MONTHLY;BYDAY=1MO 09:00 Europe/Paris [2026-12-01] <prompt>",
        "error> there is no command /frobnicate",
        "usage> /create, /list, /update <id>, /pause <id>, /resume <id>, /snooze <id> 10m, "
        "/delete <id>, /quotas, /turns-per-day N, /quiet-hours START-END ZONE, "
        "/active-reminders N, /help, /quit",
        "you> /not a command",
        f"session {session_id} closed; resume it with: "
        f"session-schedule --data-dir {tmp_path} chat {session_id}",
    ]

    snapshot = read(tmp_path, session_id)
    transcript = messages_of(snapshot.entries)
    assert [(turn.role, turn.origin) for turn in transcript] == [
        ("user", "person"),
        *[("assistant", "model"), ("tool", "tool")] * 4,
        ("user", "person"),
    ]
    assert transcript[0].content == "hello [bold]there[/bold]"
    calls = [turn.tool_calls[0] for turn in transcript if isinstance(turn.tool_calls, tuple)]
    assert [(call.name, call.arguments) for call in calls] == [
        ("schedule_create", '{"prompt":"drink water","after_seconds":3600}'),
        ("schedule_create", '{"prompt":"too often","every_seconds":60}'),
        ("schedule_list", "{}"),
        ("schedule_delete", '{"id":"sch_1"}'),
    ]
    assert [type(change) for change in changes(snapshot)] == [
        ScheduleCreateChange,
        ScheduleDeleteChange,
    ]


def test_chat_is_the_default_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("hi\n"))
    monkeypatch.delenv("SESSION_SCHEDULE_MODEL", raising=False)
    monkeypatch.setenv("SESSION_SCHEDULE_DATA_DIR", str(tmp_path))
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("session-schedule chat: new session s_")
    assert "\nyou> hi\n" in out
    # Without --data-dir the resume hint needs none: the environment names the directory.
    assert out.endswith(f"resume it with: session-schedule chat {session_id_of(out)}\n")
    # The session, the checkpoint its close left beside it, and the next-target index (which
    # records the session's turns: one cut off by a crash is due for a host at once) with the
    # key that signs its records.
    session_id = session_id_of(out)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        [f"{session_id}.checkpoint", f"{session_id}.jsonl", INDEX_NAME, KEY_NAME, OWNERS_NAME]
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["s_badid"],
        ["chat", "s_badid"],
        ["--data-dir", "DIR", "s_badid"],
        ["s_badid", "--time-zone", "Asia/Tokyo"],
    ],
)
def test_a_malformed_session_id_is_judged_by_chat_in_the_short_form_too(
    argv: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    monkeypatch.setenv("SESSION_SCHEDULE_DATA_DIR", str(tmp_path))
    argv = [str(tmp_path) if word == "DIR" else word for word in argv]
    assert main(argv) == 3
    assert capsys.readouterr() == (
        "",
        "session-schedule: 's_badid' is not a session id: expected s_ followed by 12 "
        "lower-case letters or digits\n",
    )


def test_help_and_quit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run_chat(monkeypatch, capsys, tmp_path, stdin="/help\n/quit\nnot read\n")
    assert code == 0
    assert (
        "  /create at 2026-12-01 09:00 Asia/Tokyo <prompt>\n"
        "                                once, at a local time in a zone (or UTC)\n"
    ) in out
    assert "not read" not in out
    transcript = messages_of(read(tmp_path, session_id_of(out)).entries)
    assert transcript == []


def test_a_reminder_comes_back_as_a_followup_while_the_chat_waits(tmp_path: Path) -> None:
    with ChatProcess(tmp_path) as chat:
        session_id = chat.session_id()
        chat.send("/create after 1s stretch")
        chat.expect('prompt: "stretch"\n')
        finished = chat.finish()
    assert (finished.returncode, finished.stderr) == (0, "")
    assert followup_frame(after_seconds=1).search(finished.stdout), finished.stdout
    assert finished.stdout.index(
        'tool call> schedule_create {"prompt":"stretch","after_seconds":1}'
    )
    snapshot = read(tmp_path, session_id)
    followup = messages_of(snapshot.entries)[-1]
    assert (followup.role, followup.origin) == ("user", "followup")
    # The transcript shows the turn exactly as a model would receive it.
    assert f"follow-up>\n{followup.content}\n" in finished.stdout
    assert [type(change) for change in changes(snapshot)] == [
        ScheduleCreateChange,
        ScheduleDispatchChange,
    ]


async def closed_session_with_an_overdue_reminder(data_dir: Path) -> str:
    """A session whose reminder fell due a minute ago, while it was closed."""
    store = JsonlSessionStore(data_dir)
    clock = FakeClock(Instant(SystemClock().now() - 120_000))
    async with await store.create(now=clock.now()) as session:
        async with live_chat(session, model=None, clock=clock) as live:
            live.agent.submit("first note")
            live.agent.submit_tool("schedule_create", {"prompt": "stretch", "after_seconds": 60})
            await live.agent.wait_idle()
        await session.barrier()
        return session.id


def test_resuming_shows_the_history_and_delivers_overdue_reminders(tmp_path: Path) -> None:
    session_id = asyncio.run(closed_session_with_an_overdue_reminder(tmp_path))
    entries = len(read(tmp_path, session_id).entries)
    with ChatProcess(tmp_path, session_id) as chat:
        chat.expect(
            f"session-schedule chat: resumed session {session_id} ({entries} log entries)\n"
        )
        chat.expect(
            "--- the 3 turns so far ---\n"
            "you> first note\n"
            'tool call> schedule_create {"prompt":"stretch","after_seconds":60}\n'
            "tool result> "
        )
        chat.expect("---\n")
        chat.expect('prompt: "stretch"\n')
        chat.send("/list")
        chat.expect('"schedules":[],"next_cursor":null,"total":0}\n')
        finished = chat.finish()
    assert (finished.returncode, finished.stderr) == (0, "")
    assert followup_frame(after_seconds=60).search(finished.stdout), finished.stdout
    assert [type(change) for change in changes(read(tmp_path, session_id))] == [
        ScheduleCreateChange,
        ScheduleDispatchChange,
    ]


async def session_delivered_offline_meanwhile(data_dir: Path) -> str:
    """A session whose every-5-minutes reminder was delivered twice while it was closed, after
    the person's last message, with no model to answer it (as an offline host records it)."""
    store = JsonlSessionStore(data_dir)
    clock = FakeClock(Instant(SystemClock().now() - 3600_000))
    async with await store.create(now=clock.now()) as session:
        async with live_chat(session, model=None, clock=clock) as live:
            live.agent.submit("remind me")
            live.agent.submit_tool("schedule_create", {"prompt": "drink", "every_seconds": 300})
            await live.agent.wait_idle()
            for _ in range(2):
                clock.advance(300)
                await live.schedule.settled()
                await live.agent.wait_idle()
        await session.barrier()
        return session.id


def test_resuming_says_how_many_reminders_came_meanwhile_unanswered(tmp_path: Path) -> None:
    """An offline host (no model) records each follow-up and nobody answers it: the note says
    so, never that the reminders were answered."""
    session_id = asyncio.run(session_delivered_offline_meanwhile(tmp_path))
    with ChatProcess(tmp_path, session_id) as chat:
        chat.expect("you> remind me\n")
        chat.expect("follow-up while you were away>\n")
        chat.expect("follow-up while you were away>\n")
        chat.expect("---\n")
        chat.expect(
            "note> 2 reminders were delivered since your last message but not answered "
            "(no model was connected)\n"
        )
        finished = chat.finish()
    assert (finished.returncode, finished.stderr) == (0, "")


def test_ctrl_c_leaves_cleanly_and_keeps_the_session(tmp_path: Path) -> None:
    with ChatProcess(tmp_path) as chat:
        session_id = chat.session_id()
        chat.send("/create after 1h stretch")
        chat.expect('"state":"scheduled"')
        finished = chat.finish(interrupt=True)
    assert (finished.returncode, finished.stderr) == (0, "")
    assert [type(change) for change in changes(read(tmp_path, session_id))] == [
        ScheduleCreateChange
    ]


def test_a_resumed_session_shows_only_its_last_turns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, out, _ = run_chat(
        monkeypatch, capsys, tmp_path, stdin="".join(f"line {n}\n" for n in range(1, 11))
    )
    session_id = session_id_of(out)
    entries = read(tmp_path, session_id).entries
    third = next(e.position for e in entries if getattr(e.payload, "content", "") == "line 3")
    code, out, err = run_chat(monkeypatch, capsys, tmp_path, session_id)
    assert (code, err) == (0, "")
    assert f"resumed session {session_id} ({len(entries)} log entries)" in out
    lines = out.splitlines()
    start = lines.index(
        f"--- the last 8 turns; the earlier ones, in the first {third} log entries, are not "
        f"shown; see them with: session-schedule --data-dir {tmp_path} show {session_id} ---"
    )
    assert lines[start + 1 : start + 10] == [*[f"you> line {n}" for n in range(3, 11)], "---"]


def test_a_missing_session_exits_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run_chat(monkeypatch, capsys, tmp_path, "s_000000000000")
    assert (code, out) == (3, "")
    assert err == (
        f"session-schedule: session s_000000000000 does not exist in {tmp_path}; "
        "check the session id\n"
    )
    code, _, err = run_chat(monkeypatch, capsys, tmp_path, "../etc/passwd")
    assert code == 3
    assert "is not a session id" in err


async def test_a_session_open_elsewhere_exits_4(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = JsonlSessionStore(tmp_path)
    async with await store.create(now=SystemClock().now()) as session:
        code, out, err = await asyncio.to_thread(
            run_chat, monkeypatch, capsys, tmp_path, session.id, "--busy-wait", "0"
        )
    assert (code, out) == (4, "")
    assert err.startswith(f"session-schedule: session {session.id} is open in another process")


@pytest.mark.parametrize("zone", ["EST", "asia/tokyo", "Etc/UTC", ""])
def test_an_unsupported_time_zone_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, zone: str
) -> None:
    code, out, err = run_chat(monkeypatch, capsys, tmp_path, "--time-zone", zone)
    assert (code, out) == (2, "")
    assert err.startswith(f"session-schedule: --time-zone: {zone!r} is not a supported time zone")
    assert list(tmp_path.iterdir()) == []


def test_a_model_without_a_key_or_an_endpoint_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run_chat(monkeypatch, capsys, tmp_path, "--model", "gpt-4o-mini")
    assert (code, out) == (2, "")
    assert err == (
        "session-schedule: model 'gpt-4o-mini' needs an API key: set OPENAI_API_KEY, or give "
        "--base-url for a local endpoint that needs none\n"
    )


@pytest.mark.parametrize(
    ("base_url", "environ", "message"),
    [
        (
            "localhost:11434/v1",
            {},
            "--base-url: 'localhost:11434/v1' is not an http or https URL; give the endpoint's "
            "base URL, such as http://localhost:11434/v1",
        ),
        (
            None,
            {"OPENAI_BASE_URL": "ftp://host/v1", "OPENAI_API_KEY": "k"},
            "OPENAI_BASE_URL: 'ftp://host/v1' is not an http or https URL; give the endpoint's "
            "base URL, such as http://localhost:11434/v1",
        ),
        (
            None,
            {},
            "model 'm' needs an API key: set OPENAI_API_KEY, or give --base-url for a local "
            "endpoint that needs none",
        ),
        # A placeholder copied from the docs (an ellipsis), a key pasted with its newline.
        *(
            (
                None,
                {"OPENAI_API_KEY": key},
                "OPENAI_API_KEY holds a character an HTTP header cannot carry (only printable "
                "ASCII, without spaces around it); set it to the key itself",
            )
            for key in ("\u2026", "sk-abc\n", " sk-abc")
        ),
    ],
)
def test_model_configuration_problems(
    base_url: str | None, environ: dict[str, str], message: str
) -> None:
    assert model_config("m", base_url, environ) == message


@pytest.mark.parametrize(
    ("model", "base_url", "environ", "expected"),
    [
        (None, None, {}, None),
        (None, "http://localhost:1/v1", {"OPENAI_API_KEY": "k"}, None),
        ("m", None, {"OPENAI_API_KEY": "k"}, ModelConfig(name="m", base_url=None, api_key="k")),
        (
            None,
            None,
            {"SESSION_SCHEDULE_MODEL": "env-model", "OPENAI_API_KEY": "k"},
            ModelConfig(name="env-model", base_url=None, api_key="k"),
        ),
        (
            "flag",
            "http://flag/v1",
            {
                "SESSION_SCHEDULE_MODEL": "env",
                "OPENAI_BASE_URL": "http://env/v1",
                "OPENAI_API_KEY": "k",
            },
            ModelConfig(name="flag", base_url="http://flag/v1", api_key="k"),
        ),
        (
            "m",
            None,
            {"OPENAI_BASE_URL": "http://localhost:11434/v1"},
            ModelConfig(
                name="m", base_url="http://localhost:11434/v1", api_key=API_KEY_PLACEHOLDER
            ),
        ),
        (
            "m",
            "http://localhost:8080/v1",
            {"OPENAI_API_KEY": ""},
            ModelConfig(name="m", base_url="http://localhost:8080/v1", api_key=API_KEY_PLACEHOLDER),
        ),
    ],
)
def test_model_configuration(
    model: str | None,
    base_url: str | None,
    environ: dict[str, str],
    expected: ModelConfig | None,
) -> None:
    assert model_config(model, base_url, environ) == expected


def test_chat_help_names_the_options_and_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["chat", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: session-schedule chat [-h] [--model MODEL] [--base-url URL]")
    for text in ("SESSION", "--time-zone ZONE", "$SESSION_SCHEDULE_MODEL", "$OPENAI_API_KEY"):
        assert text in out
    assert (
        "\nexample: session-schedule chat --model llama3.2 \\\n"
        "           --base-url http://localhost:11434/v1 --time-zone Europe/Paris\n"
    ) in out
    assert "/create after 90s <prompt>" in out


def test_turns_are_plain_lines_and_untrusted_text_is_defused() -> None:
    assert plain_text(Line(label="you", text="hi")) == "you> hi"
    assert plain_text(Line(label="follow-up", text="a\nb", block=True)) == "follow-up>\na\nb"
    assert plain_text(Line(label=None, text="banner")) == "banner"
    assert plain_text(Line(label="assistant", text="\x1b[2Jgone\x07\tok")) == (
        "assistant> \\x1b[2Jgone\\x07\tok"
    )
    hidden = "buy milk\u200b\U000e0041\u2066 ❤️\u200d🔥"
    assert plain_text(Line(label="you", text=hidden)) == (
        "you> buy milk\\u200b\\U000e0041\\u2066 ❤️\u200d🔥"
    )


def test_on_a_terminal_markup_in_the_text_prints_literally() -> None:
    file = io.StringIO()
    console = Console(
        file=file, force_terminal=True, markup=False, emoji=False, highlight=False, width=200
    )
    display = Display(styled_writer(console), echo_person=False, offline=False)
    display.event(
        ChatEvent(
            kind="message",
            message=MessageEntry(
                role="assistant",
                content="[bold red]not bold[/] :smile: \x1b[31m",
                at="2026-11-29T20:00:00.000Z",
                origin="model",
            ),
        )
    )
    out = file.getvalue()
    assert "[bold red]not bold[/] :smile: \\x1b[31m" in out
    assert "\x1b[31m" not in out.replace("\x1b[1;36massistant>", "")


def test_the_persons_tool_call_is_shown_once() -> None:
    shown: list[Line] = []
    display = Display(shown.append, echo_person=True, offline=True)
    display.tool_request("schedule_list", {})
    call = ToolCall(id="person_3", name="schedule_list", arguments="{}")
    echo = MessageEntry(
        role="assistant",
        content="",
        at="2026-11-29T20:00:00.000Z",
        origin="model",
        tool_calls=(call,),
    )
    display.event(ChatEvent(kind="message", message=echo))
    display.event(ChatEvent(kind="message", message=echo))
    assert [plain_text(line) for line in shown] == [
        "tool call> schedule_list {}",
        "tool call> schedule_list {}",
    ]
    display.history([echo], earlier=0, show=None)
    assert plain_text(shown[-2]) == "tool call> schedule_list {}"


def test_the_chat_reopens_the_session_after_a_storage_failure_and_keeps_delivering(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    """The flush that would make the prompt "two" durable fails: the prompt is reported as not
    sent, the cause is logged and shown, the session is reopened, and the reminder set before
    the failure is still delivered."""

    def holds_two(fd: object) -> bool:
        try:  # the session file is open for writing only: open it again to read it
            return b'"text":"two"' in Path(f"/proc/self/fd/{fd}").read_bytes()
        except OSError:  # the data directory's descriptor
            return False

    monkeypatch.setattr(
        os,
        "fsync",
        one_shot(os.fsync, OSError(errno.EIO, "injected fsync failure"), when=holds_two),
    )
    monkeypatch.setattr("session_schedule.cli.chat.REOPEN_INITIAL_SECONDS", 0.2)
    read_end, write_end = os.pipe()
    stdin = os.fdopen(read_end, "r")
    monkeypatch.setattr("sys.stdin", stdin)

    def type_lines() -> None:
        with os.fdopen(write_end, "w") as typing:
            for line, pause in (("/create after 1s stretch", 0.3), ("two", 2.0), ("three", 0.3)):
                typing.write(line + "\n")
                typing.flush()
                time.sleep(pause)

    typist = threading.Thread(target=type_lines)
    typist.start()
    with stdin:
        code = main(["--data-dir", str(tmp_path), "chat"])
    typist.join()
    out, err = capsys.readouterr()
    assert code == 0, err
    session_id = session_id_of(out)
    lines = out.splitlines()
    cause = (
        f"session {session_id} cannot confirm that its entries are durable "
        "(OSError: [Errno 5] injected fsync failure); reopen the session from storage"
    )
    assert f"error> not sent: {cause}" in lines, out + err
    assert lines.count("you> two") <= 1  # not run before the reopen; maybe after (if stored)
    assert (
        f"error> storage failed ({cause}); reminders are paused while session {session_id} is "
        "reopened from storage"
    ) in lines
    assert f"note> session {session_id} reopened from storage; reminders resume" in lines
    logged = [r.getMessage() for r in caplog.records if r.name == "session_schedule.cli.chat"]
    assert logged == [f"session {session_id} stopped delivering: {cause}"]
    assert lines.index("you> three") > lines.index(
        f"note> session {session_id} reopened from storage; reminders resume"
    )
    assert followup_frame(after_seconds=1).search(out), out
    snapshot = read(tmp_path, session_id)
    assert [type(change) for change in changes(snapshot)] == [
        ScheduleCreateChange,
        ScheduleDispatchChange,
    ]


def test_the_follow_up_budget_is_an_option(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    given: list[Settings] = []

    def recording(arguments: argparse.Namespace) -> Settings:
        given.append(schedule_settings(arguments))
        return given[-1]

    monkeypatch.setattr("session_schedule.cli.chat.schedule_settings", recording)
    monkeypatch.delenv("SESSION_SCHEDULE_MODEL", raising=False)
    night = QuietHours(start="22:00", end="07:00", time_zone="Europe/Paris")
    for arguments, expected in (
        (["--followup-limit", "3"], Settings(followup_limit=3)),
        ([], Settings()),
        (
            ["--turns-per-day", "48", "--quiet-hours", "22:00-07:00 Europe/Paris"],
            Settings(max_reminder_turns_per_day=48, quiet_hours=night),
        ),
    ):
        monkeypatch.setattr("sys.stdin", io.StringIO("hi\n"))
        assert main(["--data-dir", str(tmp_path), "chat", *arguments]) == 0
        assert given.pop() == expected
    capsys.readouterr()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--turns-per-day", "0", "must be at least 1, not 0"),
        (
            "--quiet-hours",
            "22:00-07:00",
            "not START-END ZONE, such as '22:00-07:00 Europe/Paris': '22:00-07:00'",
        ),
        (
            "--quiet-hours",
            "22:00-22:00 UTC",
            "quiet hours: the window opens and closes at 22:00; leave it out",
        ),
    ],
)
def test_a_quota_option_that_cannot_hold_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], option: str, value: str, message: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["chat", option, value])
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(f"argument {option}: {message}\n")


def test_offline_chat_pauses_snoozes_resumes_and_updates_a_reminder(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run_chat(
        monkeypatch,
        capsys,
        tmp_path,
        stdin="/create every 1h stretch\n"
        "/snooze sch_1 10m\n"
        "/pause sch_1\n"
        "/snooze sch_1 10m\n"
        "/resume sch_1\n"
        "/update sch_1 prompt walk\n",
    )
    assert (code, err) == (0, "")
    calls = [line for line in out.splitlines() if line.startswith("tool ")]
    results = [msgspec.json.decode(line.removeprefix("tool result> ")) for line in calls[1::2]]
    assert calls[::2] == [
        'tool call> schedule_create {"prompt":"stretch","every_seconds":3600}',
        'tool call> schedule_update {"id":"sch_1","snooze":{"after_seconds":600}}',
        'tool call> schedule_update {"id":"sch_1","paused":true}',
        'tool call> schedule_update {"id":"sch_1","snooze":{"after_seconds":600}}',
        'tool call> schedule_update {"id":"sch_1","paused":false}',
        'tool call> schedule_update {"id":"sch_1","prompt":"walk"}',
    ]
    assert "snoozedUntil" in results[1]["schedule"]
    assert results[2]["schedule"]["state"] == "paused"
    assert results[3]["error"]["code"] == "invalid_selector"
    assert results[4]["schedule"]["state"] == "scheduled"
    assert results[5]["schedule"]["prompt"] == "walk"
    # A reminder's standing, in the words of the list and the page, under the result.
    reminders = [line for line in out.splitlines() if line.startswith("reminder> ")]
    snoozed_until = results[1]["schedule"]["snoozedUntil"]
    assert reminders == [
        f"reminder> sch_1: snoozed until {snoozed_until}",
        "reminder> sch_1: paused",
    ]
    operations = [type(change).__name__ for change in changes(read(tmp_path, session_id_of(out)))]
    assert operations == [
        "ScheduleCreateChange",
        "ScheduleSnoozeChange",
        "SchedulePauseChange",
        "ScheduleResumeChange",
        "ScheduleUpdateChange",
    ]


def test_the_reminder_lines_of_a_tool_result_name_each_managed_reminder_s_standing() -> None:
    plain = {
        "kind": "at",
        "id": "sch_1",
        "prompt": "a",
        "scheduledAt": "2026-12-01T10:00:00.000Z",
        "state": "scheduled",
    }
    managed = {
        "kind": "every",
        "id": "sch_2",
        "prompt": "b",
        "everySeconds": 3600,
        "scheduledAt": "2026-12-01T10:00:00.000Z",
        "ends": {"until": None, "maxRuns": 3},
        "state": "scheduled",
        "runsLeft": 1,
    }
    listed = {"ok": True, "now": "2026-12-01T09:00:00.000Z", "schedules": [plain, managed]}
    assert standings(msgspec.json.encode(listed).decode()) == [("sch_2", "1 run left")]
    assert standings(msgspec.json.encode({"ok": True, "schedule": plain}).decode()) == []
    for content in ("not json", '{"ok":false,"error":{}}', '{"ok":true,"schedules":[1]}', "[]"):
        assert standings(content) == []


def test_the_person_sets_the_session_s_quotas_in_the_chat(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run_chat(
        monkeypatch,
        capsys,
        tmp_path,
        stdin="/quotas\n"
        "/turns-per-day 20\n"
        "/quiet-hours 22:00-07:00 Europe/Paris\n"
        "/active-reminders 500\n"
        "/active-reminders 10\n"
        "/quiet-hours 22:00-07:00 Mars/Olympus\n"
        "/turns-per-day off\n",
    )
    assert (code, err) == (0, "")
    notes = [line for line in out.splitlines() if line.startswith(("note> ", "error> ", "usage> "))]
    program = "(the program's setting)"
    session = "(set for this session)"
    assert notes == [
        f"note> reminder turns per day: no limit {program}",
        f"note> quiet hours: none {program}",
        "note> active reminders: at most 100 (the program's setting; the program allows 100)",
        f"note> reminder turns per day: 20 {session}",
        f"note> quiet hours: none {program}",
        "note> active reminders: at most 100 (the program's setting; the program allows 100)",
        f"note> reminder turns per day: 20 {session}",
        f"note> quiet hours: 22:00 to 07:00 Europe/Paris {session}",
        "note> active reminders: at most 100 (the program's setting; the program allows 100)",
        "error> active reminders must be a whole number from 1 to 100, the most this program "
        "allows, or default.",
        f"note> reminder turns per day: 20 {session}",
        f"note> quiet hours: 22:00 to 07:00 Europe/Paris {session}",
        "note> active reminders: at most 10 (set for this session; the program allows 100)",
        "error> quiet hours: 'Mars/Olympus' is not a supported time zone; use 'UTC' or an IANA "
        "Area/Location name such as 'America/New_York' or 'Asia/Tokyo'.",
        "usage> /quiet-hours START-END ZONE|off|default, such as /quiet-hours 22:00-07:00 "
        "Europe/Paris",
        f"note> reminder turns per day: no limit {session}",
        f"note> quiet hours: 22:00 to 07:00 Europe/Paris {session}",
        "note> active reminders: at most 10 (set for this session; the program allows 100)",
    ]
    quotas = [
        entry.payload
        for entry in read(tmp_path, session_id_of(out)).entries
        if entry.type == "schedule/quotas"
    ]
    last = msgspec.to_builtins(quotas[-1])
    assert last == {
        "version": 1,
        "at": last["at"],
        "turnsPerDay": None,
        "quietHours": {"start": "22:00", "end": "07:00", "timeZone": "Europe/Paris"},
        "maxActive": 10,
    }
