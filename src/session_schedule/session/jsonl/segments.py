"""The entries before a checkpoint, read back from the log a segment at a time.

Once a checkpoint is stored, the entries before its window leave memory; a read of one of them
goes back to the log. The rules:

1. **An index of segment starts.** :class:`Prefix` keeps where the log's segments start (each a
   :class:`~session_schedule.session.lines.TailStart`: entries, offset, lines and chained
   checksum), always complete from the header's end to the newest checkpoint's commit record,
   the starts about :data:`SEGMENT` bytes apart (:func:`thinned`).
2. **A read costs a segment, not the log.** Reading entry ``n`` scans only the segment that holds
   it, strictly, and checks that it ends where the next one starts (same entry count, same
   checksum); only the last segment read is kept decoded, and entries are handed out
   :data:`CHUNK` at a time.
3. **The index travels with the checkpoint.** A checkpoint stores the index up to its own end
   (:func:`segments_of`); a session opened from it starts from that index when it is
   well-formed (:func:`stored_index`).
4. **Never trusted over the log.** A stored segment that does not verify drops the stored index
   for one segment of everything covered, scanned anew; whatever does not verify then is
   corruption, reported with the error of a whole read of those bytes (:func:`read_prefix`).
"""

from __future__ import annotations

import bisect
import itertools
import logging
from collections.abc import Sequence
from typing import Final, NoReturn, final

import msgspec

from session_schedule.core.errors import ScheduleError
from session_schedule.session import checkpoint
from session_schedule.session.codec import Source
from session_schedule.session.descriptors import CachedDescriptor
from session_schedule.session.errors import SessionCorrupt
from session_schedule.session.jsonl import files
from session_schedule.session.lines import Scan, TailStart, scan, scan_tail
from session_schedule.session.port import LogEntry, SessionHeader

# The package's one logger: its records keep the name they have always had.
_log: Final = logging.getLogger("session_schedule.session.jsonl")

CHUNK: Final = 1024
"""How many entries before a checkpoint's window are handed out per read."""
SEGMENT: Final = 1 << 20
"""Bytes of the log before a checkpoint scanned at once."""


@final
class Prefix:
    """The entries before a checkpoint, read from the log a segment at a time.

    It covers the bytes up to the newest checkpoint's commit record (none, for a session that
    has none yet) and keeps an index of where their segments start (:class:`TailStart`: entries,
    offset, lines and chained checksum), always complete from the header's end to the covered
    end. A read of entry ``n`` scans only the segment that holds it, strictly, and checks that it
    ends where the next one starts (same entry count, same checksum): it costs O(segment), not
    O(log), and only the last segment read is kept. A segment of more than :data:`SEGMENT`
    bytes (and more than one line) is first split, by one strict scan of it in pieces of about
    that size, chain-checked from its start to its end, keeping only where each piece starts.

    Where the starts come from, none of them by scanning on the write path:

    - the header's end, then each checkpoint's commit record as it is stored (:meth:`cover`),
      thinned so that starts are about a segment apart (:func:`thinned`); a checkpoint stores
      the index up to its own end (``segments``);
    - a session opened from a checkpoint starts from the index it stores, when that is
      well-formed (:func:`stored_index`), and otherwise from one segment, the header's end to
      the checkpoint's, which the first read splits (a scan of every covered byte, once).

    A stored index is derived data, never trusted over the log: when one of its segments does
    not verify, it is dropped for the one-segment index and the read scans the covered bytes
    anew. Whatever does not verify then (or with an index this handle built) is corruption,
    reported with the error of a whole read of those bytes (:func:`read_prefix`).

    On a 2-core machine, one model request at the harness's default budget on a freshly opened
    session of 100,000 entries (17 MB), which reaches before the checkpoint's window: 25 to 27 ms
    with the stored index (one or two segments read), against 572 to 639 ms when the first read
    scanned every byte before the checkpoint (``bench recent_context``).
    """

    __slots__ = ("_cached", "_file", "_header", "_source", "_starts", "_stored")

    def __init__(
        self,
        file: CachedDescriptor,
        header: SessionHeader,
        starts: list[TailStart],
        source: Source,
        *,
        stored: bool = False,
    ) -> None:
        """``starts``: the index, from the header's end (alone: nothing is covered yet) to the
        covered end; ``stored``: it was read from a checkpoint, not built by this handle."""
        self._file = file
        # A segment of a fork may end before its seedLength: the whole read checks that.
        self._header = msgspec.structs.replace(header, seed_length=0)
        self._starts = starts
        self._stored = stored
        self._source = source
        self._cached: tuple[TailStart, TailStart, list[LogEntry]] | None = None

    @property
    def starts(self) -> list[TailStart]:
        """A copy of the index (for a checkpoint's ``segments``)."""
        return list(self._starts)

    def cover(self, end: TailStart) -> None:
        """Cover the bytes up to ``end``, a later checkpoint's commit record."""
        starts = thinned(self._starts, end)
        if starts is not None:
            self._starts = starts

    def read(self, begin: int, end: int) -> list[LogEntry]:
        """Entries ``begin … end-1`` (``end`` at most the checkpoint's position)."""
        found: list[LogEntry] = []
        while begin + len(found) < end:
            at = begin + len(found)
            start, entries = self._holding(at)
            found.extend(entries[at - start.entries : end - start.entries])
        return found

    def line_of(self, position: int) -> bytes:
        """The line of entry ``position`` (before the checkpoint) as the log holds it, without
        its newline, from the segment that holds it, verified as :meth:`read` verifies it.

        Lines are not kept: this scans that segment again. It serves the rare line after a
        checkpoint that claims to be an earlier entry (a verbatim copy is corruption), not the
        reading of entries."""
        start, _ = self._holding(position)
        stop = self._starts[self._find(position) + 1]
        try:
            parsed = self._scan(start, self._pread(stop.offset - start.offset, start.offset))
        except _MismatchError:
            self._fail()
        return parsed.lines[position - start.entries]

    def _holding(self, position: int) -> tuple[TailStart, list[LogEntry]]:
        """The segment that holds entry ``position``: where it starts, and its entries."""
        try:
            return self._segment(position)
        except _MismatchError as mismatch:
            if not self._stored:
                self._fail()
            _log.warning(
                "segment index in the checkpoint of session %s not used: %s; scanning the log "
                "before the checkpoint instead",
                self._source.session_id,
                mismatch,
            )
        self._stored = False
        self._cached = None
        self._starts = [self._starts[0], self._covered()]
        try:
            return self._segment(position)
        except _MismatchError:
            self._fail()

    def _segment(self, position: int) -> tuple[TailStart, list[LogEntry]]:
        index = self._find(position)
        start, stop = self._starts[index], self._starts[index + 1]
        # A segment is known by both ends: a later checkpoint may have moved the last one's end.
        if self._cached is not None and self._cached[:2] == (start, stop):
            return self._cached[0], self._cached[2]
        if stop.offset - start.offset > SEGMENT and stop.lines - start.lines > 1:
            pieces = self._split(start, stop)
            self._starts[index + 1 : index + 1] = pieces
            index = self._find(position)
            start, stop = self._starts[index], self._starts[index + 1]
        parsed = self._scan(start, self._pread(stop.offset - start.offset, start.offset))
        self._check_ends(start, stop, parsed)
        self._cached = (start, stop, parsed.entries)
        return start, parsed.entries

    def _find(self, position: int) -> int:
        if len(self._starts) < 2 or position >= self._starts[-1].entries:
            raise ValueError(f"entry {position} is not before the checkpoint")
        return bisect.bisect_right([start.entries for start in self._starts], position) - 1

    def _split(self, start: TailStart, stop: TailStart) -> list[TailStart]:
        """Where the pieces of the segment ``start … stop`` start, after its own start: one
        strict scan of it, about :data:`SEGMENT` bytes at a time (a line longer than that is a
        piece of its own)."""
        pieces: list[TailStart] = []
        at = start
        while at.offset < stop.offset:
            size = min(SEGMENT, stop.offset - at.offset)
            data = self._pread(size, at.offset)
            cut = data.rfind(b"\n") + 1
            while not cut and at.offset + len(data) < stop.offset:
                size = min(2 * size, stop.offset - at.offset)
                data = self._pread(size, at.offset)
                cut = data.find(b"\n") + 1
            if not cut:
                raise _MismatchError(f"no line ends between bytes {at.offset} and {stop.offset}")
            parsed = self._scan(at, data[:cut])
            at = TailStart(
                at.entries + len(parsed.entries),
                at.offset + cut,
                parsed.kept_lines,
                parsed.checksums[-1] if parsed.checksums else at.chain,
            )
            # A piece of commit records alone joins the one before (entries stay increasing).
            if at.entries > (pieces[-1] if pieces else start).entries:
                pieces.append(at)
            elif pieces:
                pieces[-1] = at
        if not pieces or (pieces[-1].entries, pieces[-1].chain) != (stop.entries, stop.chain):
            raise _MismatchError(
                f"the bytes up to offset {stop.offset} do not end with entry {stop.entries - 1} "
                f"and checksum {stop.chain:08x}"
            )
        if self._stored and pieces[-1].lines != stop.lines:
            raise _MismatchError(f"the bytes up to offset {stop.offset} are not {stop.lines} lines")
        pieces.pop()
        return pieces

    def _check_ends(self, start: TailStart, stop: TailStart, parsed: Scan) -> None:
        """A segment's entries and chain end where the next one starts (and its lines too, in a
        stored index: a split relies on them)."""
        last = parsed.checksums[-1] if parsed.checksums else start.chain
        if (
            start.entries + len(parsed.entries) != stop.entries
            or last != stop.chain
            or (self._stored and parsed.kept_lines != stop.lines)
        ):
            raise _MismatchError(
                f"the segment from offset {start.offset} does not end as the next one starts "
                f"(entry {stop.entries}, checksum {stop.chain:08x})"
            )

    def _scan(self, start: TailStart, data: bytes) -> Scan:
        try:
            parsed = scan_tail(self._header, data, self._source, after=start)
        except (SessionCorrupt, ScheduleError) as error:
            raise _MismatchError(
                f"the segment from offset {start.offset} does not verify"
            ) from error
        if parsed.keep != start.offset + len(data):
            raise _MismatchError(f"the segment from offset {start.offset} does not verify")
        return parsed

    def _pread(self, size: int, offset: int) -> bytes:
        with self._file.use() as fd:
            return files.pread_all(fd, size, offset)

    def _covered(self) -> TailStart:
        if len(self._starts) < 2:
            raise ValueError("no checkpoint covers any entry of this session yet")
        return self._starts[-1]

    def _fail(self) -> NoReturn:
        """Raise what a whole read of the covered bytes finds wrong."""
        end = self._covered()
        with self._file.use() as fd:
            read_prefix(fd, end.offset, self._source, end.entries)
        raise self._source.corrupt(
            None,
            f"the first {end.offset} bytes no longer hold the {end.entries} acknowledged "
            "entries the checkpoint was bound to",
        )


class _MismatchError(Exception):
    """A segment that does not verify against the index (an index read from a checkpoint is
    then dropped; otherwise the log is corrupt)."""


def thinned(starts: Sequence[TailStart], end: TailStart) -> list[TailStart] | None:
    """The index ``starts`` (complete up to its last start) extended to ``end``, a later commit
    record: ``end`` replaces the last start when the segment before it would still be at most
    :data:`SEGMENT` bytes, so that starts stay about a segment apart and the index always ends
    at the newest checkpoint. ``None`` when ``end`` is not past the last start."""
    last = starts[-1]
    if end.entries <= last.entries or end.offset <= last.offset:
        return None
    if len(starts) > 1 and end.offset - starts[-2].offset <= SEGMENT:
        return [*starts[:-1], end]
    return [*starts, end]


def segments_of(
    starts: Sequence[TailStart] | None, end: TailStart
) -> list[checkpoint.SegmentStart]:
    """A checkpoint's ``segments``, for one bound to ``end``: the index extended to it."""
    index = None if starts is None else thinned(starts, end)
    return [] if index is None else [checkpoint.SegmentStart(*start) for start in index]


def stored_index(
    segments: Sequence[checkpoint.SegmentStart], head: TailStart, bound: TailStart
) -> list[TailStart] | str:
    """The index a checkpoint bound to ``bound`` stores, when it is well-formed: it starts at
    ``head`` (the header's end), its entries, offsets and lines strictly increase, and it ends
    at ``bound``. Otherwise why not (it is then ignored, not the checkpoint)."""
    starts = [TailStart(s.entries, s.offset, s.lines, s.chain) for s in segments]
    if not starts:
        return "it holds none"
    if starts[0] != head:
        return "it does not start at the end of the header"
    if starts[-1] != bound:
        return "it does not end at the checkpoint's commit record"
    for before, after in itertools.pairwise(starts):
        if not (
            before.entries < after.entries
            and before.offset < after.offset
            and before.lines < after.lines
            and 0 <= after.chain <= _CHAIN_MAX
        ):
            return f"its start at offset {after.offset} does not follow the one before"
    return starts


_CHAIN_MAX: Final = 0xFFFF_FFFF


def read_prefix(fd: int, size: int, source: Source, count: int) -> Scan:
    """The first ``size`` bytes of a session file, which a checkpoint said hold ``count``
    entries followed by the commit record for them: anything else is corruption."""
    parsed = scan(files.pread_all(fd, size, 0), source)
    if len(parsed.entries) != count or parsed.keep != size or parsed.acknowledged < count:
        raise source.corrupt(
            None,
            f"the first {size} bytes no longer hold the {count} acknowledged entries the "
            "checkpoint was bound to",
        )
    return parsed
