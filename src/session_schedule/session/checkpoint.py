"""Checkpoints: a derived, rebuildable snapshot of a session's schedule fold, kept beside its log.

Folding a year-old log means decoding every entry. A checkpoint records, at one known position
``n`` of the log, what the fold of entries ``0 … n-1`` is (the active records and the largest id
number used) and the last :data:`WINDOW` entries before ``n`` (the recent transcript, so a harness
can resume without the rest). Opening a session with a usable checkpoint strictly decodes only
the entries from ``n`` on; everything before ``n`` is decoded, still strictly, only if someone
reads it.

The log stays the only authority. A checkpoint is used only when all of this holds, and is
otherwise ignored (the session opens from its whole log, as without one) and replaced when the
session is next closed:

- it is intact: its own CRC-32 matches its bytes, which decode strictly;
- it is of this version: the checkpoint format and the library version that wrote it;
- it names the session being opened;
- it matches the log: the file has at least the ``offset`` bytes it covers, and the line that
  ends there is the log's own commit record acknowledging exactly ``n`` entries with the chained
  checksum the checkpoint was bound to — which covers every entry before ``n`` (see
  :mod:`session_schedule.session.lines`);
- its records are what a create writes (each is decoded by the strict change decoder) and make a
  possible fold state, and its window entries decode strictly by their type's decoder.

Which of these failed is :class:`Rejected`'s ``reason``; it is logged. A checkpoint is written
without ``fsync``, to a temporary file renamed into place: losing one costs only time.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Sequence
from typing import Final, Literal, NamedTuple, final

import msgspec

from session_schedule.core.changes import (
    ScheduleCreateChange,
    create_change,
    decode_changes,
    encode_change,
)
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold
from session_schedule.core.records import ScheduleRecord
from session_schedule.session.codec import Source, decode_payload
from session_schedule.session.errors import SessionCorrupt
from session_schedule.session.port import LogEntry

CHECKPOINT_VERSION: Final = 1
SUFFIX: Final = ".checkpoint"
WINDOW: Final = 64
"""How many entries before the checkpoint's position it holds, decoded on open."""

RejectionReason = Literal["missing", "damaged", "version", "session", "log mismatch", "invalid"]


@final
class WindowEntry(msgspec.Struct, frozen=True, array_like=True, gc=False):
    type: str
    data: msgspec.Raw


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
    """How many leading bytes of the log file it covers (up to the end of a commit record)."""
    lines: int
    """How many lines those bytes hold."""
    chain: int
    """Entry ``n-1``'s chained checksum (0 when ``n`` is 0)."""
    highest_id: int
    active: list[msgspec.Raw]
    """The active records, each as the canonical payload of the change that creates it."""
    window: list[WindowEntry]
    """Entries ``n - len(window) … n-1``: their type and canonical payload."""


@final
class Checkpoint(NamedTuple):
    """A checkpoint that matched its log, decoded."""

    entries: int
    offset: int
    lines: int
    chain: int
    state: ScheduleFold
    window: list[LogEntry]


@final
class Rejected(NamedTuple):
    """Why a checkpoint was not used."""

    reason: RejectionReason
    detail: str


@functools.cache
def library_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415 - on demand

    try:
        return version("session-schedule")
    except PackageNotFoundError:
        return "unknown"


_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(CheckpointFile)


def encode_checkpoint(
    *,
    session: str,
    entries: int,
    offset: int,
    lines: int,
    chain: int,
    state: ScheduleFold,
    window: Sequence[tuple[str, bytes]],
) -> bytes:
    """The bytes of a checkpoint file."""
    body = _ENCODER.encode(
        CheckpointFile(
            checkpoint=CHECKPOINT_VERSION,
            library=library_version(),
            session=session,
            entries=entries,
            offset=offset,
            lines=lines,
            chain=chain,
            highest_id=state.highest_id,
            active=[msgspec.Raw(encode_change(create_change(r))) for r in state.by_creation()],
            window=[WindowEntry(entry_type, msgspec.Raw(data)) for entry_type, data in window],
        )
    )
    return b"%08x\n" % zlib.crc32(body) + body


def decode_checkpoint(data: bytes, source: Source) -> CheckpointFile | Rejected:
    """The checkpoint in ``data`` if it is intact, of this version and of ``source``'s session."""
    seal, _, body = data.partition(b"\n")
    if len(seal) != 8 or seal.strip(b"0123456789abcdef") or int(seal, 16) != zlib.crc32(body):
        return Rejected("damaged", "it does not match its checksum")
    try:
        found = _DECODER.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as error:
        return Rejected("damaged", f"it does not decode: {error}")
    if found.checkpoint != CHECKPOINT_VERSION or found.library != library_version():
        return Rejected(
            "version",
            f"it is of checkpoint format {found.checkpoint}, library {found.library}; this is "
            f"format {CHECKPOINT_VERSION}, library {library_version()}",
        )
    if found.session != source.session_id:
        return Rejected("session", f"it names session {found.session}")
    if not 0 <= len(found.window) <= found.entries or found.entries < 0 or found.offset < 0:
        return Rejected("invalid", "its counts are impossible")
    return found


def restore(found: CheckpointFile, source: Source) -> Checkpoint | Rejected:
    """The fold state and window ``found`` describes, strictly decoded."""
    try:
        changes = decode_changes([bytes(raw) for raw in found.active])
        records: list[ScheduleRecord] = []
        for change in changes:
            if not isinstance(change, ScheduleCreateChange):
                return Rejected("invalid", "an active record is not a create")
            records.append(change.schedule)
        state = ScheduleFold.resumed(
            records, highest_id=found.highest_id, session=source.session_id
        )
        first = found.entries - len(found.window)
        window = [
            decode_payload(entry.type, bytes(entry.data), first + index, source)
            for index, entry in enumerate(found.window)
        ]
    except (ScheduleError, SessionCorrupt) as error:
        return Rejected("invalid", str(error))
    return Checkpoint(found.entries, found.offset, found.lines, found.chain, state, window)
