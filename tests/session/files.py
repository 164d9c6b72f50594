"""Editing format-2 session files in tests: replace an entry and keep (or break) the seals."""

from __future__ import annotations

import json
from pathlib import Path

from session_schedule.session.lines import CHAIN_SEED, commit_line, entry_line


def _entry_index(lines: list[bytes], position: int) -> int:
    """The index in ``lines`` of entry ``position``'s line."""
    return next(i for i, line in enumerate(lines) if line.startswith(b'{"seq":%d,' % position))


def replace_entry_line(path: Path, position: int, line: bytes) -> None:
    """Put ``line`` (raw bytes, no seal recomputed) where entry ``position``'s line is."""
    lines = path.read_bytes().split(b"\n")
    lines[_entry_index(lines, position)] = line
    path.write_bytes(b"\n".join(lines))


def reseal_entry(path: Path, position: int, entry_type: str, data: bytes) -> None:
    """Replace entry ``position`` with a sealed line of ``data``, re-chaining every later entry
    and commit record — the file a writer of exactly this content would have left."""
    lines = path.read_bytes().split(b"\n")
    index = _entry_index(lines, position)
    previous = CHAIN_SEED
    checksums: list[int] = []
    for i in range(1, len(lines) - 1):
        line = lines[i]
        if line.startswith(b'{"ack":'):
            count = json.loads(line)["ack"]
            lines[i] = commit_line(count, checksums[count - 1])[:-1]
            continue
        if i == index:
            kind, payload = entry_type, data
        else:
            envelope = json.loads(line)
            kind = envelope["type"]
            start = line.index(b',"data":') + len(b',"data":')
            payload = line[start : line.rindex(b',"crc":"')]
        sealed, previous = entry_line(len(checksums), kind, payload, previous)
        lines[i] = sealed[:-1]
        checksums.append(previous)
    path.write_bytes(b"\n".join(lines))


def remove_entry(path: Path, position: int) -> None:
    """Rewrite the session without entry ``position``, sealed and acknowledged throughout: the
    file a writer that never appended that entry would have left (so without the checkpoint of
    the history that had it, which would count one entry more than this one holds)."""
    lines = path.read_bytes().split(b"\n")
    entries: list[tuple[str, bytes]] = []
    for line in lines[1:-1]:
        if line.startswith(b'{"seq":'):
            start = line.index(b',"data":') + len(b',"data":')
            entries.append((json.loads(line)["type"], line[start : line.rindex(b',"crc":"')]))
    del entries[position]
    rewritten = [lines[0] + b"\n"]
    previous = CHAIN_SEED
    for index, (kind, data) in enumerate(entries):
        sealed, previous = entry_line(index, kind, data, previous)
        rewritten.append(sealed)
    rewritten.append(commit_line(len(entries), previous))
    path.write_bytes(b"".join(rewritten))
    path.with_suffix(".checkpoint").unlink(missing_ok=True)
