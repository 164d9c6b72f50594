"""``session-schedule mcp`` driven by the official MCP client over stdio, as a host would.

Each test spawns the program with a temporary data directory. Real time passes only where a
reminder has to come due (``after_seconds: 1``).
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import msgspec
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPDeprecationWarning

from session_schedule.core.changes import (
    CHANGE_EVENT_TYPE,
    ScheduleCreateChange,
    dispatch_change,
)
from session_schedule.core.due import Delivery, Occurrence
from session_schedule.core.framing import frame
from session_schedule.core.instants import parse_instant
from session_schedule.mcp.server import PENDING_URI, TAKE_TOOL, TakeResult, take_tool
from session_schedule.runtime.clock import SystemClock
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.location import opened_store, parse_store_url
from session_schedule.tools.adapters import mcp_tools
from session_schedule.tools.catalog import tool_definitions

NOTICE_TIMEOUT = 20.0


@dataclass
class Host:
    """The client side: the session, and every notification the server sent."""

    client: ClientSession
    notifications: list[object] = field(default_factory=list)
    logs: list[types.LoggingMessageNotificationParams] = field(default_factory=list)
    updated: asyncio.Event = field(default_factory=asyncio.Event)

    async def wait_for_update(self) -> None:
        await asyncio.wait_for(self.updated.wait(), NOTICE_TIMEOUT)

    async def call(self, name: str, arguments: dict[str, object]) -> types.CallToolResult:
        result = await self.client.call_tool(name, arguments)
        assert isinstance(result, types.CallToolResult)
        return result

    async def pending(self) -> dict[str, object]:
        read = await self.client.read_resource(PENDING_URI)
        (content,) = read.contents
        assert isinstance(content, types.TextResourceContents)
        assert content.mime_type == "application/json"
        return cast("dict[str, object]", json.loads(content.text))


@asynccontextmanager
async def connect(
    data_dir: Path, session_id: str, *, store: str | None = None, log: Path | None = None
) -> AsyncIterator[Host]:
    """The server of ``session_id`` in ``store`` (default: the data directory's JSONL files),
    its stderr kept in ``log`` (default: a file in the data directory)."""
    chosen = [] if store is None else ["--store", store]
    log = data_dir / "server-stderr.txt" if log is None else log
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "session_schedule", "--data-dir", str(data_dir), *chosen, "mcp", session_id],
        # The server imports the code under test (PYTHONPATH), not whatever is installed.
        env=dict(os.environ),
    )
    host: Host | None = None

    async def on_message(message: object) -> None:
        assert host is not None
        host.notifications.append(message)
        if isinstance(message, types.ResourceUpdatedNotification):
            assert message.params.uri == PENDING_URI
            host.updated.set()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        assert host is not None
        host.logs.append(params)

    with log.open("a") as errlog:
        async with (
            stdio_client(server, errlog=errlog) as (read, write),
            ClientSession(
                read, write, message_handler=on_message, logging_callback=on_log
            ) as client,
        ):
            await client.initialize()
            host = Host(client)
            yield host
    stderr = log.read_text()
    place = f"jsonl:{data_dir}" if store is None else store
    assert f"session-schedule mcp: resumed session {session_id} in {place};" in stderr
    assert "Traceback" not in stderr
    assert "Warning" not in stderr


@pytest.fixture
async def session_id(tmp_path: Path) -> str:
    session = await JsonlSessionStore(tmp_path).create(now=SystemClock().now())
    await session.close()
    return session.id


async def _subscribe(host: Host) -> None:
    # Deprecated by the 2026-07-28 protocol (which uses subscriptions/listen), and still how a
    # handshake-era host subscribes.
    with pytest.warns(MCPDeprecationWarning):
        await host.client.subscribe_resource(PENDING_URI)


async def _changes(data_dir: Path, session_id: str) -> list[object]:
    snapshot = await JsonlSessionStore(data_dir).read(session_id)
    return [entry.payload for entry in snapshot.entries if entry.type == CHANGE_EVENT_TYPE]


def _expected_frame(create: ScheduleCreateChange, taken: str) -> str:
    """The frame of the one-shot ``create``, decided at the time the taken text names."""
    (decided,) = [
        line.removeprefix("decided at: ")
        for line in taken.splitlines()
        if line.startswith("decided at: ")
    ]
    record = create.schedule
    return frame(
        Delivery(
            kind="one-shot",
            decided_at=parse_instant(decided),
            occurrences=(
                Occurrence(record=record, due_at=parse_instant(record.scheduled_at), skipped=0),
            ),
            changes=(dispatch_change(record.id),),
        )
    )


async def test_the_tools_are_listed_with_their_schemas(tmp_path: Path, session_id: str) -> None:
    async with connect(tmp_path, session_id) as host:
        listed = await host.client.list_tools()
        resources = await host.client.list_resources()
    dumped = [tool.model_dump(by_alias=True, exclude_none=True) for tool in listed.tools]
    assert [tool["name"] for tool in dumped] == [
        "schedule_create",
        "schedule_list",
        "schedule_delete",
        "schedule_update",
        TAKE_TOOL,
    ]
    for tool, expected in zip(dumped, mcp_tools(tool_definitions()), strict=False):
        assert tool == expected
    assert dumped[4] == take_tool()
    assert [(resource.uri, resource.mime_type) for resource in resources.resources] == [
        (PENDING_URI, "application/json")
    ]


async def test_create_list_delete_and_errors_are_tool_errors(
    tmp_path: Path, session_id: str
) -> None:
    async with connect(tmp_path, session_id) as host:
        created = await host.call("schedule_create", {"prompt": "water", "every_seconds": 600})
        listed = await host.call("schedule_list", {})
        deleted = await host.call("schedule_delete", {"id": "sch_1"})
        again = await host.call("schedule_delete", {"id": "sch_1"})
        rejected = await host.call("schedule_create", {"prompt": "water", "every_seconds": 60})
        unknown = await host.call("schedule_cancel", {})
        take_with_arguments = await host.call(TAKE_TOOL, {"id": "sch_1"})
    assert created.is_error is False
    created_content = cast("dict[str, object]", created.structured_content)
    schedule = cast("dict[str, object]", created_content["schedule"])
    assert schedule["id"] == "sch_1"
    assert schedule["kind"] == "every"
    assert schedule["state"] == "scheduled"
    assert created.content == [
        types.TextContent(type="text", text=json.dumps(created_content, separators=(",", ":")))
    ]
    listing = cast("dict[str, object]", listed.structured_content)
    assert listing["schedules"] == [schedule]
    assert deleted.structured_content == {"ok": True, "id": "sch_1", "deleted": True}
    assert again.structured_content == {"ok": True, "id": "sch_1", "deleted": False}
    for result, code, message in [
        (
            rejected,
            "frequency_too_high",
            "every_seconds must be at least 300 (5 minutes), got 60; choose a longer interval.",
        ),
        (
            unknown,
            "invalid_selector",
            # Every tool the server offers, the take included.
            "there is no tool 'schedule_cancel'; the schedule tools are schedule_create, "
            "schedule_list, schedule_delete, schedule_update, schedule_followups_take.",
        ),
        (
            take_with_arguments,
            "invalid_selector",
            "schedule_followups_take takes no arguments, got `id`; call it with {}.",
        ),
    ]:
        assert result.is_error is True
        assert result.structured_content is None
        (text,) = result.content
        assert isinstance(text, types.TextContent)
        assert json.loads(text.text) == {"ok": False, "error": {"code": code, "message": message}}
    changes = await _changes(tmp_path, session_id)
    assert [type(change).__name__ for change in changes] == [
        "ScheduleCreateChange",
        "ScheduleDeleteChange",
    ]


async def test_a_host_that_takes_gets_the_exact_frame_and_the_dispatch_is_recorded(
    tmp_path: Path, session_id: str
) -> None:
    async with connect(tmp_path, session_id) as host:
        await _subscribe(host)
        nothing = await host.call(TAKE_TOOL, {})
        await host.call("schedule_create", {"prompt": 'stretch, say "done"', "after_seconds": 1})
        await host.wait_for_update()
        pending = await host.pending()
        assert len(await _changes(tmp_path, session_id)) == 1  # the create; no dispatch yet
        taken = await host.call(TAKE_TOOL, {})
        after = await host.pending()
        listed = await host.call("schedule_list", {})
    assert nothing.structured_content == {
        "ok": True,
        "followup": None,
        "occurrenceKeys": [],
        "more": False,
    }
    create, dispatch = await _changes(tmp_path, session_id)
    assert isinstance(create, ScheduleCreateChange)
    assert dispatch == dispatch_change(create.schedule.id)
    key = f"sch_1@{create.schedule.scheduled_at}"
    assert pending["pending"] is True
    assert pending["occurrenceKeys"] == [key]
    assert pending["takeWith"] == TAKE_TOOL
    assert taken.is_error is False
    result = msgspec.convert(taken.structured_content, TakeResult)
    assert result.followup is not None
    assert result.followup == _expected_frame(create, result.followup)
    assert result.occurrence_keys == [key]
    assert result.more is False
    assert isinstance(pending["preview"], str)
    # The preview is the same frame, decided when it was read.
    assert pending["preview"] == _expected_frame(create, pending["preview"])
    assert after == {"pending": False, "occurrenceKeys": [], "preview": None, "takeWith": TAKE_TOOL}
    assert cast("dict[str, object]", listed.structured_content)["schedules"] == []
    notice = [log for log in host.logs if log.level == "notice"]
    assert notice != []
    assert notice[0].logger == "session-schedule"
    assert notice[0].data == {
        "message": "a reminder is due: call schedule_followups_take to receive it",
        "session": session_id,
        "resource": PENDING_URI,
    }


async def test_a_database_store_hands_over_a_reminder_when_the_data_directory_is_missing(
    tmp_path: Path,
) -> None:
    """The outbox is kept in the data directory, which no database store makes: the server
    makes it (parents too, ``0700``) before it serves, so the first take hands the reminder
    over rather than failing to write the outbox on every take."""
    store = f"sqlite:{tmp_path / 'sessions.db'}"
    async with opened_store(parse_store_url(store)) as opened:
        session = await opened.create(now=SystemClock().now())
        await session.close()
    data_dir = tmp_path / "never" / "made"
    async with connect(data_dir, session.id, store=store, log=tmp_path / "stderr.txt") as host:
        await _subscribe(host)
        await host.call("schedule_create", {"prompt": "stretch", "after_seconds": 1})
        await host.wait_for_update()
        taken = await host.call(TAKE_TOOL, {})
    result = msgspec.convert(taken.structured_content, TakeResult)
    assert result.followup is not None
    assert "stretch" in result.followup
    assert result.more is False
    modes = [stat.S_IMODE(path.stat().st_mode) for path in (data_dir.parent, data_dir)]
    assert modes == [0o700, 0o700]


async def test_a_host_that_never_takes_loses_nothing_across_a_restart(
    tmp_path: Path, session_id: str
) -> None:
    async with connect(tmp_path, session_id) as host:
        with pytest.warns(MCPDeprecationWarning):
            await host.client.set_logging_level("warning")  # so no notice this time
        await _subscribe(host)
        await host.call("schedule_create", {"prompt": "stretch", "after_seconds": 1})
        await host.wait_for_update()
        pending = await host.pending()
    assert host.logs == []
    assert pending["pending"] is True
    (create,) = await _changes(tmp_path, session_id)
    assert isinstance(create, ScheduleCreateChange)

    async with connect(tmp_path, session_id) as host:
        await _subscribe(host)
        await host.wait_for_update()  # announced again on subscribing: it is still due
        listed = await host.call("schedule_list", {})
        views = cast("dict[str, object]", listed.structured_content)["schedules"]
        assert [(view["id"], view["state"]) for view in cast("list[dict[str, str]]", views)] == [
            ("sch_1", "overdue")
        ]
        assert await _changes(tmp_path, session_id) == [create]
        taken = await host.call(TAKE_TOOL, {})
    assert [log.level for log in host.logs] != []
    assert {log.level for log in host.logs} == {"notice"}
    result = msgspec.convert(taken.structured_content, TakeResult)
    assert result.followup is not None
    assert result.followup == _expected_frame(create, result.followup)
    assert await _changes(tmp_path, session_id) == [
        create,
        dispatch_change(create.schedule.id),
    ]


async def test_a_2026_07_28_client_hears_of_a_due_reminder_on_its_listen_stream(
    tmp_path: Path, session_id: str
) -> None:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "session_schedule", "--data-dir", str(tmp_path), "mcp", session_id],
        env=dict(os.environ),
    )
    async with Client(server, mode="auto") as client:
        assert client.session.protocol_version == "2026-07-28"
        async with client.listen(resource_subscriptions=[PENDING_URI]) as subscription:
            assert subscription.honored.resource_subscriptions == [PENDING_URI]
            await client.call_tool("schedule_create", {"prompt": "stretch", "after_seconds": 1})

            async def first_event() -> object:
                async for event in subscription:
                    return event
                raise AssertionError("the listen stream ended without an event")

            event = await asyncio.wait_for(first_event(), NOTICE_TIMEOUT)
        assert event == ResourceUpdated(uri=PENDING_URI)
        taken = await client.call_tool(TAKE_TOOL, {})
    result = msgspec.convert(taken.structured_content, TakeResult)
    create, dispatch = await _changes(tmp_path, session_id)
    assert isinstance(create, ScheduleCreateChange)
    assert dispatch == dispatch_change(create.schedule.id)
    assert result.followup == _expected_frame(create, cast("str", result.followup))
