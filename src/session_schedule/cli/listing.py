"""``session-schedule list SESSION``: a session's active reminders as the model sees them.

Soonest first, each with its state (scheduled, overdue or paused, and under it the standing of a
reminder managed in place: :mod:`session_schedule.core.standing`), delivery mode and, under its
prompt, the reminder turn it was set (or last changed) during — what ``schedule_list`` would tell
the model now, every reminder on one page. With ``--json``, exactly the ``schedule_list`` result,
``setDuring`` included (:mod:`session_schedule.session.provenance`).
"""

from __future__ import annotations

import argparse
from typing import Final

from session_schedule.cli import reading
from session_schedule.cli.common import EXIT_OK, add_command, add_json_flag, add_session_argument
from session_schedule.cli.reading import fold_snapshot, read_snapshot
from session_schedule.cli.render import (
    Cell,
    Group,
    Table,
    Text,
    output,
    print_json,
    rule_text,
    untrusted,
)
from session_schedule.core.instants import format_instant
from session_schedule.core.records import make_view
from session_schedule.core.standing import standing
from session_schedule.runtime.live import with_provenance, with_runs
from session_schedule.session.history import OccurrenceLog
from session_schedule.session.provenance import ProvenanceLog
from session_schedule.tools.results import ListResult

DESCRIPTION: Final = (
    "The active reminders of a session, soonest first, each with its state "
    "(scheduled, or overdue), delivery mode and, when a reminder turn set or last changed it, "
    "that turn — what schedule_list would tell the model now. With --json, exactly the "
    "schedule_list result."
)
EXAMPLE: Final = "session-schedule list s_7k2m4q9x3v5b --json"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``list`` to the program's subcommands."""
    parser = add_command(commands, "list", run, description=DESCRIPTION, example=EXAMPLE)
    add_session_argument(parser)
    add_json_flag(parser)


def run(arguments: argparse.Namespace) -> int:
    snapshot = read_snapshot(arguments)
    state = fold_snapshot(snapshot)
    now = reading.clock.now()
    history = OccurrenceLog(
        seed_length=snapshot.header.seed_length, session=snapshot.header.id, keep=False
    )
    history.feed(snapshot.entries)
    provenance = ProvenanceLog(seed_length=snapshot.header.seed_length)
    provenance.feed(snapshot.entries)
    views = [
        with_provenance(
            with_runs(make_view(record, now, state.status(record.id)), history),
            provenance.of(record.id),
        )
        for record in state.ordered()
    ]
    # Every reminder, on one page: the operator reads the whole list.
    result = ListResult(
        ok=True, now=format_instant(now), schedules=views, next_cursor=None, total=len(views)
    )
    if arguments.json:
        print_json(result)
        return EXIT_OK
    with output() as console:
        count = len(result.schedules)
        console.print(
            Text(
                f"session {snapshot.header.id} at {result.now}: "
                f"{count} active reminder{'' if count == 1 else 's'}"
            )
        )
        if not result.schedules:
            return EXIT_OK
        table = Table(
            "id", "rule", "target (UTC)", "state", "delivery", "prompt", wrapping=("rule", "state")
        )
        for view in result.schedules:
            shown: Cell = Text(view.state, style="bold yellow" if view.state == "overdue" else "")
            if words := standing(view, beside_state=True):  # SPEC 11's standing, under it
                shown = Group(shown, Text(words, style="dim"))
            prompt: Cell = untrusted(view.prompt)
            if isinstance(view.set_during, str):  # the reminder turn, under the prompt
                prompt = Group(prompt, Text(f"set during {view.set_during}", style="dim"))
            table.add_row(
                Text(view.id),
                Text(rule_text(view)),
                Text(view.scheduled_at),
                shown,
                Text(view.delivery_mode),
                prompt,
            )
        console.print(table)
        return EXIT_OK
