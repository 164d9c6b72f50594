"""``session-schedule check SESSION``: validate a session's whole log strictly.

Every entry is read and strictly decoded, the schedule changes folded, and every tool result in
the transcript must answer a call; a file store's torn tail is described, and the derived data a
store keeps (a checkpoint, JSONL's next-target index) compared with the log. It prints a
one-line summary when the session is sound, with a warning for each tool call a stop or crash
left without its result. With ``--overdue SECONDS`` it is a monitoring probe: exit 1, naming
them, when reminders are later than that.
"""

from __future__ import annotations

import argparse
from operator import attrgetter
from typing import Final, Literal, final

import msgspec

from session_schedule.cli import reading
from session_schedule.cli.common import (
    EXIT_CORRUPT,
    EXIT_OK,
    EXIT_REJECTED,
    add_command,
    add_session_argument,
    fail,
    non_negative_seconds,
)
from session_schedule.cli.history import overdue_lines
from session_schedule.cli.reading import fold_snapshot, with_store
from session_schedule.core.changes import CHANGE_EVENT_TYPE
from session_schedule.core.fold import ScheduleFold
from session_schedule.harness.transcript import transcript_check
from session_schedule.session import MESSAGE_ENTRY_TYPE, SessionSnapshot
from session_schedule.session.port import SessionStore
from session_schedule.session.quotas import QUOTAS_ENTRY_TYPE

DESCRIPTION: Final = (
    "Read and strictly decode every entry of a session, fold its schedule "
    "changes and check that every tool result in the transcript answers a call. Prints a "
    "one-line summary when the session is sound, counting its entries, messages, schedule "
    "changes, quotas entries (when there are any) and active reminders, with a warning for each "
    "tool call a stop or crash left without its result. Exit codes: 0 sound; 1 sound, but "
    "with --overdue some reminder is later than that; 3 no such session; 5 corrupt (the "
    "message names the entry and the field, or the stray tool result)."
)
EXAMPLE: Final = "session-schedule check s_7k2m4q9x3v5b"
_type_of: Final = attrgetter("type")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``check`` to the program's subcommands."""
    parser = add_command(commands, "check", run, description=DESCRIPTION, example=EXAMPLE)
    add_session_argument(parser)
    parser.add_argument(
        "--overdue",
        type=non_negative_seconds,
        metavar="SECONDS",
        help="a monitoring probe: also exit 1, naming them, when active reminders are more than "
        "SECONDS overdue (a sound log whose reminders nobody delivers)",
    )


def run(arguments: argparse.Namespace) -> int:
    inspection = with_store(arguments, lambda store: _inspect(store, arguments.session))
    snapshot = inspection.snapshot
    state = inspection.state
    header, entries = snapshot
    transcript = transcript_check(entries)
    if transcript.stray is not None:
        return fail(
            f"session {header.id} has a transcript no strict model endpoint accepts: "
            f"{transcript.stray.message}",
            EXIT_CORRUPT,
        )
    derived = inspection.derived
    if derived:
        kept = (
            "derived data that contradicts"
            if inspection.derived_in == "rows"
            else "derived files that contradict"
        )
        return fail(f"session {header.id} has {kept} its log: " + "; ".join(derived), EXIT_CORRUPT)
    types = list(map(_type_of, entries))
    messages = types.count(MESSAGE_ENTRY_TYPE)
    changes = types.count(CHANGE_EVENT_TYPE)
    quotas = types.count(QUOTAS_ENTRY_TYPE)
    counted = f"{_count(messages, 'message')}, {_count(changes, 'schedule change')}"
    if quotas:
        counted += f", {_count(quotas, 'quotas entry', 'quotas entries')}"
    parts = [
        (
            f"session {header.id} is sound: {_count(len(entries), 'entry', 'entries')} "
            f"({counted}), {_count(len(state), 'active reminder')}"
        )
    ]
    if header.parent_id is not None:
        parts.append(f"forked from {header.parent_id} at entry {header.seed_length}")
    if inspection.torn_lines == 1:
        parts.append(
            f"the file ends in {inspection.torn_bytes} bytes (1 line) written after the last "
            "barrier that does not verify (a torn tail: an append a crash cut short or lost), "
            "which is ignored and will be cut when the session is next opened"
        )
    elif inspection.torn_lines:
        # The tail starts at its first line that does not verify: a later line may verify on its
        # own, but no line after one that does not is kept (a power cut may have zero-filled or
        # dropped any page written after the last fsync and kept a later one; see
        # :mod:`session_schedule.session.lines`).
        parts.append(
            f"the file ends in {inspection.torn_bytes} bytes ({inspection.torn_lines} lines) "
            "written after the last barrier, the first of which does not verify (a torn tail: "
            "an append a crash cut short or lost, and those written after it), which are "
            "ignored and will be cut when the session is next opened"
        )
    elif inspection.torn_bytes:
        parts.append(
            "the file ends in an incomplete line (an append cut short), which is ignored and "
            "will be cut when the session is next opened"
        )
    parts.extend(
        f"warning: {interruption.message} (a call interrupted by a stop or a crash; the model "
        "is told it was interrupted, and resuming the session records that)"
        for interruption in transcript.interrupted
    )
    print("; ".join(parts))
    if arguments.overdue is not None:
        late = overdue_lines(state, reading.clock.now(), arguments.overdue)
        for line in late:
            print(line)
        if late:
            return EXIT_REJECTED
    return EXIT_OK


def _count(count: int, one: str, many: str | None = None) -> str:
    """``1 entry``, ``2 entries``."""
    return f"{count} {one if count == 1 else many or one + 's'}"


@final
class _Inspection(msgspec.Struct, frozen=True, kw_only=True):
    """What ``check`` reports on: the snapshot, its schedule state, and a file store's torn
    tail."""

    snapshot: SessionSnapshot
    state: ScheduleFold
    torn_bytes: int = 0
    torn_lines: int = 0
    derived: tuple[str, ...] = ()
    """What the store's derived files (checkpoints) say that the log contradicts."""
    derived_in: Literal["files", "rows"] = "files"
    """Where the store keeps them: files beside the log (JSONL), rows beside its rows (SQLite,
    PostgreSQL)."""


async def _inspect(store: SessionStore, session_id: str) -> _Inspection:
    """The session as storage holds it, and its changes folded (raises like
    :func:`fold_snapshot`); a store that keeps a file per session (JSONL) also says what a torn
    tail holds and whether its derived files agree with the log, and a database store (SQLite,
    PostgreSQL) whether its checkpoint does, each folding the log once."""
    checked_read = getattr(store, "checked_read", None)
    if checked_read is not None:
        read = await checked_read(session_id)
        return _Inspection(
            snapshot=read.snapshot, state=read.state, derived=read.problems, derived_in="rows"
        )
    inspect = getattr(store, "inspect", None)
    if inspect is None:
        snapshot = await store.read(session_id)
        return _Inspection(snapshot=snapshot, state=fold_snapshot(snapshot))
    found = await inspect(session_id)
    derived_check = getattr(store, "derived_check", None)
    if derived_check is None:
        state = fold_snapshot(found.snapshot)
        derived: tuple[str, ...] = ()
    else:
        state, derived = await derived_check(found.snapshot.header.id, read=found.snapshot)
    return _Inspection(
        snapshot=found.snapshot,
        state=state,
        torn_bytes=found.torn_bytes,
        torn_lines=found.torn_lines,
        derived=derived,
    )
