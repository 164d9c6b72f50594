"""Random sequences of management calls and clock steps through the real tools (SPEC §11, §12).

Each example drives :class:`ScheduleTools` on a live Schedule over a memory Session, in virtual
time, with mostly plausible calls: creates of every kind (with ends and lateness), updates with
every combination of fields (the reminder's own rule given again included), deletes, lists,
clock advances (small and large, across the DST changes of Europe/London and America/New_York)
during which the owner delivers and records misses, wall-clock jumps either way, the user's turn
holding deliveries back, and restarts. After every step: no result is ``internal_error`` or
``corrupt_schedule_log``; a refused call appended nothing; an accepted create or update appended
and answered the view the list then shows; the owner has not stopped (a decision of
:mod:`session_schedule.core.due` the fold refuses stops it); the Session's log folds from its
start to what the live Schedule lists; and a checkpoint of that fold resumes to the same views.
A restart (mid-program and at the end) lists the same reminders. Set
``SESSION_SCHEDULE_FUZZ_EXAMPLES`` to run more examples, and ``SESSION_SCHEDULE_FUZZ_STEPS`` for
longer programs.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from session_schedule.core.changes import CHANGE_EVENT_TYPE
from session_schedule.core.fold import ScheduleFold, fold
from session_schedule.core.instants import MAX_INSTANT, Instant, format_instant, parse_instant
from session_schedule.runtime.live import LiveSchedule
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.port import SessionHandle, schedule_changes
from session_schedule.testing.agent import FakeAgent
from session_schedule.testing.clock import FakeClock
from session_schedule.tools.handlers import ScheduleTools
from tests.virtual_time import run_for

EXAMPLES = int(os.environ.get("SESSION_SCHEDULE_FUZZ_EXAMPLES", "150"))
STEPS_AT_MOST = int(os.environ.get("SESSION_SCHEDULE_FUZZ_STEPS", "30"))

STARTS = (
    "2026-12-01T10:00:00.000Z",
    "2026-10-24T22:30:00.000Z",  # a day before London's autumn change
    "2027-03-27T23:10:00.000Z",  # London springs forward at 01:00 UTC the next morning
    "2027-03-13T20:00:00.000Z",  # New York springs forward on 14 March
    "2027-01-31T08:00:00.000Z",  # a month's last day
    "9999-12-29T22:00:00.000Z",  # near the end of time, where recurring reminders end
)
ZONES = ("UTC", "Europe/London", "America/New_York", "Asia/Tokyo")
TIMES = ("00:30", "01:30", "02:30", "09:00", "23:59:59")
RULES = (
    "FREQ=MONTHLY;BYMONTHDAY=-1",
    "FREQ=WEEKLY;BYDAY=MO,FR",
    "FREQ=DAILY;COUNT=3",
    "FREQ=DAILY",
    "FREQ=WEEKLY;INTERVAL=2;BYDAY=SU",
    "FREQ=MONTHLY;BYDAY=1MO",
    "FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU",
    "FREQ=DAILY;UNTIL=20270105",
)
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")

# An instant is drawn as an offset in seconds from the clock when the call is made (so most are
# in the future), then given as RFC 3339 or in the local form.
offsets = st.one_of(
    st.integers(-3600, 3 * 86400),
    st.sampled_from([1, 299, 300, 3600, 86400, 7 * 86400, 40 * 86400]),
)
instants = st.one_of(
    st.tuples(st.just("instant"), offsets, st.sampled_from((None, *ZONES))),
    # Near the reminder's next delivery or its end, where the checks between them lie.
    st.tuples(
        st.sampled_from(["scheduledAt", "until"]),
        st.sampled_from([-86400, -3600, -1, 0, 1, 3600, 86400]),
        st.sampled_from((None, "UTC", "Europe/London")),
    ),
)
seconds = st.one_of(st.sampled_from([1, 60, 300, 600, 3600, 86400]), st.integers(1, 200_000))
daily = st.fixed_dictionaries(
    {
        "time": st.sampled_from(TIMES),
        "time_zone": st.sampled_from(ZONES),
        "weekdays": st.one_of(
            st.none(), st.lists(st.sampled_from(WEEKDAYS), min_size=1, max_size=3, unique=True)
        ),
    }
)
calendar = st.fixed_dictionaries(
    {
        "rule": st.sampled_from(RULES),
        "time": st.sampled_from(TIMES),
        "time_zone": st.sampled_from(ZONES),
    },
    optional={"start_date": st.sampled_from(["2026-10-01", "2026-12-31", "2027-03-28"])},
)
selectors = st.one_of(
    st.fixed_dictionaries({"after_seconds": seconds}),
    st.fixed_dictionaries({"at": instants}),
    st.fixed_dictionaries({"every_seconds": st.sampled_from([300, 600, 3600, 86400, 90061])}),
    st.fixed_dictionaries({"daily_at": daily}),
    st.fixed_dictionaries({"calendar": calendar}),
)
ends = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "until": st.one_of(st.none(), instants),
            "max_runs": st.one_of(st.none(), st.integers(1, 4)),
        }
    ),
)
lateness = st.one_of(st.none(), st.sampled_from([1, 60, 600, 3600, 86400]))
prompts = st.sampled_from(["stretch", "walk", "tea"])


@st.composite
def creates(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    arguments: dict[str, Any] = {"prompt": draw(prompts), **draw(selectors)}
    arguments["ends"] = draw(ends)
    arguments["max_lateness_seconds"] = draw(lateness)
    return ("create", arguments)


@st.composite
def updates(draw: st.DrawFn) -> tuple[str, int, dict[str, Any]]:
    arguments: dict[str, Any] = {}
    if draw(st.booleans()):
        arguments["prompt"] = draw(prompts)
    choice = draw(st.sampled_from(["none", "none", "new", "same"]))
    if choice == "new":
        arguments.update(draw(selectors))
    elif choice == "same":
        arguments["same"] = True  # replaced by the reminder's own rule when the call is made
    paused = draw(st.sampled_from(["absent", "absent", "null", "true", "false"]))
    if paused != "absent":
        arguments["paused"] = {"null": None, "true": True, "false": False}[paused]
    if draw(st.booleans()):
        arguments["snooze"] = draw(
            st.one_of(
                st.none(),
                st.fixed_dictionaries({"after_seconds": seconds}),
                st.fixed_dictionaries({"until": instants}),
            )
        )
    if draw(st.booleans()):
        arguments["ends"] = draw(ends)
    if draw(st.booleans()):
        arguments["max_lateness_seconds"] = draw(lateness)
    return ("update", draw(st.integers(0, 7)), arguments)


STEPS = {
    "create": creates(),
    "update": updates(),
    "delete": st.tuples(st.just("delete"), st.integers(0, 5)),
    "list": st.tuples(st.just("list")),
    "busy": st.tuples(st.just("busy"), st.booleans()),
    "reopen": st.tuples(st.just("reopen")),
    "jump": st.tuples(
        st.just("jump"),
        # Also exactly a lateness past a target, the edge between a late delivery and a miss.
        st.one_of(st.integers(-3600, 3600), st.sampled_from([-1, 1, 60, 600, 3600, 86400])),
    ),
    "advance": st.tuples(
        st.just("advance"),
        st.one_of(
            st.integers(1, 600),
            st.sampled_from([1, 60, 299, 300, 600, 3600, 86400, 3 * 86400, 40 * 86400]),
            st.integers(1, 10 * 86400),
        ),
    ),
}


@st.composite
def programs(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """A list of steps of a few kinds (swarm testing: some examples only create and update,
    others also delete, jump or advance), so that rarer sequences come up often enough."""
    kinds = draw(st.sets(st.sampled_from(sorted(STEPS)), min_size=1))
    weighted = [STEPS[kind] for kind in sorted(kinds)]
    weighted += [STEPS["update"]] * 4 if "update" in kinds else []
    # Without more creates, one reminder goes through every step.
    return [
        draw(creates()),
        *draw(st.lists(st.one_of(weighted), min_size=4, max_size=STEPS_AT_MOST)),
    ]


LAST_CLOCK = parse_instant("9999-12-31T23:59:00.000Z")
REFUSALS_NEVER_EXPECTED = {"internal_error", "corrupt_schedule_log"}


def _resolve(value: Any, now: Instant, view: dict[str, Any] | None = None) -> Any:
    """Turn each drawn instant into its text (or local form) at the time of the call: from the
    clock, or from the updated reminder's next delivery or end."""
    if isinstance(value, tuple) and value and value[0] in ("instant", "scheduledAt", "until"):
        base, offset, zone = value
        origin: Instant = now
        if base == "scheduledAt" and view is not None:
            origin = parse_instant(view["scheduledAt"])
        elif base == "until" and view is not None and (view.get("ends") or {}).get("until"):
            origin = parse_instant(view["ends"]["until"])
        text = format_instant(Instant(min(origin + offset * 1000, MAX_INSTANT)))
        if zone is None:
            return text
        # The local form, as a wall-clock reading in ``zone``: the date and time of the UTC
        # reading, read in the zone (plausible, and across DST sometimes in a gap or overlap).
        return {"date": text[:10], "time": text[11:19], "time_zone": zone}
    if isinstance(value, dict):
        return {key: _resolve(item, now, view) for key, item in value.items()}
    return value


def _own_rule(view: dict[str, Any]) -> dict[str, Any]:
    """The selector that gives a listed reminder its own rule again."""
    kind = view["kind"]
    if kind == "every":
        return {"every_seconds": view["everySeconds"]}
    if kind == "daily":
        return {
            "daily_at": {
                "time": view["time"],
                "time_zone": view["timeZone"],
                "weekdays": view["weekdays"],
            }
        }
    if kind == "calendar":
        selector = {"rule": view["rule"], "time": view["time"], "time_zone": view["timeZone"]}
        if "startDate" in view:
            selector["start_date"] = view["startDate"]
        return {"calendar": selector}
    return {"at": view["scheduledAt"]}


def _pick(views: dict[str, dict[str, Any]], index: int) -> str:
    """An active reminder's id, mostly; now and then one that is not active."""
    if (index == 0 and len(views) < 3) or not views:
        return f"sch_{index + 1}"
    return sorted(views)[index % len(views)]


class Run:
    def __init__(self, store: MemorySessionStore, session: SessionHandle, clock: FakeClock):
        self.store = store
        self.session = session
        self.clock = clock
        self.agent = FakeAgent()
        self.schedule = LiveSchedule(session, self.agent, clock=clock)
        self.tools = ScheduleTools(self.schedule)
        self.trace: list[object] = []

    async def reopen(self) -> None:
        await self.schedule.close()
        await self.session.close()
        self.session = await self.store.open(self.session.id)
        self.agent = FakeAgent()
        self.schedule = LiveSchedule(self.session, self.agent, clock=self.clock)
        self.tools = ScheduleTools(self.schedule)
        await self.schedule.start()

    def time_left(self) -> int:
        """Whole seconds the wall clock may still move forward: a machine's clock stays within
        the years every instant is written in (0001-9999)."""
        return max(0, (LAST_CLOCK - self.clock.now()) // 1000)

    def count(self) -> int:
        return sum(1 for entry in self.session.entries if entry.type == CHANGE_EVENT_TYPE)

    async def views(self) -> dict[str, dict[str, Any]]:
        listed = await self.tools.call("schedule_list", {})
        assert listed.get("ok", True) is not False, listed
        return {view["id"]: dict(view) for view in listed["schedules"]}  # type: ignore[attr-defined]

    async def run_for(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass, waking the owner at each of its deadlines."""
        await run_for(self.schedule, self.clock, seconds)

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        before = self.count()
        result = await self.tools.call(name, arguments)
        self.trace.append((self.clock.now_text(), name, arguments, result))
        if result.get("ok") is False:
            code = result["error"]["code"]  # type: ignore[index]
            assert code not in REFUSALS_NEVER_EXPECTED, self.trace
            assert self.count() == before, self.trace
        elif name in ("schedule_create", "schedule_update"):
            assert self.count() > before, self.trace
            written = self.count()
            view = result["schedule"]
            listed = await self.views()
            if self.count() == written:  # the owner delivered nothing meanwhile
                assert listed[view["id"]] == view, self.trace  # type: ignore[index]
        return result

    async def check(self) -> None:
        """The owner runs, the log folds, and the fold of the log from its start (the replay
        path) holds what the live Schedule (built change by change) lists."""
        await self.schedule.settled()
        assert self.schedule.failure is None, (self.schedule.failure, self.trace)
        listed = await self.views()
        # No await from the list to the fold: the owner delivers nothing in between.
        folded = fold(schedule_changes(self.session.entries), session=self.session.header.id)
        replayed = {str(view["id"]): dict(view) for view in folded.plain_views(self.clock.now())}
        assert sorted(listed) == sorted(replayed), self.trace
        # A checkpoint holds the records and their statuses; resumed from it, the same views.
        resumed = ScheduleFold.resumed(
            folded.by_creation(),
            highest_id=folded.highest_id,
            session=self.session.header.id,
            statuses=tuple(folded.statuses().items()),
        )
        assert resumed.plain_views(self.clock.now()) == folded.plain_views(self.clock.now())
        for schedule_id, view in replayed.items():
            # ``runs`` and ``lastRun`` come from the log's history, not the fold.
            keys = set(view) - {"runs", "lastRun"}
            shown = {key: listed[schedule_id].get(key) for key in keys}
            assert shown == {key: view[key] for key in keys}, (schedule_id, self.trace)

    async def step(self, step: tuple[Any, ...]) -> None:
        now = self.clock.now()
        if step[0] == "create":
            await self.call("schedule_create", _resolve(step[1], now))
        elif step[0] == "update":
            views = await self.views()
            schedule_id = _pick(views, step[1])
            arguments = _resolve(step[2], now, views.get(schedule_id))
            if arguments.pop("same", False) and schedule_id in views:
                arguments.update(_own_rule(views[schedule_id]))
            await self.call("schedule_update", {"id": schedule_id, **arguments})
        elif step[0] == "delete":
            await self.call("schedule_delete", {"id": _pick(await self.views(), step[1])})
        elif step[0] == "list":
            await self.call("schedule_list", {})
        elif step[0] == "busy":
            # The user's turn starts (deliveries wait for it) or ends.
            self.trace.append(("busy", step[1]))
            await self.schedule.settled()
            if step[1] and not self.agent.busy and not self.agent.in_maintenance:
                self.agent.start_turn()
            elif not step[1] and self.agent.busy:
                self.agent.finish_turn()
        elif step[0] == "reopen":
            # The process restarts: the Session is opened again and a new Schedule folds it.
            self.trace.append(("reopen",))
            if self.agent.busy:
                self.agent.finish_turn()  # a held delivery is made before the restart
            await self.schedule.settled()
            before = await self.views()
            await self.reopen()
            assert await self.views() == before, self.trace
        elif step[0] == "jump":
            self.trace.append(("jump", step[1]))
            await self.schedule.settled()
            self.clock.jump(
                min(step[1], self.time_left())
            )  # the wall clock stepped (NTP), elapsed time unmoved
            await self.schedule.settled()
        else:
            self.trace.append(("advance", step[1]))
            seconds = min(step[1], self.time_left())
            if seconds <= 3600:
                await self.run_for(seconds)  # every wake-up on the way, deliveries one by one
            else:
                await self.schedule.settled()  # downtime: one wake-up, catching up at once
                self.clock.advance(seconds)
                await self.schedule.settled()
        await self.check()


async def _run(start: str, program: list[tuple[Any, ...]]) -> None:
    store = MemorySessionStore()
    clock = FakeClock(start)
    run = Run(store, await store.create(now=clock.now()), clock)
    await run.schedule.start()
    try:
        for step in program:
            await run.step(step)
        await run.step(("reopen",))
        await run.check()
    finally:
        await run.schedule.close()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.sampled_from(STARTS), programs())
def test_random_management_keeps_a_log_that_folds(start: str, program: list[Any]) -> None:
    asyncio.run(_run(start, program))


def test_the_starts_are_instants() -> None:
    assert all(format_instant(parse_instant(start)) == start for start in STARTS)
