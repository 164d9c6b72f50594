"""The lines of a JSONL session file — formats 1 and 2 — and the scan that reads them back.

**Format 2** (every session created now). Line 1 is the header, sealed with its own checksum; then
one line per entry, and after every barrier a commit record::

    {"type":"header","data":{"format":2,"id":"s_aaaaaaaaaaaa","createdAt":"2026-05-01T09:00:00.000Z","parentId":null,"seedLength":0},"crc":"ddf36d5c"}
    {"seq":0,"type":"message","data":{"role":"user","content":"turn 0","at":"2026-05-01T09:00:00.000Z","origin":"person"},"crc":"ea677e84"}
    {"seq":1,"type":"schedule/change","data":{"operation":"create","version":1,"schedule":{"kind":"at","id":"sch_1","prompt":"reminder 1","scheduledAt":"2030-01-01T00:00:00.000Z"}},"crc":"9089b7a0"}
    {"seq":2,"type":"message","data":{"role":"user","content":"turn 2","at":"2026-05-01T09:00:00.002Z","origin":"person"},"crc":"5c959cfe"}
    {"ack":3,"chain":"5c959cfe","crc":"fb36f8e1"}

- ``seq`` is the entry's position (0-based). ``data`` is the payload's canonical bytes, exactly as
  format 1 stores them (a ``schedule/change`` payload is SPEC's version-1 wire shape, byte for
  byte).
- ``crc`` seals the bytes before it (the line up to ``,"crc":``), as 8 lower-case hex digits. An
  entry's checksum is **chained**: the CRC register starts from the previous entry's checksum
  (entry 0 starts from 0), so it covers the previous checksum and this line's bytes, as a
  write-ahead log's records do. For a given line the map from the previous checksum to this one
  is a bijection, so a line moved, repeated, dropped or taken from another chain breaks the chain
  at that point. The chain starts at 0, not at the header, so a fork copies its parent's lines
  verbatim and entry *n* has the same checksum in both: a snapshot can be bound to "position *n*
  with checksum *c*" (:attr:`Scan.checksums`, ``JsonlSessionHandle.checksum``).
- A **commit record** ``{"ack":N,"chain":C}`` says that entries ``0 … N-1`` are durable and that
  entry ``N-1``'s checksum is ``C``. It is written only *after* the fsync of a barrier returned,
  so when it is readable its claim is true: it never vouches for bytes that were not durable.
  (Its own ``crc`` is not chained; commit records are not entries.) A fork's ``seedLength``
  vouches for its copied entries the same way.

**The checksum is CRC-32**, zlib's (:mod:`session_schedule.session.crc`: the standard library's
``zlib.crc32``, or with the ``speedups`` extra zlib-ng's, the same function two to three times
faster on a line). It is not a defence against an adversary — nothing in a file its reader can
write is — but a detector of damage: every burst of up to 32 bits, and all but 2⁻³² of the rest.
CRC-32C would detect as well; the format keeps zlib's CRC-32, which any language's standard
library computes.

**Reading back.** The scan verifies each line in order: the checksum against the chain, ``seq``
against the position, then the payload with its type's strict decoder. The first line that does
not verify is the *break*. A commit record anywhere in the file — before or after the break —
that is intact (its own checksum holds) says how many entries were *acknowledged*:

- if the break lies at or after every acknowledged entry, it and everything after it is a torn
  tail — bytes written after the last barrier that a power cut zero-filled, cut short or lost in
  part, perhaps with later unsynced bytes surviving — and is cut;
- if it lies before an acknowledged entry, an acknowledged line is damaged, missing, repeated or
  out of place: that is corruption, reported with its line, and the file is left untouched.

A line whose checksum holds but whose content does not decode is corruption wherever it is: a
power cut cannot produce it. Whole lines removed from the very end of the file together with
their commit records cannot be told from a barrier that never happened by the file alone (a
checkpoint that covers them tells: see :mod:`session_schedule.session.jsonl.checkpoints`); every
other removal of an acknowledged line is reported.

A reader that wants the entries alone reads a file a block at a time (:func:`scan_blocks`), with
the same findings as a read of the whole file (:func:`scan`). The common case of each line is
verified by comparing bytes: the seal with the formatted chained checksum, the start with
``{"seq":N,"type":"``, a commit record for every entry so far with the one expected line;
anything else takes the path that says what is wrong.

**Format 1** (sessions written before format 2; still read and appended to in their own format):
the header line ``{"type":"header","data":{"format":1,…}}`` and one ``{"type":T,"data":D}`` line
per entry, with no sequence numbers, checksums or commit records. Only bytes after the last
newline are a torn tail; any complete line that does not decode is corruption.
"""  # noqa: E501 - the example lines are verbatim

from __future__ import annotations

import itertools
import re
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator
from itertools import compress, repeat
from operator import getitem, itemgetter, sub
from typing import Final, Literal, NamedTuple, TypeAlias, cast, final

import msgspec

from session_schedule.core.changes import CHANGE_EVENT_TYPE, corrupt
from session_schedule.session.codec import (
    EntryDecoder,
    Source,
    check_seed_length,
    decode_entry_line,
    decode_envelope_header,
    encode_header,
    header_line,
)
from session_schedule.session.crc import crc32
from session_schedule.session.port import LogEntry, SessionHeader

Format: TypeAlias = Literal[1, 2]
CURRENT_FORMAT: Final[Format] = 2
FORMATS: Final[frozenset[int]] = frozenset({1, 2})
CHAIN_SEED: Final = 0
HEADER_LIMIT: Final = 1 << 16
"""The longest header line read (a header is a few hundred bytes); a listing reads no further."""
HEADER_TOO_LONG: Final = f"the header line is longer than {HEADER_LIMIT} bytes, which no header is"
"""The checksum "before" entry 0."""

Checksums: TypeAlias = "array[int]"

_SEAL_KEY: Final = b',"crc":"'
_SEAL_LENGTH: Final = len(b',"crc":"00000000"}')
_ENTRY_START: Final = b'{"seq":'
_COMMIT_START: Final = b'{"ack":'
_HEADER_START: Final = b'{"type":"header","data":'
_SEQ: Final = re.compile(rb'\{"seq":(0|[1-9][0-9]{0,18}),')
_COMMIT: Final = re.compile(rb'\{"ack":([1-9][0-9]{0,18}),"chain":"([0-9a-f]{8})"')
_ENCODER: Final = msgspec.json.Encoder()


def new_checksums() -> Checksums:
    """An empty list of chained checksums (4 bytes each)."""
    return array("I")


def sealed_header_line(header: SessionHeader) -> bytes:
    """Line 1 of a format-2 file, with its ``\\n``."""
    body = _HEADER_START + encode_header(header)
    return _seal(body, crc32(body))


def entry_line(position: int, entry_type: str, data: bytes, previous: int) -> tuple[bytes, int]:
    """The format-2 line (with its ``\\n``) of entry ``position`` and its chained checksum."""
    body = b'{"seq":%d,"type":%b,"data":%b' % (position, _ENCODER.encode(entry_type), data)
    checksum = crc32(body, previous)
    return _seal(body, checksum), checksum


def commit_line(count: int, checksum: int) -> bytes:
    """The commit record (with its ``\\n``) saying entries ``0 … count-1`` are durable."""
    body = b'{"ack":%d,"chain":"%08x"' % (count, checksum)
    return _seal(body, crc32(body))


def header_line_for(header: SessionHeader) -> bytes:
    """Line 1 (with its ``\\n``) in the header's own format."""
    return sealed_header_line(header) if header.format == 2 else header_line(header)


class Scan(NamedTuple):
    """What a session file holds, as far as it verifies."""

    header: SessionHeader
    entries: list[LogEntry]
    lines: list[bytes]
    """The entries' lines, without their newlines (commit records excluded)."""
    checksums: Checksums
    """Entry ``n``'s chained checksum at index ``n`` (format 2; empty for format 1)."""
    keep: int
    """Bytes that stay; whatever follows is a torn tail."""
    acknowledged: int
    """How many leading entries a commit record or ``seedLength`` vouches for (format 2)."""
    size: int
    """The file's size in bytes."""
    lines_cut: int
    """How many complete lines the torn tail holds."""
    kept_lines: int
    """How many complete lines stay (the header's included)."""
    kept_acknowledged: int
    """:attr:`acknowledged` without the commit records in the torn tail: what the file vouches
    for once that tail is cut (a commit record written after an entry that a crash then tore
    vouches for the entries before it, and goes with the tail)."""


def scan(data: bytes, source: Source) -> Scan:
    """Read a whole session file.

    Raises ``SessionCorrupt`` or ``ScheduleError("corrupt_schedule_log")`` — and nothing else —
    for damage that is not a torn tail (see the module docstring).
    """
    return scan_blocks(lambda: (data,), source)


def scan_blocks(
    blocks: Callable[[], Iterable[bytes]], source: Source, *, keep_lines: bool = True
) -> Scan:
    """:func:`scan` of a file read as consecutive blocks of its bytes (``blocks()``: from its
    start), a block at a time: besides what it returns, only a block's lines are held.

    Without ``keep_lines``, the result's ``lines`` is empty and the entries' lines are not kept
    either (a file of a million entries holds some 200 MB of them); the one check that looks
    back at an earlier line (a verbatim copy of one is corruption) then reads the file again,
    from ``blocks()``, when a line claims to be an earlier entry. Raises like :func:`scan`.
    """
    reader = _Lines(blocks())
    chunks = iter(reader)
    lines = next(chunks, [])
    if not lines and reader.size <= HEADER_LIMIT:
        raise source.corrupt(None, "the file has no complete header line")
    if not lines or len(lines[0]) > HEADER_LIMIT:
        raise source.corrupt(None, HEADER_TOO_LONG)
    header = decode_header_line(lines[0], source)
    if header.format == 1:
        for more in chunks:
            lines += more
        return _scan_format_1(header, lines, reader.complete, reader.size, source)
    earlier = None if keep_lines else _EarlierLines(blocks)
    return _scan_format_2(
        header, itertools.chain((lines,), chunks), reader, source, earlier=earlier
    )


class _Lines:
    """The complete lines of consecutive blocks, a list per block; once they are all taken,
    ``complete`` is the offset after the last newline and ``size`` the bytes read."""

    def __init__(self, blocks: Iterable[bytes]) -> None:
        self._blocks = blocks
        self.complete = 0
        self.size = 0

    def __iter__(self) -> Iterator[list[bytes]]:
        rest = b""
        for block in self._blocks:
            self.size += len(block)
            lines = block.split(b"\n")
            if rest:
                lines[0] = rest + lines[0]
            rest = lines.pop()
            if lines:
                self.complete = self.size - len(rest)
                yield lines


class _Ends(NamedTuple):
    """``complete`` and ``size`` of bytes already split."""

    complete: int
    size: int


def decode_header_line(line: bytes, source: Source) -> SessionHeader:
    """The header from line 1 (without its ``\\n``), in either format."""
    sealed = _unseal(line)
    if sealed is not None:
        body, stored = sealed
        if crc32(body) != stored:
            raise source.corrupt(None, "the header does not match its checksum")
        line = body + b"}"
    header = decode_envelope_header(line, source, formats=FORMATS)
    if header.format == 2 and sealed is None:
        raise source.corrupt(None, "a format-2 header must end with its checksum")
    if header.format == 1 and sealed is not None:
        raise source.corrupt(None, "a format-1 header carries no checksum")
    return header


def _scan_format_1(
    header: SessionHeader, lines: list[bytes], complete: int, size: int, source: Source
) -> Scan:
    del lines[0]
    entries = [decode_entry_line(line, position, source) for position, line in enumerate(lines)]
    check_seed_length(header, len(entries), source)
    return Scan(
        header,
        entries,
        lines,
        new_checksums(),
        complete,
        len(entries),
        size,
        0,
        len(lines) + 1,
        len(entries),
    )


class _Break(NamedTuple):
    at: int
    """The line's index (its line number minus 1)."""
    offset: int
    """The file offset where the line starts."""
    line: bytes


class _Commit(NamedTuple):
    acknowledged: int
    checksum: int
    line: int


class TailStart(NamedTuple):
    """Where the tail of a format-2 file starts: after its first ``entries`` entries (the last of
    them with the chained checksum ``chain``), ``offset`` bytes and ``lines`` lines."""

    entries: int
    offset: int
    lines: int
    chain: int


def scan_tail(
    header: SessionHeader,
    data: bytes,
    source: Source,
    *,
    after: TailStart,
    before: Callable[[int], bytes | None] | None = None,
) -> Scan:
    """Read the lines of a format-2 file that follow ``after`` (``data``: the file's bytes from
    ``after.offset`` on) as :func:`scan` reads a whole file.

    The result's ``entries``, ``lines`` and ``checksums`` are the tail's; ``keep``, ``size`` and
    ``kept_lines`` count from the start of the file. ``before``: what reads the line of an entry
    before the tail (``n`` < ``after.entries``) again, so that a verbatim copy of one in the
    tail is corruption, as :func:`scan` finds it — it is called only for a line that does not
    verify and claims such an entry; without it, only the tail's own lines are compared. Raises
    like :func:`scan`.
    """
    complete = data.rfind(b"\n") + 1
    lines = data[:complete].split(b"\n")
    lines.pop()
    ends = _Ends(after.offset + complete, after.offset + len(data))
    return _scan_format_2(header, (lines,), ends, source, after=after, before=before)


def _scan_format_2(  # noqa: PLR0915 - one loop over every line on purpose: replay speed
    header: SessionHeader,
    blocks: Iterable[list[bytes]],
    ends: _Lines | _Ends,
    source: Source,
    *,
    after: TailStart | None = None,
    earlier: _EarlierLines | None = None,
    before: Callable[[int], bytes | None] | None = None,
) -> Scan:
    """The lines of ``blocks`` (the header's first, unless ``after`` says where they start);
    ``ends`` says where the complete lines end and where the file does, once ``blocks`` is
    exhausted. ``earlier``: reads an earlier entry's line again instead of keeping them all;
    ``before``: reads the line of an entry before ``after`` again (see :func:`scan_tail`)."""
    decoder = EntryDecoder(source)
    entry_lines: list[bytes] = []
    # ``checksums[i]`` is entry ``origin + i``'s; a tail keeps the one before it at index 0.
    checksums = new_checksums()
    tail = after is not None
    if after is None:
        first, origin, offset = 1, 0, 0
        after = TailStart(entries=0, offset=0, lines=0, chain=CHAIN_SEED)
    else:
        first, origin, offset = 0, after.entries - 1, after.offset
        checksums.append(after.chain)
    start, previous, line_base = after.entries, after.chain, after.lines
    # ``count``: the entries so far, those of the block being read included (they are handed to
    # the decoder together once the block is read, or something in it raised).
    count = start
    acknowledged = kept_acknowledged = max(header.seed_length, after.entries)
    broken: _Break | None = None
    keep_lines = earlier is None
    # ``base``: the index among all lines of the block's first line (the header's is 0), which
    # starts at file offset ``offset``.
    base = 0
    with decoder.earlier_first():
        for lines in blocks:
            if broken is None and len(lines) - first >= _AT_ONCE:
                block = _verified_block(
                    lines, first, count, previous, line_base + base + first + 1, source
                )
                if block is not None:
                    # Every line of the block is what the loop below accepts without a finding.
                    decoder.add_run(block.types, block.payloads, count, block.numbers)
                    count += len(block.types)
                    if block.types:
                        checksums += block.checksums
                        previous = block.checksums[-1]
                        if keep_lines:
                            entry_lines += block.lines
                    acknowledged = kept_acknowledged = max(acknowledged, block.acknowledged)
                    offset = ends.complete  # where the block's last line ends
                    base += len(lines)
                    first = 0
                    continue
            types: list[str] = []
            payloads: list[bytes] = []
            numbers: list[int] = []
            try:
                for index in range(first, len(lines)):
                    line = lines[index]
                    if line.startswith(_COMMIT_START):
                        if broken is None and count and line == _expected_commit(count, previous):
                            # The commit record for every entry so far, chained as it must be:
                            # what _commit and _check_commit accept of it, in one comparison.
                            acknowledged = kept_acknowledged = max(acknowledged, count)
                            continue
                        commit = _commit(line, line_base + base + index + 1)
                        if commit is not None:
                            if broken is None or commit.acknowledged <= count:
                                _check_commit(commit, checksums, source, origin=origin)
                            acknowledged = max(acknowledged, commit.acknowledged)
                            if broken is None:
                                kept_acknowledged = acknowledged
                        elif broken is None:
                            broken = _broken(lines, index, base, offset)
                    elif broken is None:
                        position = count
                        # The common case first: the seal is exactly that of the chained checksum
                        # (what _verify accepts, in one comparison) and the line starts as entry
                        # ``position``'s.
                        checksum = crc32(line[:-_SEAL_LENGTH], previous)
                        if (
                            len(line) > _SEAL_LENGTH
                            and line[-_SEAL_LENGTH:] == _SEAL_FORM % checksum
                        ):
                            line_number = line_base + base + index + 1
                            prefix = _ENTRY_PREFIX % position
                            known = _known_types.get(line[len(prefix) : len(prefix) + _TYPE_PEEK])
                            if known is not None and line.startswith(prefix):
                                entry_type = known[0]
                                data = line[len(prefix) + known[1] : -_SEAL_LENGTH]
                            else:
                                entry_type, data = _entry_parts(line, position, line_number, source)
                            types.append(entry_type)
                            payloads.append(data)
                            numbers.append(line_number)
                            count += 1
                            if keep_lines:
                                entry_lines.append(line)
                            checksums.append(checksum)
                            previous = checksum
                        else:
                            line_number = line_base + base + index + 1
                            _refuse_a_repeat(
                                line,
                                entry_lines if earlier is None else earlier.line_of,
                                line_number,
                                source,
                                start=start,
                                count=count - start,
                            )
                            if before is not None:
                                # A copy of an entry before the tail (the checkpoint's).
                                _refuse_a_repeat(
                                    line, before, line_number, source, count=start, position=count
                                )
                            broken = _broken(lines, index, base, offset)
            finally:
                # The entries before whatever raised are decoded first: their errors come first.
                decoder.add_run(types, payloads, count - len(types), numbers)
            if broken is None:
                offset += sum(map(len, lines)) + len(lines)
            base += len(lines)
            first = 0
    entries = decoder.finish()
    if broken is not None and acknowledged > count:
        raise _damaged(broken.line, count, broken, source, line_base=line_base)
    check_seed_length(header, count, source)
    keep = ends.complete if broken is None else broken.offset
    cut = 0 if broken is None else base - broken.at
    kept_lines = line_base + (base if broken is None else broken.at)
    if tail:
        del checksums[0]
    return Scan(
        header,
        entries,
        entry_lines,
        checksums,
        keep,
        acknowledged,
        ends.size,
        cut,
        kept_lines,
        kept_acknowledged,
    )


class _Block(NamedTuple):
    """What the lines of a block that verified without a finding hold."""

    lines: list[bytes]
    """The entries' lines."""
    types: list[str]
    payloads: list[bytes]
    numbers: list[int]
    """The entries' line numbers."""
    checksums: Checksums
    acknowledged: int
    """The entries the block's last commit record acknowledges (0: none)."""


def _verified_block(
    lines: list[bytes], first: int, count: int, previous: int, line_number: int, source: Source
) -> _Block | None:
    """``lines[first:]`` (the first on line ``line_number``, after ``count`` entries, the last
    with the chained checksum ``previous``) when each of them is what the per-line loop of
    :func:`_scan_format_2` accepts without a finding: an entry line whose seal is that of the
    chained checksum and that starts as the next entry's, or the commit record for every entry
    so far. ``None`` at the first doubt: the loop then reads the block and says what is wrong.

    The work is done a block at a time by operations that run over a whole list or buffer in C
    (slices, joins, ``map``, formatting), not a Python step per line."""
    if first:
        lines = lines[first:]
    try:
        # The "s" of {"seq": or the "a" of {"ack":, a byte per line.
        kinds = bytes(map(_byte_at, lines, repeat(2)))
    except IndexError:
        return None
    numbers = range(line_number, line_number + len(lines))
    if _ACK_KIND in kinds:
        is_entry = kinds.translate(_IS_ENTRY)
        entries = list(compress(lines, is_entry))
        entry_numbers = list(compress(numbers, is_entry))
    else:
        entries, entry_numbers = lines, list(numbers)
    verified = _verified_entries(entries, count, previous, entry_numbers, source)
    if verified is None:
        return None
    types, payloads, checksums = verified
    acknowledged = 0
    if len(entries) < len(lines):
        # Any line that is not an entry line must be the commit record for every entry before
        # it: ``before[i]`` entries of the block precede the ``i``-th, whose index among the
        # lines is ``before[i] + i``.
        is_commit = kinds.translate(_IS_NOT_ENTRY)
        before = list(map(sub, compress(itertools.count(), is_commit), itertools.count()))
        acknowledged = count + before[-1]
        if count + before[0] == 0:
            return None
        claims = [0] * (2 * len(before))
        claims[::2] = map(count.__add__, before)
        claims[1::2] = map((array("I", (previous,)) + checksums).__getitem__, before)
        expected = ((_COMMIT_BODY + b"\n") * len(before) % tuple(claims)).split(b"\n")
        expected.pop()
        commits = list(compress(lines, is_commit))
        if list(map(_cut, commits, repeat(_BODY_SLICE))) != expected or b"".join(
            map(_cut, commits, repeat(_SEAL_SLICE))
        ) != _seals_of(array("I", map(crc32, expected))):
            return None
    return _Block(entries, types, payloads, entry_numbers, checksums, acknowledged)


def _seals_of(checksums: Checksums) -> bytes:
    """``_SEAL_FORM % c`` for each ``c`` of ``checksums``, joined."""
    big_endian = array("I", checksums)
    if _LITTLE_ENDIAN:
        big_endian.byteswap()
    digits = big_endian.tobytes().hex("|", 4)
    return b'%b%b"}' % (_SEAL_KEY, digits.replace("|", _SEALS_BETWEEN).encode("ascii"))


def _verified_entries(
    entries: list[bytes], count: int, previous: int, numbers: list[int], source: Source
) -> tuple[list[str], list[bytes], Checksums] | None:
    """The types, payloads and chained checksums of entry lines ``count …`` (after an entry
    with the checksum ``previous``), or ``None`` when a line is not one the per-line loop
    accepts as it stands."""
    size = len(entries)
    checksums = new_checksums()
    if not size:
        return [], [], checksums
    seals = b"".join(map(_cut, entries, repeat(_SEAL_SLICE)))
    if len(seals) != _SEAL_LENGTH * size:
        return None
    # The checksums the seals state, each line's register starting from the one before.
    digits = bytearray(8 * size)
    for k in range(8):
        digits[k::8] = seals[_DIGITS_AT + k :: _SEAL_LENGTH]
    try:
        stated = array("I", bytes.fromhex(digits.decode("ascii")))
    except ValueError:
        return None
    if len(stated) != size:
        return None
    if _LITTLE_ENDIAN:
        stated.byteswap()
    checksums.extend(
        map(crc32, map(_cut, entries, repeat(_BODY_SLICE)), array("I", (previous,)) + stated)
    )
    # Each seal must be exactly that of the checksum computed: so the one it states is that one,
    # and the next line's register started from it.
    if seals != _seals_of(checksums):
        return None
    types: list[str] = []
    payloads: list[bytes] = []
    position = done = 0
    while done < size:
        position = count + done
        width = len(str(position))
        segment = entries[done : done + min(size - done, 10**width - position)]
        start = len(_ENTRY_PREFIX) - 2 + width
        if b"".join(map(_cut, segment, repeat(slice(None, start)))) != _entry_prefixes(
            position, position + len(segment)
        ):
            return None
        known = _types_after(start)
        found = list(map(known.get, map(_cut, segment, repeat(slice(start, start + _TYPE_PEEK)))))
        if None in found:
            # A type not seen yet (or too long to be known by the bytes after the prefix).
            for index, part in enumerate(found):
                if part is None:
                    line = segment[index]
                    if _type_end(line, start) is None:
                        return None
                    entry_type, data = _entry_parts(
                        line, position + index, numbers[done + index], source
                    )
                    found[index] = (
                        entry_type,
                        slice(len(line) - _SEAL_LENGTH - len(data), -_SEAL_LENGTH),
                    )
        parts = cast("list[_Part]", found)
        types += map(_type_of, parts)
        payloads += map(_cut, segment, map(_payload_of, parts))
        done += len(segment)
    return types, payloads, checksums


def _entry_prefixes(start: int, stop: int) -> bytes:
    """``_ENTRY_PREFIX % n`` for ``n`` from ``start`` to ``stop`` (excluded), joined."""
    if start < 1000:
        return (_ENTRY_PREFIX * (stop - start)) % tuple(range(start, stop))
    parts = []
    for high in range(start // 1000, (stop - 1) // 1000 + 1):
        low = high * 1000
        opening = b'{"seq":%d' % high
        between = b',"type":"' + opening
        thousand = _THREE_DIGITS[max(start, low) - low : min(stop, low + 1000) - low]
        parts.append(opening + between.join(thousand) + b',"type":"')
    return b"".join(parts)


def _types_after(start: int) -> dict[bytes, _Part]:
    """:data:`_known_types` for lines whose prefix is ``start`` bytes long: the type, and the
    slice of the line that is the payload."""
    return {
        peek: (entry_type, slice(start + data_start, -_SEAL_LENGTH))
        for peek, (entry_type, data_start) in _known_types.items()
    }


def _broken(lines: list[bytes], index: int, base: int, offset: int) -> _Break:
    """The break at ``lines[index]``, in a block whose first line is line ``base`` (counted
    from 0) and starts at file offset ``offset``."""
    return _Break(base + index, offset + sum(map(len, lines[:index])) + index, lines[index])


@final
class _EarlierLines:
    """The lines of the entries of a whole file, read again from it when one is needed."""

    def __init__(self, blocks: Callable[[], Iterable[bytes]]) -> None:
        self._blocks = blocks

    def line_of(self, n: int) -> bytes | None:
        """The line of entry ``n``: the ``n``-th line after the header that is not a commit
        record (``None`` past the end). Only for entries that verified: up to the first line
        that does not, every line is an entry or an intact commit record."""
        seen = 0
        skip = 1
        for lines in _Lines(self._blocks()):
            for line in itertools.islice(lines, skip, None):
                if not line.startswith(_COMMIT_START):
                    if seen == n:
                        return line
                    seen += 1
            skip = 0
        return None


def _expected_commit(count: int, chain: int) -> bytes:
    """The commit record line (without its newline) for ``count`` entries, the last with the
    chained checksum ``chain``."""
    body = b'{"ack":%d,"chain":"%08x"' % (count, chain)
    return body + _SEAL_FORM % crc32(body)


def stated_entry_checksum(line: bytes, position: int) -> int | None:
    """The chained checksum that ``line`` states, when it is the line of entry ``position``
    ending in a well-formed seal (``None`` otherwise); nothing is verified."""
    if not line.startswith(b'{"seq":%d,' % position):
        return None
    sealed = _unseal(line)
    return None if sealed is None else sealed[1]


def _verify(line: bytes, previous: int) -> int | None:
    """The line's chained checksum when its seal matches the chain, otherwise ``None``."""
    sealed = _unseal(line)
    if sealed is None:
        return None
    body, stored = sealed
    checksum = crc32(body, previous)
    return checksum if checksum == stored else None


def _refuse_a_repeat(
    line: bytes,
    earlier: list[bytes] | Callable[[int], bytes | None],
    line_number: int,
    source: Source,
    *,
    start: int = 0,
    count: int = 0,
    position: int | None = None,
) -> None:
    """A copy of an earlier line (``earlier``: the lines of entries ``start …``, or what reads
    the ``n``-th of them again, with ``count`` of them) is corruption wherever it is: no power
    cut writes one. ``position``: where ``line`` stands (by default, right after them)."""
    found = _SEQ.match(line)
    if found is None:
        return
    seq = int(found[1])
    if isinstance(earlier, list):
        count = len(earlier)
    if not start <= seq < start + count:
        return
    copied = earlier[seq - start] if isinstance(earlier, list) else earlier(seq - start)
    if copied == line:
        if position is None:
            position = start + count
        raise source.corrupt(position, _out_of_place(seq, position), line=line_number)


def _out_of_place(seq: int, position: int) -> str:
    return (
        f"found entry {seq} where entry {position} belongs: a line is missing, repeated or out "
        "of order"
    )


_ENTRY_PREFIX: Final = b'{"seq":%d,"type":"'
_SEAL_FORM: Final = b',"crc":"%08x"}'
_TYPE_PEEK: Final = 24
"""How many bytes after an entry line's prefix :data:`_known_types` is keyed by."""
_known_types: Final[dict[bytes, tuple[str, int]]] = {}
"""The entry types :func:`_entry_parts` has found, keyed by the :data:`_TYPE_PEEK` bytes that
follow an entry line's prefix when those bytes hold the whole type and the ``","data":`` after
it: the type, and where its payload starts after the prefix. Bounded like the other caches of
parts already checked."""
_TYPES_REMEMBERED: Final = 256
_AT_ONCE: Final = 16
"""The fewest lines a block verified at once holds: below that, the per-line loop costs less than
the fixed cost of the block's operations (some 10 µs)."""
_ACK_KIND: Final = _COMMIT_START[2]
_SEQ_KIND: Final = _ENTRY_START[2]
_SEAL_SLICE: Final[_Cut] = slice(-_SEAL_LENGTH, None)
_BODY_SLICE: Final[_Cut] = slice(None, -_SEAL_LENGTH)
_DIGITS_AT: Final = len(_SEAL_KEY)
_SEALS_BETWEEN: Final = '"}' + _SEAL_KEY.decode()
_COMMIT_BODY: Final = b'{"ack":%d,"chain":"%08x"'
_THREE_DIGITS: Final = [b"%03d" % n for n in range(1000)]
_LITTLE_ENDIAN: Final = sys.byteorder == "little"
_IS_ENTRY: Final = bytes(int(kind == _SEQ_KIND) for kind in range(256))
_IS_NOT_ENTRY: Final = bytes(int(kind != _SEQ_KIND) for kind in range(256))
_Cut: TypeAlias = "slice[int | None, int | None, None]"
_Part: TypeAlias = tuple[str, _Cut]
"""An entry line's type and the slice of it that is its payload."""
_cut: Final = cast("Callable[[bytes, _Cut], bytes]", getitem)
_byte_at: Final = cast("Callable[[bytes, int], int]", getitem)
_type_of: Final = cast("Callable[[_Part], str]", itemgetter(0))
_payload_of: Final = cast("Callable[[_Part], _Cut]", itemgetter(1))


def _entry_parts(line: bytes, position: int, line_number: int, source: Source) -> tuple[str, bytes]:
    """The entry type and payload of a line whose seal matched the chain: anything wrong now is
    corruption."""
    prefix = b'{"seq":%d,"type":"' % position
    type_end = _type_end(line, len(prefix))
    if not line.startswith(prefix) or type_end is None:
        found = _SEQ.match(line)
        problem = (
            _out_of_place(int(found[1]), position)
            if found is not None and int(found[1]) != position
            else "the line is not an entry line"
        )
        raise source.corrupt(position, problem, line=line_number)
    entry_type = line[len(prefix) : type_end].decode("utf-8", "replace")
    data_start = type_end + len(b'","data":')
    if data_start - len(prefix) <= _TYPE_PEEK:
        if len(_known_types) >= _TYPES_REMEMBERED:
            _known_types.clear()
        _known_types[line[len(prefix) : len(prefix) + _TYPE_PEEK]] = (
            entry_type,
            data_start - len(prefix),
        )
    return entry_type, line[data_start:-_SEAL_LENGTH]


def _type_end(line: bytes, start: int) -> int | None:
    """Where the entry type that starts at ``start`` ends (before ``","data":``), or ``None``
    when the line has no such type."""
    type_end = line.find(b'","data":', start)
    return None if type_end < 0 or b'"' in line[start:type_end] else type_end


def _commit(line: bytes, line_number: int) -> _Commit | None:
    """The commit record on a line, or ``None`` when it is not an intact one."""
    sealed = _unseal(line)
    if sealed is None:
        return None
    body, stored = sealed
    found = _COMMIT.fullmatch(body)
    if found is None or crc32(body) != stored:
        return None
    return _Commit(int(found[1]), int(found[2], 16), line_number)


def intact_commit(ending: bytes) -> tuple[int, int] | None:
    """``(acknowledged, checksum)`` of the commit record that ends ``ending`` (bytes that end with
    its newline), or ``None`` when they do not end with an intact one."""
    if not ending.endswith(b"\n"):
        return None
    found = _commit(ending[:-1].rsplit(b"\n", 1)[-1], 0)
    return None if found is None else (found.acknowledged, found.checksum)


def _check_commit(commit: _Commit, checksums: Checksums, source: Source, *, origin: int) -> None:
    """``checksums[i]`` is entry ``origin + i``'s; a commit record for entries before
    ``origin`` (in a tail after a checkpoint, which vouched for them) is not checked."""
    count = origin + len(checksums)
    if commit.acknowledged > count:
        raise source.corrupt(
            count,
            f"entry {count} is missing: the commit record on line {commit.line} acknowledges "
            f"{commit.acknowledged} entries",
            line=commit.line,
        )
    if commit.acknowledged - 1 < origin:
        return
    actual = checksums[commit.acknowledged - 1 - origin]
    if actual != commit.checksum:
        raise source.corrupt_line(
            commit.line,
            f"the commit record acknowledges entry {commit.acknowledged - 1} with checksum "
            f"{commit.checksum:08x}, but the entry's checksum is {actual:08x}",
        )


def _damaged(
    line: bytes, position: int, broken: _Break, source: Source, *, line_base: int = 0
) -> Exception:
    """The error for an acknowledged line that does not verify."""
    line_number = line_base + broken.at + 1
    found = _SEQ.match(line)
    if found is not None and int(found[1]) != position:
        return source.corrupt(position, _out_of_place(int(found[1]), position), line=line_number)
    if line.startswith(_COMMIT_START):
        return source.corrupt(position, "a damaged commit record", line=line_number)
    if found is None:
        problem = "the line is not an entry line (it is damaged or zero-filled)"
    else:
        problem = "the line does not match its checksum: it, or a line before it, was altered"
    if line.startswith(b'{"seq":%d,"type":"%b",' % (position, CHANGE_EVENT_TYPE.encode())):
        return corrupt(source.where(position, line=line_number), problem)
    return source.corrupt(position, problem, line=line_number)


def _seal(body: bytes, checksum: int) -> bytes:
    return body + b',"crc":"%08x"}\n' % checksum


def _unseal(line: bytes) -> tuple[bytes, int] | None:
    """The sealed body and the stored checksum, when the line ends in a well-formed seal."""
    if (
        len(line) <= _SEAL_LENGTH
        or line[-_SEAL_LENGTH : -_SEAL_LENGTH + len(_SEAL_KEY)] != _SEAL_KEY
        or line[-2:] != b'"}'
    ):
        return None
    digits = line[-10:-2]
    if digits.strip(b"0123456789abcdef"):
        return None
    return line[:-_SEAL_LENGTH], int(digits, 16)
