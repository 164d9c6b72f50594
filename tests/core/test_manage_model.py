"""SPEC §11 against an independent model: random sequences of tool calls and clock advances.

The model below is written from the specification alone, as plainly as possible: it keeps each
reminder's grid and walks it one occurrence at a time, and decides what is due, missed or
delivered by brute force. The system under test is the core as the live owner drives it — the
decisions of :mod:`session_schedule.core.rules` applied to a :class:`ScheduleFold`, then
``plan_misses`` and ``plan_delivery`` drained at each clock step. After every step the model and
the fold must agree on every reminder's next delivery, pause, snooze, runs left and end, and on
every miss and delivery made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import msgspec
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from session_schedule.core.due import plan_delivery, plan_misses
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import Instant, format_instant, parse_instant
from session_schedule.core.records import make_view
from session_schedule.core.rules import decide_create, decide_delete, decide_update

START = parse_instant("2026-12-01T10:00:00.000Z")
SECOND = 1000


@dataclass
class Reminder:
    kind: str  # "after" or "every"
    interval: int  # milliseconds (every)
    target: int  # the next occurrence T
    snoozed: int | None = None
    paused: bool = False
    runs: int = 0
    max_runs: int | None = None
    until: int | None = None
    lateness: int | None = None  # milliseconds
    late_from: int | None = None
    prompt: str = "p"

    def delivery(self) -> int:
        return self.target if self.snoozed is None else self.snoozed

    def after(self, instant: int) -> int:
        """The first occurrence of the grid strictly after ``instant``, walked one by one."""
        following = self.target
        while following <= instant:
            following += self.interval
        return following


@dataclass
class Model:
    now: int = START
    reminders: dict[str, Reminder] = field(default_factory=dict)
    next_number: int = 1

    # -- tool calls: the outcome is an error code or None -------------------------------------

    def create(self, kind: str, seconds: int, max_runs: int | None, until: int | None,
               lateness: int | None) -> str | None:  # fmt: skip
        target = self.now + seconds * SECOND
        if kind == "after" and (max_runs is not None or until is not None):
            return "invalid_rule"
        if until is not None and until <= self.now:
            return "not_future"
        if until is not None and until <= target:
            return "invalid_rule"
        self.reminders[f"sch_{self.next_number}"] = Reminder(
            kind=kind,
            interval=seconds * SECOND,
            target=target,
            max_runs=max_runs,
            until=until,
            lateness=None if lateness is None else lateness * SECOND,
        )
        self.next_number += 1
        return None

    def update(self, schedule_id: str, rule: tuple[str, int] | None, paused: bool | None,
               snooze: int | None, ends: tuple[int | None, int | None] | None,
               prompt: str | None = None) -> str | None:  # fmt: skip
        # SPEC §11: the checks run in §8's order, the prompt first (before the id).
        if prompt is not None and not prompt.strip():
            return "invalid_prompt"
        return self._update(schedule_id, rule, paused, snooze, ends, prompt)

    def _update(self, schedule_id: str, rule: tuple[str, int] | None, paused: bool | None,
                snooze: int | None, ends: tuple[int | None, int | None] | None,
                prompt: str | None) -> str | None:  # fmt: skip
        old = self.reminders.get(schedule_id)
        if old is None:
            return "invalid_selector"
        new = Reminder(**vars(old))
        new.prompt = old.prompt if prompt is None else prompt
        changed = new.prompt != old.prompt
        if rule is not None:
            kind, seconds = rule
            moved = (kind, seconds * SECOND, self.now + seconds * SECOND)
            # The same rule with the same next target is no change (a snooze stays).
            if moved != (old.kind, old.interval, old.target):
                new.kind, new.interval, new.target = moved
                new.snoozed, new.late_from = None, None
                if kind == "after":
                    new.max_runs, new.until = None, None
                changed = True
        if ends is not None:
            max_runs, until = ends
            if until is not None and until <= self.now:
                return "not_future"
            if max_runs is not None and max_runs <= old.runs:
                return "invalid_rule"
            if new.kind == "after":
                if max_runs is not None or until is not None:
                    return "invalid_rule"
            else:
                if until is not None and until <= new.target:
                    return "invalid_rule"
                if until is not None and new.snoozed is not None and new.snoozed > until:
                    return "invalid_rule"
                changed |= (new.max_runs, new.until) != (max_runs, until)
                new.max_runs, new.until = max_runs, until
        elif rule is not None and new.until is not None and new.until <= new.target:
            return "invalid_rule"
        resume = paused is False and old.paused
        if resume:
            if new.kind == "every":
                following = new.after(self.now) if new.target <= self.now else new.target
                if new.until is not None and following > new.until:
                    return "invalid_rule"
                new.target = following
            elif self.now > new.target:
                new.late_from = self.now
            new.paused = False
            changed = True
        if snooze is not None:
            if paused is True or (old.paused and not resume):
                return "invalid_selector"
            until = self.now + snooze * SECOND
            if new.until is not None and until > new.until:
                return "invalid_rule"
            # Snoozed to that very instant already (the same call repeated): no change.
            if new.snoozed != until:
                new.snoozed, new.late_from = until, None
                changed = True
        if paused is True and not old.paused:
            # A pause clears the snooze; a one-shot's target had become the snooze instant.
            if new.kind == "after" and new.snoozed is not None:
                new.target = new.snoozed
            new.paused, new.snoozed, new.late_from = True, None, None
            changed = True
        if not changed:
            return "invalid_selector"
        self.reminders[schedule_id] = new
        return None

    def delete(self, schedule_id: str) -> None:
        self.reminders.pop(schedule_id, None)

    # -- the clock -------------------------------------------------------------------------

    def advance(self, seconds: int) -> list[tuple[str, ...]]:
        """Move the clock on and decide everything due; what was missed and delivered."""
        self.now += seconds * SECOND
        now = self.now
        outcomes: list[tuple[str, ...]] = []
        for schedule_id, reminder in list(self.reminders.items()):
            if reminder.paused or reminder.delivery() > now:
                continue
            since = reminder.delivery()
            if reminder.late_from is not None:
                since = max(since, reminder.late_from)
            occurrence = format_instant(Instant(reminder.target))
            late = reminder.lateness is not None and now - since > reminder.lateness
            if late:
                outcomes.append(("miss", schedule_id, occurrence))
            elif reminder.kind == "after":
                outcomes.append(("once", schedule_id, occurrence))
            else:
                skipped = 0
                latest = reminder.target
                point = reminder.target + reminder.interval
                last = now if reminder.until is None else min(now, reminder.until)
                while point <= last:
                    skipped += 1
                    latest = point
                    point += reminder.interval
                due_at = latest if reminder.snoozed is None else reminder.snoozed
                outcomes.append(
                    (
                        "batch",
                        schedule_id,
                        occurrence,
                        format_instant(Instant(due_at)),
                        str(skipped),
                    )
                )
            if reminder.kind == "after":
                del self.reminders[schedule_id]
                continue
            # SPEC §11: "the record ends with its max_runs-th dispatch": every dispatch since
            # the create counts, whether or not the reminder had a max_runs then.
            if not late:
                reminder.runs += 1
                if reminder.max_runs is not None and reminder.runs >= reminder.max_runs:
                    del self.reminders[schedule_id]
                    continue
            reminder.target = reminder.after(max(now, reminder.target))
            reminder.snoozed, reminder.late_from = None, None
            if reminder.until is not None and reminder.target > reminder.until:
                del self.reminders[schedule_id]
        return sorted(outcomes)


# -- the system under test, driven as the live owner drives it --------------------------------


@dataclass
class System:
    now: Instant = START
    state: ScheduleFold = field(default_factory=ScheduleFold)

    def create(self, arguments: dict[str, object]) -> str | None:
        try:
            change = decide_create(arguments, now=self.now, state=self.state)
        except ScheduleError as error:
            return error.code
        self.state.apply(change)
        return None

    def update(self, arguments: dict[str, object]) -> str | None:
        try:
            _, changes = decide_update(arguments, now=self.now, state=self.state)
        except ScheduleError as error:
            return error.code
        for change in changes:
            self.state.apply(change)
        return None

    def advance(self, seconds: int) -> list[tuple[str, ...]]:
        self.now = Instant(self.now + seconds * SECOND)
        outcomes: list[tuple[str, ...]] = []
        while True:
            misses = plan_misses(self.state, self.now)
            for miss in misses:
                outcomes.append(("miss", miss.id, miss.scheduled_at))
                self.state.apply(miss)
            delivery = plan_delivery(self.state, self.now)
            if delivery is None:
                if not misses:
                    return sorted(outcomes)
                continue
            for occurrence in delivery.occurrences:
                key = occurrence.key.split("@")[1]
                if delivery.kind == "one-shot":
                    outcomes.append(("once", occurrence.record.id, key))
                else:
                    due_at = format_instant(occurrence.due_at)
                    outcomes.append(
                        ("batch", occurrence.record.id, key, due_at, str(occurrence.skipped))
                    )
            for change in delivery.changes:
                self.state.apply(change)


Bounds = tuple[int | None, int | None]
"""``ends`` as (max_runs, until)."""


def _ends_argument(ends: tuple[int | None, int | None] | None) -> object:
    if ends is None:
        return None
    max_runs, until = ends
    return {
        "max_runs": max_runs,
        "until": None if until is None else format_instant(Instant(until)),
    }


def _agree(model: Model, system: System) -> None:
    assert sorted(model.reminders) == sorted(record.id for record in system.state.by_creation())
    for schedule_id, reminder in model.reminders.items():
        record = system.state.get(ScheduleId(schedule_id))
        assert record is not None
        view = msgspec.to_builtins(
            make_view(record, system.now, system.state.status(ScheduleId(schedule_id)))
        )
        assert view["kind"] == reminder.kind
        assert view["prompt"] == reminder.prompt
        assert view["scheduledAt"] == format_instant(Instant(reminder.delivery()))
        assert view.get("paused", False) == reminder.paused
        snoozed = None if reminder.snoozed is None else format_instant(Instant(reminder.snoozed))
        assert view.get("snoozedUntil") == snoozed
        runs_left = None if reminder.max_runs is None else reminder.max_runs - reminder.runs
        assert view.get("runsLeft") == runs_left
        assert system.state.occurrence_of(ScheduleId(schedule_id)) == reminder.target


seconds_list = st.sampled_from([60, 300, 600, 900, 3600])
offsets = st.sampled_from([1, 10, 30, 90, 300, 1200, 3600]).map(lambda seconds: seconds * SECOND)
ends_values = (
    st.none()
    | st.none()
    | st.tuples(
        st.none() | st.integers(min_value=1, max_value=4),
        st.none() | offsets,
    )
)
_creates = st.tuples(
    st.just("create"),
    st.sampled_from(["every", "every", "after"]),
    st.sampled_from([300, 600, 900, 3600]),
    ends_values,
    st.none() | st.sampled_from([30, 120, 900]),
)
operations = st.one_of(
    _creates,
    _creates,
    st.tuples(
        st.just("create"),
        st.sampled_from(["after", "every"]),
        st.sampled_from([300, 600, 900, 3600]),
        ends_values,
        st.none() | st.sampled_from([30, 120, 900]),
    ),
    st.tuples(
        st.just("update"),
        st.integers(min_value=1, max_value=3),
        st.none()
        | st.none()
        | st.tuples(st.sampled_from(["after", "every"]), st.sampled_from([300, 900])),
        st.none() | st.booleans(),
        st.none() | st.sampled_from([60, 600, 2000]),
        ends_values,
        st.none() | st.none() | st.sampled_from(["p", "q", " "]),
    ),
    st.tuples(st.just("delete"), st.integers(min_value=1, max_value=4)),
    st.tuples(st.just("advance"), seconds_list),
    st.tuples(st.just("advance"), seconds_list),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(operations, max_size=25))
# The same snooze twice: the second changes nothing, so it is refused (SPEC §11).
@example([("create", "every", 300, None, None), *[("update", 1, None, None, 600, None)] * 2])
# The same snooze again with the rule it has: the rule is no change, so the snooze is none either.
@example(
    [
        ("create", "every", 300, None, None),
        ("update", 1, None, None, 2000, None),
        ("update", 1, ("every", 300), None, 2000, None),
    ]
)
# An empty prompt is refused first, before the id is looked at (SPEC §8's order).
@example([("update", 1, None, None, None, None, " "), ("create", "every", 300, None, None)])
# A snoozed one-shot paused, then resumed before and after its snooze instant.
@example(
    [
        ("create", "after", 900, None, None),
        ("update", 1, None, None, 2000, None),
        ("update", 1, None, True, None, None),
        ("update", 1, None, False, None, None),
        ("advance", 3600),
    ]
)
@example(
    [
        ("create", "after", 300, None, 30),
        ("update", 1, None, None, 600, None),
        ("update", 1, None, True, None, None),
        ("advance", 900),
        ("update", 1, None, False, None, None),
        ("advance", 60),
    ]
)
def test_the_core_agrees_with_an_independent_model_of_section_11(
    steps: list[tuple[object, ...]],
) -> None:
    model, system = Model(), System()
    for step in steps:
        match step:
            case ("create", str(kind), int(seconds), ends, lateness):
                bounds = cast("Bounds | None", ends)
                max_runs, until = (None, None) if bounds is None else bounds
                until_at = None if until is None else model.now + until
                arguments: dict[str, object] = {
                    "prompt": "p",
                    f"{kind}_seconds": seconds,
                    "ends": _ends_argument(None if bounds is None else (max_runs, until_at)),
                    "max_lateness_seconds": lateness,
                }
                late = cast("int | None", lateness)
                expected = model.create(kind, seconds, max_runs, until_at, late)
                got = system.create(arguments)
                event(f"create: {got}")
                assert got == expected, (step, got, expected)
            case ("update", int(number), rule, paused, snooze, ends, *rest):
                prompt = cast("str | None", rest[0] if rest else None)
                schedule_id = f"sch_{number}"
                ends_at: Bounds | None = None
                bounds = cast("Bounds | None", ends)
                if bounds is not None:
                    runs, end = bounds
                    ends_at = (runs, None if end is None else model.now + end)
                arguments = {
                    "id": schedule_id,
                    "prompt": prompt,
                    "paused": paused,
                    "ends": _ends_argument(ends_at),
                }
                if rule is not None:
                    arguments[f"{rule[0]}_seconds"] = rule[1]  # type: ignore[index]
                if snooze is not None:
                    arguments["snooze"] = {"after_seconds": snooze, "until": None}
                expected = model.update(schedule_id, rule, paused, snooze, ends_at, prompt)  # type: ignore[arg-type]
                got = system.update(arguments)
                event(f"update: {got}")
                assert got == expected, (step, got, expected)
            case ("delete", int(number)):
                model.delete(f"sch_{number}")
                change = decide_delete({"id": f"sch_{number}"}, state=system.state)
                if change is not None:
                    system.state.apply(change)
            case ("advance", int(seconds)):
                outcomes = system.advance(seconds)
                for outcome in outcomes:
                    event(f"outcome: {outcome[0]}")
                assert outcomes == model.advance(seconds), step
            case _:
                raise AssertionError(step)
        _agree(model, system)


def test_the_model_and_the_core_agree_on_a_snoozed_batch() -> None:
    model, system = Model(), System()
    arguments: dict[str, object] = {"prompt": "p", "every_seconds": 600}
    assert model.create("every", 600, None, None, None) is None
    assert system.create(arguments) is None
    update: dict[str, object] = {"id": "sch_1", "snooze": {"after_seconds": 1500, "until": None}}
    assert model.update("sch_1", None, None, 1500, None) is None
    assert system.update(update) is None
    assert (
        system.advance(1500)
        == model.advance(1500)
        == [("batch", "sch_1", "2026-12-01T10:10:00.000Z", "2026-12-01T10:25:00.000Z", "1")]
    )
    _agree(model, system)
