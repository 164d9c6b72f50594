"""``schedule_list`` pages: a bounded result, a cursor that survives changes between calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import cast

import msgspec
import pytest

from session_schedule.runtime.live import LiveSchedule
from session_schedule.session.memory import MemorySessionStore
from session_schedule.testing.agent import FakeAgent
from session_schedule.testing.clock import FakeClock
from session_schedule.tools.handlers import ScheduleTools
from session_schedule.tools.paging import MAX_PAGE_CHARS

START = "2026-11-29T20:00:00.000Z"


@pytest.fixture
async def tools() -> AsyncIterator[ScheduleTools]:
    clock = FakeClock(START)
    session = await MemorySessionStore().create(now=clock.now())
    schedule = LiveSchedule(session, FakeAgent(), clock=clock)
    await schedule.start()
    yield ScheduleTools(schedule)
    await schedule.close()


async def fill(tools: ScheduleTools, count: int, prompt_chars: int) -> list[str]:
    ids = []
    for index in range(count):
        prompt = f"r{index} " + "x" * (prompt_chars - 4)
        created = await tools.call(
            "schedule_create", {"prompt": prompt, "after_seconds": 600 + index}
        )
        assert created["ok"] is True
        ids.append(cast("dict[str, str]", created["schedule"])["id"])
    return ids


async def all_pages(tools: ScheduleTools, limit: int | None = None) -> list[dict[str, object]]:
    pages = []
    cursor = None
    while True:
        result = await tools.call("schedule_list", {"cursor": cursor, "limit": limit})
        assert result["ok"] is True
        pages.append(result)
        cursor = result["next_cursor"]
        if cursor is None:
            return pages


def ids_of(result: dict[str, object]) -> list[str]:
    return [view["id"] for view in cast("list[dict[str, str]]", result["schedules"])]


async def test_a_full_session_comes_back_in_pages_each_within_the_bound(
    tools: ScheduleTools,
) -> None:
    """100 reminders of 4,000 characters were 420,000 characters in one result."""
    ids = await fill(tools, 100, 4_000)
    pages = await all_pages(tools)
    assert [item for page in pages for item in ids_of(page)] == ids
    largest_view = max(
        len(msgspec.json.encode(view))
        for page in pages
        for view in page["schedules"]  # type: ignore[attr-defined]
    )
    for page in pages:
        assert page["total"] == 100
        assert len(msgspec.json.encode(page)) <= MAX_PAGE_CHARS + largest_view + 200
    assert len(pages) == 34  # three 4,000-character reminders fit 16,000 characters, not four
    # A null limit and the largest one page the same way: by the character budget.
    assert await all_pages(tools, limit=100) == pages
    assert ids_of(pages[0]) == ids[:3]
    assert pages[0]["next_cursor"] == f"2026-11-29T20:10:02.000Z/{ids[2]}"


@pytest.mark.parametrize("count", [25, 60])
async def test_short_reminders_all_come_back_in_one_call(tools: ScheduleTools, count: int) -> None:
    """SPEC §8: schedule_list returns the active views; a null limit bounded a page at 20."""
    ids = await fill(tools, count, 10)
    for arguments in ({}, {"cursor": None, "limit": None}):
        result = await tools.call("schedule_list", arguments)
        assert result == {
            "ok": True,
            "now": START,
            "schedules": [
                {
                    "kind": "after",
                    "id": schedule_id,
                    "prompt": f"r{index} xxxxxx",
                    "afterSeconds": 600 + index,
                    "scheduledAt": f"2026-11-29T20:{10 + index // 60}:{index % 60:02d}.000Z",
                    "state": "scheduled",
                    "deliveryMode": "session-local",
                    "runs": 0,
                    "lastRun": None,
                }
                for index, schedule_id in enumerate(ids)
            ],
            "next_cursor": None,
            "total": count,
        }


async def test_an_explicit_limit_still_bounds_the_page(tools: ScheduleTools) -> None:
    ids = await fill(tools, 45, 10)
    assert [len(ids_of(page)) for page in await all_pages(tools, limit=20)] == [20, 20, 5]
    assert [len(ids_of(page)) for page in await all_pages(tools, limit=100)] == [45]
    assert [item for page in await all_pages(tools, limit=7) for item in ids_of(page)] == ids
    first = await tools.call("schedule_list", {"limit": 1})
    assert ids_of(first) == ids[:1]
    assert first["next_cursor"] == f"2026-11-29T20:10:00.000Z/{ids[0]}"
    assert first["total"] == 45


async def test_a_full_session_of_short_reminders_pages_by_characters(
    tools: ScheduleTools,
) -> None:
    """100 short reminders pass the character budget: a null limit still pages them."""
    ids = await fill(tools, 100, 10)
    pages = await all_pages(tools)
    assert [len(ids_of(page)) for page in pages] == [85, 15]
    assert [item for page in pages for item in ids_of(page)] == ids
    assert all(page["total"] == 100 for page in pages)
    assert pages[0]["next_cursor"] == f"2026-11-29T20:11:24.000Z/{ids[84]}"
    # With limit 100 the character budget still ends the page at the same reminder.
    at_most = await tools.call("schedule_list", {"limit": 100})
    assert at_most == pages[0]


async def test_a_cursor_survives_creates_and_deletes_between_calls(tools: ScheduleTools) -> None:
    ids = await fill(tools, 10, 10)
    first = await tools.call("schedule_list", {"limit": 4})
    assert ids_of(first) == ids[:4]
    # Between the calls: the last reminder of the page is deleted, and one sooner is created.
    await tools.call("schedule_delete", {"id": ids[3]})
    await tools.call("schedule_create", {"prompt": "sooner", "after_seconds": 60})
    second = await tools.call("schedule_list", {"cursor": first["next_cursor"], "limit": 4})
    assert ids_of(second) == ids[4:8]
    assert second["total"] == 10


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"limit": 0},
            "limit must be a whole number from 1 to 100, or null for as many reminders as fit "
            "in one page.",
        ),
        (
            {"limit": 101},
            "limit must be a whole number from 1 to 100, or null for as many reminders as fit "
            "in one page.",
        ),
        (
            {"limit": True},
            "limit must be a whole number from 1 to 100, or null for as many reminders as fit "
            "in one page.",
        ),
        (
            {"limit": 2.5},
            "limit must be a whole number from 1 to 100, or null for as many reminders as fit "
            "in one page.",
        ),
        *(
            (
                {"cursor": cursor},
                "cursor must be a next_cursor that schedule_list returned, or null for the "
                "first page; call it with cursor null to start again.",
            )
            for cursor in ("", "sch_3", "2026-11-29T20:00:00Z/sch_3", "x/sch_1", 7, ["a"])
        ),
    ],
)
async def test_a_bad_cursor_or_limit_is_refused_with_what_to_send(
    tools: ScheduleTools, arguments: dict[str, object], message: str
) -> None:
    assert await tools.call("schedule_list", arguments) == {
        "ok": False,
        "error": {"code": "invalid_selector", "message": message},
    }


async def test_a_whole_number_as_a_float_is_a_limit(tools: ScheduleTools) -> None:
    await fill(tools, 3, 10)
    assert len(ids_of(await tools.call("schedule_list", {"limit": 2.0}))) == 2
