"""What the database stores share in forking a session with its checkpoint.

The SQLite and PostgreSQL stores fork the same way (see their modules): they read the parent in
one transaction — from its checkpoint, verified as an open verifies it, when it matches the log,
else its whole log — and decide here what the fork inherits (:func:`plan`); then, in one write
transaction, they copy the parent's first rows in SQL, check that the rows copied are the ones
read (:attr:`Plan.digest`, and as many as the plan says), and store the fork's checkpoint
(:meth:`Plan.content`) with them. A fork keeps its parent's history and none of its active
reminders (SPEC §4): its fold of the inherited entries holds only the highest id they use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, final

from session_schedule.session import checkpoint
from session_schedule.session.port import LogEntry, ResumePoint


class ParentChangedError(Exception):
    """The parent's rows copied for a fork are not the ones its plan read: a gap before the
    rows its checkpoint vouches for (the copy's row count shows it), or rows edited since. The
    store writes nothing and reads the parent again, whole, so that damage is reported as a
    read reports it."""


@final
class Plan(NamedTuple):
    """What a fork of ``length`` entries inherits."""

    length: int
    progress: checkpoint.Progress
    """The fork's fold of its inherited entries (their ids only, Rule 5)."""
    window: list[LogEntry]
    """The last of those entries (up to :data:`~.checkpoint.WINDOW`): what its handle holds."""
    digest: int | None
    """:func:`~.checkpoint.row_digest` of the parent's header and entry ``length - 1`` as read
    (``None`` when ``length`` is 0)."""

    @property
    def start(self) -> int:
        """The position of the first entry the fork's handle holds."""
        return self.length - len(self.window)

    @property
    def resume(self) -> ResumePoint:
        """What the fork resumes from, as a reopen restores it from its checkpoint: the
        inherited ids, nothing active, nothing pending."""
        return ResumePoint(self.length, (), self.progress.state.highest_id, runs=(), provenance=())

    def content(self, session_id: str) -> checkpoint.CheckpointFile:
        """The fork's checkpoint (its window read from the rows on open, as the database
        stores' are), not yet bound to its rows."""
        return checkpoint.draft(
            session=session_id,
            binding=checkpoint.Binding(self.length, 0),
            progress=self.progress,
            window=(),
        )


def plan(
    parent: str,
    length: int,
    *,
    base: int,
    highest_id: int,
    after: Sequence[LogEntry],
    window: Sequence[LogEntry],
    digest: int | None,
) -> Plan:
    """The fork of ``parent``'s first ``length`` entries: those before ``base`` are covered by
    the parent's checkpoint (whose fold's highest id is ``highest_id``; ``base`` 0 when none is
    used), ``after`` are the entries ``base … length-1``, decoded, and ``window`` the last
    entries before ``length``."""
    progress = checkpoint.Progress(
        session=parent,
        seed=length,
        resume=ResumePoint(base, (), highest_id, runs=(), provenance=()),
    )
    progress.add(after)
    return Plan(length, progress, list(window), digest)


def from_checkpoint(
    parent: str,
    length: int,
    verified: tuple[checkpoint.CheckpointFile, checkpoint.Checkpoint, int, list[LogEntry]],
    digest: int | None,
) -> Plan | None:
    """The fork of ``length`` entries, at or after the parent's checkpoint ``verified`` (its
    content, restored state, the position of the first row read with it and the entries from
    there to the log's end); ``None`` when the fork point lies before the checkpoint."""
    found, restored, first, held = verified
    if length < found.entries:
        return None
    return plan(
        parent,
        length,
        base=found.entries,
        highest_id=restored.state.highest_id,
        after=held[found.entries - first : length - first],
        window=held[max(0, length - checkpoint.WINDOW) - first : length - first],
        digest=digest,
    )


def from_entries(parent: str, entries: Sequence[LogEntry], digest: int | None) -> Plan:
    """The fork of the parent's first ``len(entries)`` entries, all of them decoded."""
    return plan(
        parent,
        len(entries),
        base=0,
        highest_id=0,
        after=entries,
        window=entries[-checkpoint.WINDOW :],
        digest=digest,
    )
