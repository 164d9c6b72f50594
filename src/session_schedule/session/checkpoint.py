"""Checkpoints: a derived, rebuildable snapshot of a session's fold, kept beside its log.

Folding a year-old log means decoding every entry. A checkpoint records, at one known position
``n`` of the log, what the entries ``0 … n-1`` amount to — the active records and the largest id
number used (the schedule fold), the ``turn/queued`` entries no ``turn/finished`` entry has
answered yet (the pending turns) — and the last :data:`WINDOW` entries before ``n`` (the recent
transcript, so a harness can resume without the rest). Opening a session with a usable
checkpoint strictly decodes only the entries from ``n`` on; an entry before ``n`` is decoded,
still strictly, only if someone reads it.

This module is the store-neutral part: the content, its encoding and validation, and the
bookkeeping (:class:`Progress`) that keeps a checkpoint's state up to date as entries are
appended. Each store binds a checkpoint to its own log (the JSONL store to the format-2 commit
record and chained checksum at ``n``; the database stores to the entry count and a digest of the
header and of entry ``n-1`` as stored, see :func:`row_digest`) and keeps it where it keeps
sessions.

The log stays the only authority. A checkpoint is used only when all of this holds, and is
otherwise ignored (the session opens from its whole log, as without one) and replaced when the
store next writes one:

- it is intact: its own CRC-32 matches its bytes, which decode strictly;
- it is of this version: the library version that wrote it, and a checkpoint format this library
  reads (:data:`READABLE`);
- it names the session being opened;
- it matches the log (the store's binding, above);
- its records are what a create writes (each is decoded by the strict change decoder) and make a
  possible fold state, and its pending turns and window entries decode strictly by their type's
  decoder.

Which of these failed is :class:`Rejected`'s ``reason``; the store logs it.

The JSONL store also verifies, on every open from a checkpoint, the log's own lines of the
window's entries: their chained checksums from the line before them up to the commit record the
checkpoint is bound to, and that they hold the very entries the window does (a few kilobytes
read back; about 0.2 ms). A bit flip there makes it ignore the checkpoint, and the whole-log read
that follows reports the damage with its line. Entries before the window are verified when they
are read (by the session, or by ``check``, ``read`` and ``inspect``, which never use
checkpoints; a JSONL fork copies them verbatim, see
:mod:`session_schedule.session.jsonl.creation`). Losing a checkpoint costs only time, so none is
written with ``fsync`` or in a barrier's transaction — except the checkpoint a JSONL fork is
created with, which is durable before the fork is.

Format 3 added ``segments`` (the JSONL store's index of where the log's segments start, see
:class:`SegmentStart`); a format-2 checkpoint is read as one without an index. The number changed
so that a library of format 2, whose decoder refuses unknown fields, says a newer checkpoint is of
another version (and ignores it) rather than calling it damaged.

Format 4 added ``statuses`` (the SPEC §11 status of each active record that has one: paused,
snoozed, runs made, resumed late — a record is stored as it stands, its ``scheduledAt`` its next
delivery) and ``runs`` (each active reminder's latest run and run count, what its view's ``runs``
and ``lastRun`` say), so that a session whose reminders are paused, snoozed or counting runs
still opens from a checkpoint, and a live Schedule reads its reminders' runs without the entries
before it. A format-2 or 3 checkpoint is read as one without statuses (none was written while a
record had one) and without runs: the history is then read from the log's first entry, and the
next checkpoint written records it.

Format 5 added ``provenance`` (which turn made or last changed each active reminder that a
recorded turn did, with its chain depth, and the pending turns a person's message was seen in;
see :mod:`session_schedule.session.provenance`) and ``quotas`` (the session's latest
``schedule/quotas`` entry, :mod:`session_schedule.session.quotas`), so that a chain of reminder
turns keeps its depth and a person's quotas hold when a session opens from a checkpoint. A
format-2, 3 or 4 checkpoint is read as one without them: provenance is then read from the log's
first entry (no quotas entry can precede it: no library that wrote one wrote that format).

Format 6 counts the runs of every active recurring record: one with no other status has a
``statuses`` entry holding only its runs (SPEC §11 counts ``max_runs`` against every dispatch
since the record was created, and an update may give a reminder its ``max_runs`` after it has
run). Earlier formats counted runs only for a record with ``ends``: a format-2 to 5 checkpoint
is used only when no active recurring record lacks a status (so none has runs it did not count);
otherwise the session opens from its log.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Final, Literal, NamedTuple, cast, final

import msgspec

from session_schedule.core.changes import (
    CHANGE_EVENT_TYPE,
    ScheduleCreateChange,
    create_change,
    decode_changes,
    encode_change,
)
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold, fold
from session_schedule.core.ids import ScheduleId
from session_schedule.core.records import NO_STATUS, RecordStatus, ScheduleRecord, is_recurring
from session_schedule.session.codec import Source, decode_payload, encode_payload
from session_schedule.session.crc import crc32
from session_schedule.session.errors import SessionCorrupt
from session_schedule.session.history import OccurrenceLog, OccurrenceRun
from session_schedule.session.port import LogEntry, ResumePoint, schedule_changes
from session_schedule.session.provenance import MadeBy, Provenance, ProvenanceLog
from session_schedule.session.quotas import QUOTAS_ENTRY_TYPE, QuotasEntry, decode_quotas
from session_schedule.session.turns import (
    TURN_FINISHED_TYPE,
    TURN_QUEUED_TYPE,
    TurnFinished,
)

CHECKPOINT_VERSION: Final = 6
READABLE: Final = frozenset({2, 3, 4, 5, CHECKPOINT_VERSION})
"""The checkpoint formats this library uses: format 5 is format 6 without the runs of recurring
records that have no other status, format 4 format 5 without ``provenance`` and ``quotas``,
format 3 format 4 without ``statuses`` and ``runs``, format 2 format 3 without ``segments``."""
_RUNS_SINCE: Final = 4
"""The first format that records ``runs``."""
_PROVENANCE_SINCE: Final = 5
"""The first format that records ``provenance`` and ``quotas``."""
_EVERY_RUN_SINCE: Final = 6
"""The first format that counts the runs of every recurring record."""
SUFFIX: Final = ".checkpoint"
WINDOW: Final = 64
"""How many entries before the checkpoint's position it holds, decoded on open."""
EVERY: Final = 1024
"""While a session is open, the stores write a checkpoint once this many entries have become
durable since the last one (and on close, when there is anything new)."""

RejectionReason = Literal["missing", "damaged", "version", "session", "log mismatch", "invalid"]


@final
class WindowEntry(msgspec.Struct, frozen=True, array_like=True, gc=False):
    type: str
    data: msgspec.Raw


@final
class PendingTurn(msgspec.Struct, frozen=True, array_like=True, gc=False):
    position: int
    data: msgspec.Raw
    """The canonical payload of its ``turn/queued`` entry."""


@final
class StatusEntry(
    msgspec.Struct, frozen=True, array_like=True, forbid_unknown_fields=True, gc=False
):
    """An active record's SPEC §11 status (see :class:`RecordStatus`)."""

    id: str
    paused: bool
    snoozed_from: str | None
    runs: int
    late_from: str | None


@final
class RunEntry(msgspec.Struct, frozen=True, array_like=True, forbid_unknown_fields=True, gc=False):
    """An active reminder's latest run, and how many it has had."""

    id: str
    count: int
    run: OccurrenceRun


@final
class ProvenanceEntry(
    msgspec.Struct, frozen=True, array_like=True, forbid_unknown_fields=True, gc=False
):
    """Which turn made or last changed an active reminder, and its chain depth."""

    id: str
    made_by: MadeBy
    occurrences: tuple[str, ...]
    depth: int


@final
class ProvenanceRecord(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"
):
    """The provenance a checkpoint records (format 5)."""

    made: list[ProvenanceEntry]
    """Each active reminder a recorded turn made or changed, in creation order."""
    person_turns: list[int]
    """The pending turns (by position) during which a person's message was recorded."""


@final
class SegmentStart(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """Where a segment of a JSONL log starts: after its first ``entries`` entries (the last of
    them with the chained checksum ``chain``), ``offset`` bytes and ``lines`` lines."""

    entries: int
    offset: int
    lines: int
    chain: int


@final
class CheckpointFile(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"
):
    """The checkpoint's content (JSON, after a line with its CRC-32 in hexadecimal)."""

    checkpoint: int
    """The checkpoint format (:data:`CHECKPOINT_VERSION`)."""
    library: str
    """The version of the library that wrote it."""
    session: str
    entries: int
    """``n``: how many leading entries of the log it covers."""
    offset: int
    """JSONL: how many leading bytes of the log file it covers (up to the end of a commit
    record). 0 in the database stores."""
    lines: int
    """JSONL: how many lines those bytes hold. 0 in the database stores."""
    chain: int
    """What binds it to entry ``n-1``: its chained checksum (JSONL), or :func:`row_digest` of
    the header and of its stored type and payload (the database stores); 0 when ``n`` is 0."""
    highest_id: int
    active: list[msgspec.Raw]
    """The active records, each as the canonical payload of the change that creates it."""
    pending: list[PendingTurn]
    """The pending turns: ``turn/queued`` entries from the fork point on, not yet finished."""
    window: list[WindowEntry]
    """Entries ``n - len(window) … n-1``: their type and canonical payload."""
    segments: list[SegmentStart] = msgspec.field(default_factory=list)
    """JSONL: where the segments of the covered bytes start, from the header's end to the
    checkpoint's own (``entries``, ``offset``, ``lines``, ``chain``), about a megabyte apart,
    so that reading an entry before the window reads one segment rather than every byte before
    it. Derived like the rest, and checked before use; empty when unknown (a format-2
    checkpoint, or a session that has not scanned its older bytes since it was opened from one
    without an index) and in the database stores."""
    statuses: list[StatusEntry] = msgspec.field(default_factory=list)
    """The SPEC §11 status of each active record that has one, in creation order (format 4)."""
    runs: list[RunEntry] | None = None
    """Each active reminder that has had a run: its latest run and run count, in creation
    order (format 4; ``None`` in older formats, which did not record them)."""
    provenance: ProvenanceRecord | None = None
    """Which turn made or last changed the active reminders (format 5; ``None`` in older
    formats, which did not record it)."""
    quotas: list[msgspec.Raw] = msgspec.field(default_factory=list)
    """The latest ``schedule/quotas`` payload, canonical, when the log holds one (format 5)."""


@final
class Binding(NamedTuple):
    """Where a checkpoint sits in its log (see :class:`CheckpointFile`)."""

    entries: int
    chain: int
    offset: int = 0
    lines: int = 0


@final
class Checkpoint(NamedTuple):
    """A checkpoint that matched its log, decoded."""

    entries: int
    offset: int
    lines: int
    chain: int
    state: ScheduleFold
    pending: list[LogEntry]
    window: list[LogEntry]
    runs: tuple[tuple[ScheduleId, OccurrenceRun, int], ...] | None = None
    provenance: tuple[tuple[ScheduleId, Provenance], ...] | None = None
    person_turns: tuple[int, ...] = ()
    quotas: QuotasEntry | None = None

    def resume_point(self) -> ResumePoint:
        """What the session's handle tells the schedule and the turn queue."""
        records = self.state.by_creation()
        statuses = self.state.statuses()
        return ResumePoint(
            self.entries,
            tuple(records),
            self.state.highest_id,
            tuple(self.pending),
            statuses=tuple(
                (record.id, statuses[record.id])
                for record in records
                if statuses.get(record.id, NO_STATUS) != NO_STATUS
            ),
            runs=self.runs,
            provenance=self.provenance,
            person_turns=self.person_turns,
            quotas=self.quotas,
        )


@final
class Rejected(NamedTuple):
    """Why a checkpoint was not used."""

    reason: RejectionReason
    detail: str


def library_version() -> str:
    """The version of this library (the package's ``__version__``, which its metadata is built
    from: reading the installed metadata would import the ``email`` package on every open)."""
    from session_schedule import __version__  # noqa: PLC0415 - the package imports this module

    return __version__


def row_digest(header: bytes, entry_type: str, data: bytes) -> int:
    """A database checkpoint's binding to entry ``n-1``: 64 bits of BLAKE2b over the session's
    stored header and that entry's stored type and payload."""
    digest = hashlib.blake2b(digest_size=8)
    for part in (header, entry_type.encode(), data):
        digest.update(b"%d:" % len(part))
        digest.update(part)
    return int.from_bytes(digest.digest(), "big")


@final
class Progress:
    """What a checkpoint at ``position`` records, kept up to date one entry at a time: the fold
    of the schedule changes, the active reminders' runs and the pending turns of entries
    ``0 … position-1``.

    Entries before ``seed`` (a fork's inherited ones) add their ids to the fold and nothing else
    (Rule 5), queue no pending turn and set no quotas. Resumed from a checkpoint that did not
    record the runs or the provenance (an older format), it starts again from the log's first
    entry.
    """

    __slots__ = ("_history", "_pending", "_provenance", "_seed", "position", "quotas")

    def __init__(self, *, session: str, seed: int, resume: ResumePoint | None = None) -> None:
        self._seed = seed
        if resume is None or resume.runs is None or resume.provenance is None:
            self._history = OccurrenceLog(seed_length=seed, session=session, keep=False)
            self._pending: dict[int, LogEntry] = {}
            self._provenance = ProvenanceLog(seed_length=seed)
            self.quotas: QuotasEntry | None = None
            self.position = 0
        else:
            self._history = OccurrenceLog.resumed(resume, seed_length=seed, session=session)
            self._pending = {entry.position: entry for entry in resume.pending}
            self._provenance = ProvenanceLog.resumed(resume, seed_length=seed)
            self.quotas = resume.quotas
            self.position = resume.position

    @property
    def state(self) -> ScheduleFold:
        return self._history.state

    @property
    def history(self) -> OccurrenceLog:
        """The active reminders' runs."""
        return self._history

    @property
    def provenance(self) -> ProvenanceLog:
        """Which turn made or last changed each reminder."""
        return self._provenance

    @property
    def pending(self) -> list[LogEntry]:
        """The pending ``turn/queued`` entries, in log order."""
        return list(self._pending.values())

    def add(self, entries: Iterable[LogEntry]) -> None:
        """Account for the entries that follow ``position``, in order.

        Raises ``ScheduleError`` (``corrupt_schedule_log``) for a change the fold rejects and
        ``ValueError`` for a ``turn/finished`` entry that names no pending turn; either leaves
        this progress unusable. The error is the one reading the entries one at a time meets
        first: the runs and the provenance are read a batch at a time, up to the entry at which
        the pending turns (read first) fail.
        """
        batch = entries if isinstance(entries, Sequence) else tuple(entries)
        seed, pending = self._seed, self._pending
        position = self.position
        failure: ValueError | None = None
        end = len(batch)
        for index, entry in enumerate(batch):
            if entry.position != position:
                failure = ValueError(f"entry {entry.position} follows entry {position - 1}")
                end = index
                break
            position += 1
            entry_type = entry.type
            if entry_type == CHANGE_EVENT_TYPE or entry.position < seed:
                continue
            if entry_type == QUOTAS_ENTRY_TYPE:
                self.quotas = cast("QuotasEntry", entry.payload)
            elif entry_type == TURN_QUEUED_TYPE:
                pending[entry.position] = entry
            elif entry_type == TURN_FINISHED_TYPE:
                finished = cast("TurnFinished", entry.payload)
                if pending.pop(finished.turn, None) is None:
                    failure = ValueError(
                        f"entry {entry.position} finishes entry {finished.turn}, which is not a "
                        "pending turn"
                    )
                    end = index + 1
                    break
        read = batch if end == len(batch) else batch[:end]
        self._history.feed(read)
        self._provenance.feed(read)
        self.position = position
        if failure is not None:
            raise failure


_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(CheckpointFile)


def draft(
    *,
    session: str,
    binding: Binding,
    progress: Progress,
    window: Sequence[LogEntry],
) -> CheckpointFile:
    """The content of a checkpoint at ``binding.entries`` (which must be ``progress.position``;
    ``window``: the entries just before it). Nothing in it refers to ``progress`` afterwards, so
    it may be sealed on another thread while the session goes on."""
    if progress.position != binding.entries:
        raise ValueError(
            f"a checkpoint at entry {binding.entries} cannot hold the state at {progress.position}"
        )
    state = progress.state
    records = state.by_creation()
    statuses = state.statuses()
    made, person_turns = progress.provenance.snapshot(record.id for record in records)
    return CheckpointFile(
        checkpoint=CHECKPOINT_VERSION,
        library=library_version(),
        session=session,
        entries=binding.entries,
        offset=binding.offset,
        lines=binding.lines,
        chain=binding.chain,
        highest_id=state.highest_id,
        active=[msgspec.Raw(encode_change(create_change(r))) for r in records],
        pending=[
            PendingTurn(entry.position, msgspec.Raw(_payload(entry))) for entry in progress.pending
        ],
        window=window_of(window),
        statuses=[
            StatusEntry(
                record.id, status.paused, status.snoozed_from, status.runs, status.late_from
            )
            for record in records
            if (status := statuses.get(record.id, NO_STATUS)) != NO_STATUS
        ],
        runs=[
            RunEntry(schedule_id, count, run)
            for schedule_id, run, count in progress.history.summary()
        ],
        provenance=ProvenanceRecord(
            made=[
                ProvenanceEntry(schedule_id, found.made_by, found.occurrences, found.depth)
                for schedule_id, found in made
            ],
            person_turns=list(person_turns),
        ),
        quotas=[]
        if progress.quotas is None
        else [msgspec.Raw(encode_payload(QUOTAS_ENTRY_TYPE, progress.quotas)[1])],
    )


def window_of(entries: Sequence[LogEntry]) -> list[WindowEntry]:
    """A checkpoint's window holding ``entries`` (each as its type and canonical payload)."""
    return [WindowEntry(entry.type, msgspec.Raw(_payload(entry))) for entry in entries]


def seal(content: CheckpointFile, *, chain: int | None = None) -> bytes:
    """The bytes of a checkpoint: ``content`` (bound to ``chain`` when given) after its CRC-32."""
    if chain is not None:
        content = msgspec.structs.replace(content, chain=chain)
    body = _ENCODER.encode(content)
    return b"%08x\n" % crc32(body) + body


def encode_checkpoint(
    *,
    session: str,
    binding: Binding,
    progress: Progress,
    window: Sequence[LogEntry],
) -> bytes:
    """The bytes of a checkpoint at ``binding.entries`` (see :func:`draft`)."""
    return seal(draft(session=session, binding=binding, progress=progress, window=window))


def _payload(entry: LogEntry) -> bytes:
    return encode_payload(entry.type, entry.payload)[1]


def decode_checkpoint(data: bytes, source: Source) -> CheckpointFile | Rejected:
    """The checkpoint in ``data`` if it is intact, of this version and of ``source``'s session."""
    seal, _, body = data.partition(b"\n")
    if len(seal) != 8 or seal.strip(b"0123456789abcdef") or int(seal, 16) != crc32(body):
        return Rejected("damaged", "it does not match its checksum")
    try:
        found = _DECODER.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as error:
        # A checkpoint of another format may have other fields: say so rather than "damaged".
        version = _format_of(body)
        if version is not None and version not in READABLE:
            return Rejected(
                "version",
                f"it is of checkpoint format {version}; this is format {CHECKPOINT_VERSION}",
            )
        return Rejected("damaged", f"it does not decode: {error}")
    if found.checkpoint not in READABLE or found.library != library_version():
        return Rejected(
            "version",
            f"it is of checkpoint format {found.checkpoint}, library {found.library}; this is "
            f"format {CHECKPOINT_VERSION}, library {library_version()}",
        )
    if found.session != source.session_id:
        return Rejected("session", f"it names session {found.session}")
    if (
        not 0 <= len(found.window) <= found.entries
        or found.entries < 0
        or found.offset < 0
        or any(not 0 <= turn.position < found.entries for turn in found.pending)
    ):
        return Rejected("invalid", "its counts are impossible")
    if (
        (found.checkpoint >= _RUNS_SINCE) != (found.runs is not None)
        or (found.checkpoint < _RUNS_SINCE and found.statuses)
        or (found.checkpoint >= _PROVENANCE_SINCE) != (found.provenance is not None)
        or (found.checkpoint < _PROVENANCE_SINCE and found.quotas)
        or len(found.quotas) > 1
    ):
        return Rejected("invalid", "its fields are not those of its format")
    return found


class _Format(msgspec.Struct):
    checkpoint: int


def _format_of(body: bytes) -> int | None:
    try:
        return msgspec.json.decode(body, type=_Format).checkpoint
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None


def restore_bound(found: CheckpointFile, source: Source, *, bound: bool) -> Checkpoint | Rejected:
    """:func:`restore` for a checkpoint whose binding to a database log was checked: ``bound``
    says whether the log holds entry ``entries - 1`` with the digest the checkpoint names."""
    if not bound:
        return Rejected(
            "log mismatch",
            f"the log has no entry {found.entries - 1} with the digest it was bound to",
        )
    return restore(found, source)


def restore(found: CheckpointFile, source: Source) -> Checkpoint | Rejected:
    """The fold state, pending turns and window ``found`` describes, strictly decoded."""
    try:
        changes = decode_changes([bytes(raw) for raw in found.active])
        records: list[ScheduleRecord] = []
        for change in changes:
            if not isinstance(change, ScheduleCreateChange):
                return Rejected("invalid", "an active record is not a create")
            records.append(change.schedule)
        state = ScheduleFold.resumed(
            records,
            highest_id=found.highest_id,
            session=source.session_id,
            statuses=[
                (
                    ScheduleId(entry.id),
                    RecordStatus(
                        paused=entry.paused,
                        snoozed_from=entry.snoozed_from,
                        runs=entry.runs,
                        late_from=entry.late_from,
                    ),
                )
                for entry in found.statuses
            ],
        )
        if found.checkpoint < _EVERY_RUN_SINCE:
            uncounted = _uncounted(state)
            if uncounted is not None:
                return Rejected(
                    "version",
                    f"it is of checkpoint format {found.checkpoint}, which does not count the "
                    f"runs of {uncounted}",
                )
        runs = None if found.runs is None else _runs(found, state)
        if isinstance(runs, str):
            return Rejected("invalid", runs)
        provenance = None if found.provenance is None else _provenance(found.provenance, state)
        if isinstance(provenance, str):
            return Rejected("invalid", provenance)
        quotas = decode_quotas(bytes(found.quotas[0])) if found.quotas else None
        pending = [
            decode_payload(TURN_QUEUED_TYPE, bytes(turn.data), turn.position, source)
            for turn in found.pending
        ]
        first = found.entries - len(found.window)
        window = [
            decode_payload(entry.type, bytes(entry.data), first + index, source)
            for index, entry in enumerate(found.window)
        ]
    except (ScheduleError, SessionCorrupt, ValueError) as error:
        return Rejected("invalid", str(error))
    positions = [entry.position for entry in pending]
    if positions != sorted(set(positions)):
        return Rejected("invalid", "its pending turns are not in log order")
    person_turns = () if found.provenance is None else tuple(found.provenance.person_turns)
    if not set(person_turns) <= set(positions):
        return Rejected("invalid", "it names a person's turn that is not pending")
    return Checkpoint(
        found.entries,
        found.offset,
        found.lines,
        found.chain,
        state,
        pending,
        window,
        runs,
        provenance,
        person_turns,
        quotas,
    )


def _uncounted(state: ScheduleFold) -> ScheduleId | None:
    """An active recurring record of ``state`` that has no status: one whose runs a checkpoint
    before format 6 did not count (``None`` when there is none)."""
    statuses = state.statuses()
    for record in state.by_creation():
        if is_recurring(record) and record.id not in statuses:
            return record.id
    return None


def _provenance(
    found: ProvenanceRecord, state: ScheduleFold
) -> tuple[tuple[ScheduleId, Provenance], ...] | str:
    """The provenance ``found`` records, or why it is impossible."""
    made: list[tuple[ScheduleId, Provenance]] = []
    for entry in found.made:
        schedule_id = ScheduleId(entry.id)
        if schedule_id not in state:
            return f"it records the provenance of {entry.id}, which is not active"
        if entry.depth < 0 or (entry.made_by == "reminder") != bool(entry.occurrences):
            return f"its provenance of {entry.id} is impossible"
        made.append(
            (
                schedule_id,
                Provenance(made_by=entry.made_by, occurrences=entry.occurrences, depth=entry.depth),
            )
        )
    if len({schedule_id for schedule_id, _ in made}) != len(made):
        return "it records the provenance of a reminder twice"
    return tuple(made)


def _runs(
    found: CheckpointFile, state: ScheduleFold
) -> tuple[tuple[ScheduleId, OccurrenceRun, int], ...] | str:
    """The runs ``found`` records, or why they are impossible."""
    runs: list[tuple[ScheduleId, OccurrenceRun, int]] = []
    for entry in found.runs or ():
        schedule_id, run = ScheduleId(entry.id), entry.run
        if schedule_id not in state or run.schedule_id != schedule_id:
            return f"it records runs of {entry.id}, which is not active"
        if (
            entry.count < 1
            or not 0 <= run.position < found.entries
            or (run.turn is not None and not 0 <= run.turn < found.entries)
            or run.outcome not in ("delivered", "failed", "pending", "missed")
        ):
            return f"its runs of {entry.id} are impossible"
        runs.append((schedule_id, run, entry.count))
    if len({schedule_id for schedule_id, _, _ in runs}) != len(runs):
        return "it records the runs of a reminder twice"
    return tuple(runs)


def progress_of(
    entries: Sequence[LogEntry], resume: ResumePoint | None, *, end: int, seed: int, session: str
) -> Progress:
    """The progress of ``entries[:end]``, from ``resume`` if the session was opened from a
    checkpoint (then only the entries from its position on are read)."""
    progress = Progress(session=session, seed=seed, resume=resume)
    progress.add(entries[progress.position : end])
    return progress


def mismatch(
    found: CheckpointFile, entries: Sequence[LogEntry], *, seed: int, session: str
) -> str | None:
    """How the checkpoint ``found`` differs from what the log's first ``found.entries`` entries
    amount to — its reminders, its pending turns, its window of entries — or ``None`` when it
    says exactly what they say (``seed``: the session's inherited entries). Its binding to the
    log is not looked at here: the store checks that."""
    return _covered(found, entries, seed=seed, session=session)[1]


def checked_fold(
    found: CheckpointFile | None, entries: Sequence[LogEntry], *, seed: int, session: str
) -> tuple[ScheduleFold, str | None]:
    """The fold of the schedule changes of all ``entries`` (as
    :func:`~session_schedule.core.fold.fold` with ``seed_length=seed`` makes it, and raising as
    it does) and :func:`mismatch` of ``found`` (``None`` when there is no checkpoint to compare),
    folding the entries once: the fold of the first ``found.entries`` entries that the
    comparison builds goes on over the rest.

    When the comparison has no fold to go on from (the checkpoint's counts are impossible, or
    the covered entries do not fold), the entries are folded from the first, so that the fold
    and its error are exactly :func:`fold`'s."""
    if found is None:
        return _fold(entries, seed=seed, session=session), None
    progress, difference = _covered(found, entries, seed=seed, session=session)
    if progress is None:
        return _fold(entries, seed=seed, session=session), difference
    state = progress.state
    # The same rules as fold's, on the same state: a change of the rest that breaks one raises
    # what folding the whole log raises.
    state.replay(schedule_changes(entries[found.entries :]), seed_length=seed)
    return state, difference


def _fold(entries: Sequence[LogEntry], *, seed: int, session: str) -> ScheduleFold:
    return fold(schedule_changes(entries), seed_length=seed, session=session)


def _covered(
    found: CheckpointFile, entries: Sequence[LogEntry], *, seed: int, session: str
) -> tuple[Progress | None, str | None]:
    """The progress of the log's first ``found.entries`` entries (``None`` when the counts are
    impossible or the entries do not fold) and :func:`mismatch` of ``found``."""
    if found.entries > len(entries):
        return None, f"it covers {found.entries} entries, and the log holds {len(entries)}"
    if len(found.window) > found.entries:
        return None, "its counts are impossible"
    try:
        progress = progress_of(entries, None, end=found.entries, seed=seed, session=session)
    except (ScheduleError, ValueError) as error:
        return None, f"the log's first {found.entries} entries do not fold ({error})"
    first = found.entries - len(found.window)
    expected = draft(
        session=session,
        binding=Binding(found.entries, found.chain, found.offset, found.lines),
        progress=progress,
        window=entries[first : found.entries],
    )
    differences = []
    if found.highest_id != expected.highest_id:
        differences.append(f"its highest id is {found.highest_id}, the log's {expected.highest_id}")
    if [bytes(raw) for raw in found.active] != [bytes(raw) for raw in expected.active] or (
        found.statuses != expected.statuses
    ):
        differences.append("its active reminders are not the log's")
    if found.runs is not None and found.runs != expected.runs:
        differences.append("its reminders' runs are not the log's")
    if found.provenance is not None and found.provenance != expected.provenance:
        differences.append("its reminders' provenance is not the log's")
    if [bytes(raw) for raw in found.quotas] != [bytes(raw) for raw in expected.quotas]:
        differences.append("its quotas are not the log's")
    if _pending_bytes(found.pending) != _pending_bytes(expected.pending):
        differences.append("its pending turns are not the log's")
    if _window_bytes(found.window) != _window_bytes(expected.window):
        differences.append(
            f"its copies of entries {first} to {found.entries - 1} are not the log's"
        )
    return progress, "; ".join(differences) or None


def _pending_bytes(pending: Sequence[PendingTurn]) -> list[tuple[int, bytes]]:
    return [(turn.position, bytes(turn.data)) for turn in pending]


def _window_bytes(window: Sequence[WindowEntry]) -> list[tuple[str, bytes]]:
    return [(entry.type, bytes(entry.data)) for entry in window]
