"""The byte forms of a session, shared by the file and the database backends.

Every stored record is an entry type ``T`` and ``D``, the canonical JSON of the payload (msgspec,
fields in declaration order, no whitespace). The database stores ``T`` and ``D`` in columns and
the header's ``D`` in its own table. A JSONL file of format 1 holds envelopes
``{"type": T, "data": D}``, one per line ending in ``\\n``: line 1 is the header (``T`` =
``"header"``, ``D`` a :class:`~session_schedule.session.port.SessionHeader`), line ``n + 2`` is
entry ``n``; format 2 adds a sequence number and a chained checksum to each line, and commit
records between them (see :mod:`session_schedule.session.lines`). A format-1 file::

    {"type":"header","data":{"format":1,"id":"s_7k2m4q9x3v5b","createdAt":"2026-05-01T09:00:00.000Z","parentId":null,"seedLength":0}}
    {"type":"message","data":{"role":"user","content":"remind me at 10","at":"2026-05-01T09:00:01.000Z","origin":"person"}}
    {"type":"schedule/change","data":{"operation":"delete","version":1,"id":"sch_1"}}

Payloads are decoded by the persistence catalog's decoder for their type. The promise of the
decoding functions here: they return a value or raise ``ScheduleError("corrupt_schedule_log")``
(a damaged ``schedule/change`` entry — including a broken line that starts the way every
schedule entry line starts) or :class:`SessionCorrupt` (anything else, including an entry type
nobody registered) — whatever the bytes.
"""  # noqa: E501 - the example lines are verbatim

from __future__ import annotations

import contextlib
import itertools
from collections import deque
from collections.abc import Iterator
from operator import call
from typing import Final, final

import msgspec

from session_schedule.core.canonical import NESTED_TOO_DEEPLY, why_not_canonical_json
from session_schedule.core.catalog import CATALOG
from session_schedule.core.changes import CHANGE_EVENT_TYPE, DECODE_CHUNK, corrupt
from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import parse_instant
from session_schedule.session.errors import SessionCorrupt, Storage, session_corrupt
from session_schedule.session.ids import parse_session_id
from session_schedule.session.port import LogEntry, SessionHeader

HEADER_TYPE: Final = "header"
SINGLE_FORMAT: Final = frozenset({1})
"""The header formats a store with a single format (the database, memory) reads."""
_SCHEDULE_PREFIX: Final = b'{"type":"schedule/change","data":'


@final
class Source(msgspec.Struct, frozen=True, kw_only=True):
    """Where bytes being decoded come from, to locate problems in error messages."""

    session_id: str
    name: str
    """The file or database name."""
    storage: Storage
    lines: bool
    """Whether records are lines of ``name`` (the header on line 1, entry ``n`` on line n+2)."""

    def locate(self, position: int | None, *, line: int | None = None) -> str:
        """The record of entry ``position`` (``None``: the header) as a reader finds it.

        ``line`` is the record's line number when it is not ``position + 2`` (a format-2 file
        has commit records between its entries).
        """
        if not self.lines:
            return self.name
        if line is None:
            line = 1 if position is None else position + 2
        return f"line {line} of {self.name}"

    def where(self, position: int, *, line: int | None = None) -> str:
        """Entry ``position`` as the catalog decoders name it in their messages."""
        return (
            f"at entry {position} of session {self.session_id} ({self.locate(position, line=line)})"
        )

    def corrupt(
        self, position: int | None, problem: str, *, line: int | None = None
    ) -> SessionCorrupt:
        """The error for ``problem`` in entry ``position`` (``None``: the header)."""
        record = "its header" if position is None else f"entry {position}"
        return session_corrupt(
            self.session_id,
            f"at {record} ({self.locate(position, line=line)})",
            problem,
            self.storage,
        )

    def corrupt_line(self, line: int, problem: str) -> SessionCorrupt:
        """The error for ``problem`` on line ``line``, which holds no entry."""
        return session_corrupt(
            self.session_id, f"at line {line} of {self.name}", problem, self.storage
        )


class _Envelope(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    type: str
    data: msgspec.Raw


_ENCODER: Final = msgspec.json.Encoder()
_ENVELOPE: Final = msgspec.json.Decoder(_Envelope)
_HEADER: Final = msgspec.json.Decoder(SessionHeader)


def encode_payload(entry_type: str, payload: object) -> tuple[object, bytes]:
    """The decoded value and canonical bytes of a payload about to be appended.

    A payload that is not a struct (a dict, say) is first converted to its declared type, whose
    fields have one order; the canonical bytes are then decoded by the type's strict decoder, so
    the log never holds bytes it could not read back. Raises ``ValueError`` (a developer error)
    for a type not in the persistence catalog or a payload that does not encode or does not
    decode strictly.
    """
    decoder = CATALOG.decoder(entry_type)
    if decoder is None:
        raise ValueError(f"entry type {entry_type!r} is not registered in the persistence catalog")
    try:
        if not isinstance(payload, msgspec.Struct):
            with contextlib.suppress(msgspec.ValidationError):
                # Unconvertible: the type's own decoder says what is wrong, in its words.
                payload = msgspec.convert(payload, CATALOG.declared_type(entry_type), strict=True)
        data = _ENCODER.encode(payload)
        value = decoder(data, "being appended")
    except (ScheduleError, ValueError, TypeError, msgspec.EncodeError) as error:
        raise ValueError(f"a {entry_type} payload must decode strictly: {error}") from error
    return value, data


def encode_header(header: SessionHeader) -> bytes:
    return _ENCODER.encode(header)


def header_line(header: SessionHeader) -> bytes:
    return b'{"type":"header","data":' + _ENCODER.encode(header) + b"}\n"


def entry_line(entry_type: str, data: bytes) -> bytes:
    """One JSONL line (with its ``\\n``) for an entry whose canonical payload bytes are ``data``."""
    return b'{"type":' + _ENCODER.encode(entry_type) + b',"data":' + data + b"}\n"


def decode_header(
    data: bytes, source: Source, *, formats: frozenset[int] = SINGLE_FORMAT
) -> SessionHeader:
    """Strictly decode a header's ``data``; it must name ``source.session_id`` and be of one
    of the store's ``formats``."""
    try:
        header = _HEADER.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as error:
        raise source.corrupt(None, _sentence(error)) from None
    if _ENCODER.encode(header) != data:
        raise source.corrupt(None, why_not_canonical_json(data))
    if header.format not in formats:
        raise source.corrupt(
            None, f"format {header.format} is not a format of this store - at `$.format`"
        )
    if parse_session_id(header.id) is None:
        raise source.corrupt(None, f"{header.id!r} is not a session id - at `$.id`")
    if header.id != source.session_id:
        raise source.corrupt(None, f"the header names session {header.id}")
    if header.parent_id is not None and (
        parse_session_id(header.parent_id) is None or header.parent_id == header.id
    ):
        raise source.corrupt(None, f"{header.parent_id!r} is not a parent id - at `$.parentId`")
    try:
        parse_instant(header.created_at)
    except ValueError as error:
        raise source.corrupt(None, f"{error} - at `$.createdAt`") from None
    return header


def decode_envelope_header(
    line: bytes, source: Source, *, formats: frozenset[int] = SINGLE_FORMAT
) -> SessionHeader:
    """The header from a ``{"type":"header","data":…}`` envelope (without its ``\\n``)."""
    envelope = _decode_envelope(line, None, source)
    if envelope.type != HEADER_TYPE:
        raise source.corrupt(None, f"expected the header, found a {envelope.type!r} record")
    return decode_header(bytes(envelope.data), source, formats=formats)


def decode_entry_line(line: bytes, position: int, source: Source) -> LogEntry:
    """The entry at ``position`` from its line (without its ``\\n``)."""
    envelope = _decode_envelope(line, position, source)
    return decode_payload(envelope.type, bytes(envelope.data), position, source)


def decode_payload(
    entry_type: str, data: bytes, position: int, source: Source, *, line: int | None = None
) -> LogEntry:
    """The entry at ``position`` (on line ``line``, see :meth:`Source.locate`) from its type and
    payload bytes."""
    decoder = CATALOG.decoder(entry_type)
    if decoder is None:
        raise source.corrupt(position, f"unknown entry type {entry_type!r}", line=line)
    where = source.where(position, line=line)
    try:
        payload = decoder(data, where)
    except ScheduleError:
        raise
    # A decoder may leak more than its documented error (msgspec raises UnicodeDecodeError for
    # invalid UTF-8 inside strings): the promise above holds whatever the decoder does.
    except Exception as error:
        problem = _sentence(error)
        if entry_type == CHANGE_EVENT_TYPE:
            raise corrupt(where, problem) from error
        raise source.corrupt(
            position, f"invalid {entry_type} payload: {problem}", line=line
        ) from error
    return LogEntry(position=position, type=entry_type, payload=payload)


@final
class EntryDecoder:
    """Decodes a run of entries in position order, a chunk of :data:`DECODE_CHUNK` entries at a
    time rather than one by one: a long log decodes and checks the payloads of each type in a
    chunk as one buffer, with the type's batch decoder in the persistence catalog
    (:meth:`~session_schedule.core.catalog.PersistenceCatalog.batch_decoder`; for
    ``schedule/change``, :func:`~session_schedule.core.changes.decoded_changes`), in a fraction
    of the time. The payloads of a type that has none, or whose batch decoder has a doubt, are
    decoded one by one with :func:`decode_payload`, in position order.

    :meth:`add` each entry in order, then take :meth:`finish`'s list. The errors are those of
    :func:`decode_payload` for the first bad entry in position order, as if each entry were
    decoded when added: an entry waits in the current chunk, so a reader that finds something
    else wrong first calls :meth:`raise_earlier`, which raises the error of a waiting entry if
    there is one (each waiting entry lies before what the reader found).
    """

    def __init__(self, source: Source) -> None:
        self._source = source
        self.entries: list[LogEntry] = []
        """The entries so far, in order; a waiting entry's slot holds a placeholder until its
        chunk is decoded (so ``len`` counts it)."""
        self._types: list[str] = []
        self._positions: list[int] = []
        self._lines: list[int | None] = []
        self._payloads: list[bytes] = []
        """The entries not decoded yet, in order: their types, positions, lines and payloads."""
        self._first = 0
        """The slot in :attr:`entries` of the first waiting entry."""

    def add(self, entry_type: str, data: bytes, position: int, *, line: int | None = None) -> None:
        """Entry ``position`` (on line ``line``, see :meth:`Source.locate`), decoded with its
        chunk."""
        types = self._types
        if not types:
            self._first = len(self.entries)
        types.append(entry_type)
        self._positions.append(position)
        self._lines.append(line)
        self._payloads.append(data)
        self.entries.append(_WAITING)
        if len(types) >= DECODE_CHUNK:
            self._decode_waiting()

    def add_run(
        self, types: list[str], payloads: list[bytes], position: int, lines: list[int]
    ) -> None:
        """Entries ``position``, ``position + 1`` … of ``types`` and ``payloads`` (on lines
        ``lines``): :meth:`add` of each in turn, without a call per entry."""
        done, count = 0, len(types)
        while done < count:
            waiting = self._types
            if not waiting:
                self._first = len(self.entries)
            end = min(count, done + DECODE_CHUNK - len(waiting))
            waiting += types[done:end]
            self._positions += range(position + done, position + end)
            self._lines += lines[done:end]
            self._payloads += payloads[done:end]
            self.entries += itertools.repeat(_WAITING, end - done)
            done = end
            if len(waiting) >= DECODE_CHUNK:
                self._decode_waiting()

    def raise_earlier(self) -> None:
        """Raise the error of the first bad waiting entry, if any (then nothing waits)."""
        self._decode_waiting()

    @contextlib.contextmanager
    def earlier_first(self) -> Iterator[None]:
        """A block whose errors give way to that of a bad waiting entry (which lies before
        whatever the block found wrong)."""
        try:
            yield
        except Exception:
            self.raise_earlier()
            raise

    def finish(self) -> list[LogEntry]:
        """All the entries added, decoded."""
        self._decode_waiting()
        return self.entries

    def _decode_waiting(self) -> None:
        types, positions, lines, payloads = (
            self._types,
            self._positions,
            self._lines,
            self._payloads,
        )
        if not types:
            return
        self._types, self._positions, self._lines, self._payloads = [], [], [], []
        first = self._first
        # The payloads of each type, in order, gathered and decoded a type at a time; then each
        # entry takes the next value of its type. Every step over the whole chunk runs in C
        # (``map``, ``call``): the chunk holds a thousand entries of a few types.
        of_type: dict[str, list[bytes]] = {entry_type: [] for entry_type in set(types)}
        appenders = {entry_type: grouped.append for entry_type, grouped in of_type.items()}
        deque(map(call, map(appenders.__getitem__, types), payloads), 0)
        values: dict[str, Iterator[object]] = {}
        doubtful: list[str] = []
        for entry_type, grouped in of_type.items():
            decode_many = CATALOG.batch_decoder(entry_type)
            decoded = None if decode_many is None else decode_many(grouped)
            if decoded is None or len(decoded) != len(grouped):
                doubtful.append(entry_type)
                values[entry_type] = itertools.repeat(None)
            else:
                values[entry_type] = iter(decoded)
        end = first + len(types)
        self.entries[first:end] = map(
            LogEntry, positions, types, map(next, map(values.__getitem__, types))
        )
        if doubtful:
            # Decoded one by one, in order: the first bad payload's error is the one raised.
            entries, source = self.entries, self._source
            for index, entry_type in enumerate(types):
                if entry_type in doubtful:
                    entries[first + index] = decode_payload(
                        entry_type, payloads[index], positions[index], source, line=lines[index]
                    )


_WAITING: Final = LogEntry(position=-1, type="", payload=None)


def check_seed_length(header: SessionHeader, count: int, source: Source) -> None:
    """A fork's copied entries must all be there."""
    if header.seed_length > count:
        raise source.corrupt(
            None, f"seedLength is {header.seed_length} but the session has {count} entries"
        )


def _decode_envelope(line: bytes, position: int | None, source: Source) -> _Envelope:
    """The envelope of a line, in its canonical form ``{"type":T,"data":D}`` and no other."""
    try:
        envelope = _ENVELOPE.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as error:
        problem = _sentence(error)
    else:
        if line == b'{"type":%b,"data":%b}' % (_ENCODER.encode(envelope.type), envelope.data):
            return envelope
        problem = why_not_canonical_json(line)
    if position is not None and line.startswith(_SCHEDULE_PREFIX):
        # The line says what it is before it breaks: it is a damaged schedule entry.
        raise corrupt(source.where(position), problem) from None
    raise source.corrupt(position, problem) from None


def _sentence(error: Exception) -> str:
    if isinstance(error, RecursionError):
        return NESTED_TOO_DEEPLY
    text = str(error)
    if isinstance(error, UnicodeDecodeError):
        return f"invalid UTF-8 ({text})"
    if isinstance(error, msgspec.ValidationError):
        return text[:1].lower() + text[1:]
    if isinstance(error, msgspec.DecodeError):
        return f"malformed JSON ({text})"
    return text
