"""What the stores share in keeping their records: rows, their strict decoding, checkpoints.

The SQLite and PostgreSQL stores keep a session's entries as rows ``(position, type, data)``,
and every store binds its checkpoints to its own log (see
:mod:`session_schedule.session.checkpoint`). The shapes they share, once:

1. **Rows wait for their flush.** A handle keeps the rows of the entries appended since its last
   committed flush (:class:`PendingRows`): a flush takes those up to its target, and the ones a
   flush committed are dropped when the next starts (flushes never overlap, and the durable
   length only moves on success).
2. **Rows decode strictly, in order.** Rows of positions ``first, first+1, …`` are decoded by
   :class:`~session_schedule.session.codec.EntryDecoder` (:func:`decode_rows`); a missing
   position, or a type that is not UTF-8 text, is corruption at that position — reported after
   any bad entry before it. A range read of an open session's older entries must find every one
   (:func:`decode_range`): the log never shrinks under its owner.
3. **A checkpoint comes with its window's rows.** A database store opening a session from its
   checkpoint reads the log's rows from the first entry of the checkpoint's window
   (:func:`window_start`) on, and decodes them as a whole read would (:func:`decode_window`).
4. **A listing reads every header.** A header that does not decode is a problem listed beside
   the others (:func:`header_listing`): ``scan`` never stops at one.
5. **A checkpoint not used is logged, never raised** (:func:`report_rejected`): at ``info`` when
   it is of another version (an upgrade), at ``warning`` otherwise; the session then opens from
   its whole log.
6. **``check`` compares a database checkpoint with the whole log** (:func:`checked_read`).
   Rows carry no checksum of their own, and an open from a checkpoint reads only the rows from
   its window on: a row before the last one it covers, edited by hand, still decodes, so only
   a comparison of the checkpoint with the fold of every row tells that they disagree.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Generic, NamedTuple, TypeVar, final

from session_schedule.core.fold import ScheduleFold
from session_schedule.session import checkpoint
from session_schedule.session.codec import EntryDecoder, Source, check_seed_length, decode_header
from session_schedule.session.errors import SessionCorrupt
from session_schedule.session.port import (
    LogEntry,
    SessionHeader,
    SessionListing,
    SessionSnapshot,
    listing,
)

R = TypeVar("R")


@final
class PendingRows(Generic[R]):
    """The rows of a handle's entries from the first one no flush has committed yet."""

    __slots__ = ("_base", "_rows")

    def __init__(self, base: int) -> None:
        """``base``: the entries the session held when opened (all of them stored)."""
        self._rows: list[R] = []
        self._base = base

    def append(self, row: R) -> None:
        """The row of the next entry appended."""
        self._rows.append(row)

    def flushing(self, durable: int, target: int) -> list[R]:
        """The rows of entries ``durable … target-1``, for a flush; the rows before ``durable``,
        which earlier flushes committed, are dropped."""
        del self._rows[: durable - self._base]
        self._base = durable
        return self._rows[: target - durable]


def decode_rows(
    rows: Iterable[tuple[object, str | bytes, bytes]], first: int, source: Source
) -> list[LogEntry]:
    """Stored rows of positions ``first, first+1, …`` strictly decoded (a gap is corruption)."""
    decoder = EntryDecoder(source)
    for position, stored_type, data in rows:
        expected = first + len(decoder.entries)
        if position != expected:
            decoder.raise_earlier()  # a bad change before the gap is reported first
            raise source.corrupt(expected, f"the entry is missing (the next stored is {position})")
        if isinstance(stored_type, str):
            entry_type = stored_type
        else:
            try:
                entry_type = stored_type.decode()
            except UnicodeDecodeError as error:
                decoder.raise_earlier()
                raise source.corrupt(
                    expected, f"the entry type is not UTF-8 text ({error})"
                ) from None
        decoder.add(entry_type, data, expected)
    return decoder.finish()


def decode_range(
    rows: Iterable[tuple[object, str | bytes, bytes]], begin: int, end: int, source: Source
) -> list[LogEntry]:
    """Entries ``begin … end-1`` of an open session from their rows, every one of them there."""
    entries = decode_rows(rows, begin, source)
    if len(entries) != end - begin:
        raise source.corrupt(
            begin + len(entries), "the entry is missing (the log is shorter than when opened)"
        )
    return entries


def window_start(found: checkpoint.CheckpointFile) -> int:
    """The position of the first entry of the checkpoint's window (the rows read with it)."""
    return max(0, found.entries - checkpoint.WINDOW)


def decode_window(
    header: SessionHeader,
    rows: Iterable[tuple[object, str | bytes, bytes]],
    first: int,
    source: Source,
) -> list[LogEntry]:
    """The rows read with a checkpoint (from ``first``, its :func:`window_start`, to the log's
    end) decoded; with them the session must hold all the entries its header says it copied."""
    held = decode_rows(rows, first, source)
    check_seed_length(header, first + len(held), source)
    return held


def header_listing(stored: Iterable[tuple[Source, bytes]]) -> SessionListing:
    """The listing of the sessions whose stored headers are ``stored`` (each with its source)."""
    headers: list[SessionHeader] = []
    problems: list[SessionCorrupt] = []
    for source, header in stored:
        try:
            headers.append(decode_header(header, source))
        except SessionCorrupt as problem:
            problems.append(problem)
    return listing(headers, problems)


def report_rejected(log: logging.Logger, session_id: str, rejected: checkpoint.Rejected) -> None:
    """Log why a checkpoint was not used, to the store's own logger."""
    level = logging.INFO if rejected.reason == "version" else logging.WARNING
    log.log(level, "checkpoint of session %s not used (%s): %s", session_id, *rejected)


@final
class CheckedRead(NamedTuple):
    """A database session as ``check`` reads it: whole, with its checkpoint, in one
    transaction (see :func:`checked_read`)."""

    snapshot: SessionSnapshot
    state: ScheduleFold
    """The fold of the log's changes."""
    problems: tuple[str, ...]
    """What its checkpoint says that its log does not, one clause each; none: ``()``."""


def checked_read(
    header_bytes: bytes,
    rows: Sequence[tuple[object, str | bytes, bytes]],
    stored: bytes | None,
    source: Source,
    *,
    delete: str,
) -> CheckedRead:
    """The session whose stored header, rows (every one, in order) and checkpoint (``None``:
    none) were read together, strictly decoded (raising as a whole read does), its changes
    folded once (raising as :func:`~session_schedule.core.fold.fold` does), and what the
    checkpoint says that the rows do not — when it is bound to them as an open would believe
    it (entry ``n-1``'s digest), so that opening the session may use it instead of the rows.
    A checkpoint that would not be believed (damaged, of another version, not bound) is no
    problem: it is replaced. ``delete``: the statement that deletes the checkpoint, which the
    problem names."""
    header = decode_header(header_bytes, source)
    entries = decode_rows(rows, 0, source)
    check_seed_length(header, len(entries), source)
    found = None if stored is None else checkpoint.decode_checkpoint(stored, source)
    bound = None
    if isinstance(found, checkpoint.CheckpointFile) and 1 <= found.entries <= len(rows):
        _, stored_type, data = rows[found.entries - 1]
        entry_type = stored_type if isinstance(stored_type, str) else stored_type.decode()
        if checkpoint.row_digest(header_bytes, entry_type, data) == found.chain:
            bound = found
    state, difference = checkpoint.checked_fold(
        bound, entries, seed=header.seed_length, session=header.id
    )
    problems = (
        ()
        if difference is None
        else (
            (
                "its checkpoint (its row in the checkpoints table) is bound to its log but does "
                f"not say what the log says ({difference}); delete the checkpoint ({delete}; it "
                "is rebuilt from the log)"
            ),
        )
    )
    return CheckedRead(SessionSnapshot(header, tuple(entries)), state, problems)
