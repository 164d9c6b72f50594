"""``session-schedule sessions``: list the sessions in the store, with their problems.

Each row says when a session was created, its parent and the entry it was forked at (for a
fork), how many entries it has, how many reminders are active and the earliest target. A session
whose log is damaged is listed with its problem. It only reads (see
:mod:`session_schedule.cli.reading`).
"""

from __future__ import annotations

import argparse
from typing import Final, final

import msgspec

from session_schedule.cli import reading
from session_schedule.cli.common import EXIT_OK, add_command, add_json_flag, store_location
from session_schedule.cli.reading import fold_snapshot, with_store
from session_schedule.cli.render import Table, Text, output, print_json, untrusted
from session_schedule.core.due import next_wakeup
from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import format_instant
from session_schedule.session import SessionCorrupt, SessionNotFound
from session_schedule.session.location import store_url
from session_schedule.session.port import SessionStore

DESCRIPTION: Final = (
    "The sessions in the store (--store), oldest first: when each was created, "
    "its parent and the entry it was forked at (for a fork), how many entries it has, how "
    "many reminders are active and the earliest target. A session whose log is damaged is "
    "listed with its problem."
)
EXAMPLE: Final = "session-schedule sessions --json"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``sessions`` to the program's subcommands."""
    parser = add_command(commands, "sessions", run, description=DESCRIPTION, example=EXAMPLE)
    add_json_flag(parser)


@final
class SessionSummary(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One row of ``sessions``; the JSON form uses the header's camelCase names."""

    id: str
    created_at: str | None
    """``None`` when even the header could not be read (see ``problem``)."""
    parent_id: str | None
    seed_length: int | None
    entries: int | None
    """``None`` when the log could not be read (see ``problem``)."""
    active_reminders: int | None
    next_target: str | None
    """The earliest active target, canonical UTC; ``None`` when nothing is active."""
    problem: str | None
    """Why the log could not be read or folded, or ``None`` when it is sound."""


async def summarize(store: SessionStore) -> list[SessionSummary]:
    """A summary of every session in ``store``, by creation instant, then id."""
    summaries: list[SessionSummary] = []
    headers, unreadable = await store.scan()
    for header in headers:
        entries = active = next_target = problem = None
        try:
            snapshot = await store.read(header.id)
            state = fold_snapshot(snapshot)
        except SessionNotFound:
            continue  # deleted since it was listed
        except (SessionCorrupt, ScheduleError) as error:
            problem = str(error)
        else:
            entries, active = len(snapshot.entries), len(state)
            wakeup = next_wakeup(state)
            next_target = None if wakeup is None else format_instant(wakeup)
        summaries.append(
            SessionSummary(
                id=header.id,
                created_at=header.created_at,
                parent_id=header.parent_id,
                seed_length=header.seed_length,
                entries=entries,
                active_reminders=active,
                next_target=next_target,
                problem=problem,
            )
        )
    summaries.extend(
        SessionSummary(
            id=problem.session_id,
            created_at=None,
            parent_id=None,
            seed_length=None,
            entries=None,
            active_reminders=None,
            next_target=None,
            problem=str(problem),
        )
        for problem in unreadable
    )
    return summaries


def run(arguments: argparse.Namespace) -> int:
    location = store_location(arguments)
    summaries = with_store(arguments, summarize)
    if arguments.json:
        print_json(summaries)
        return EXIT_OK
    with output() as console:
        if not summaries:
            console.print(Text(f"no sessions in {store_url(location)}"))
            return EXIT_OK
        now = format_instant(reading.clock.now())
        table = Table("id", "created (UTC)", "parent", "entries", "active", "next target")
        for summary in summaries:
            parent = (
                Text("—", style="dim")
                if summary.parent_id is None
                else Text(f"{summary.parent_id} at {summary.seed_length}")
            )
            if summary.problem is not None:
                entries, active, target = Text("?"), Text("corrupt", style="bold red"), Text("")
            else:
                entries, active = Text(str(summary.entries)), Text(str(summary.active_reminders))
                target = _target_text(summary.next_target, now)
            created = Text(summary.created_at or "?")
            table.add_row(Text(summary.id), created, parent, entries, active, target)
        console.print(table)
        for summary in summaries:
            if summary.problem is not None:
                console.print(untrusted(summary.problem, style="red"))
        return EXIT_OK


def _target_text(target: str | None, now: str) -> Text:
    if target is None:
        return Text("—", style="dim")
    if target <= now:
        return Text.assemble(target, (" (overdue)", "bold yellow"))
    return Text(target)
