"""The JSONL store: one file per session in a data directory — the embedded default.

A session is the file ``<data_dir>/<session id>.jsonl`` (mode ``0600``): the header on line 1,
then the entries, one line each, in order. New sessions are written in format 2 (sequence
numbers, chained checksums and commit records); sessions of format 1 are still read and appended
to in format 1. Both formats are in :mod:`session_schedule.session.lines`. The discipline, after
SPEC §9, each part in the module that keeps it:

- **Creation is atomic** (:mod:`.creation`): a hidden temporary file, fsync'd, then hard-linked
  to the session's name, then the directory fsync'd.
- **Only regular files** (:mod:`.files`): opened ``O_NOFOLLOW | O_NONBLOCK`` and ``fstat``'d
  before a byte moves; anything else under a session's name is ``SessionCorrupt``.
- **One writer** (:mod:`.opening`): the owner holds its session's byte of the store's lock file
  ``.owners`` (and the file's ``flock`` while it has a descriptor of it); a second owner is
  refused with ``SessionBusy``.
- **Bounded descriptors**: an open session's descriptor is the process's descriptor cache's
  (:mod:`session_schedule.session.descriptors`), closed while idle when others need the room.
- **One write per entry; the barrier is an fsync** with group commit, then a commit record
  (:mod:`.handle`).
- **A next-target index** beside the sessions, ``.next-targets``, a cache of the logs
  (:mod:`.next_targets`), answers ``due_sessions``.
- **A checkpoint** beside the file, bound to a commit record (:mod:`.checkpoints`); the entries
  before its window leave memory and are read back a segment at a time (:mod:`.segments`).
- **Opening repairs only a torn tail** (:mod:`.opening`); anything else that does not verify is
  corruption: it is reported and the file is left byte-for-byte untouched.

General layout, in import order (each module uses only the ones above it):

- ``files``        — no-follow, ``0600`` session files; whole writes and reads; directory fsync;
- ``next_targets`` — the next-target index, ``.next-targets``, a cache of the logs;
- ``segments``     — the entries before a checkpoint, read back a segment at a time;
- ``checkpoints``  — a checkpoint's file, its writing, and its binding to the log;
- ``opening``      — the owner's open (lock, checkpoint, recovery) and the readers' reads;
- ``creation``     — a new session's or a fork's file, created atomically;
- ``handle``       — :class:`JsonlSessionHandle`, the owner of an open file;
- ``store``        — :class:`JsonlSessionStore`, the composition of the above.
"""

from __future__ import annotations

from session_schedule.session.jsonl.checkpoints import checkpoint_path as checkpoint_path
from session_schedule.session.jsonl.files import SUFFIX as SUFFIX
from session_schedule.session.jsonl.handle import JsonlSessionHandle as JsonlSessionHandle
from session_schedule.session.jsonl.store import FORK_HELD as FORK_HELD
from session_schedule.session.jsonl.store import JsonlInspection as JsonlInspection
from session_schedule.session.jsonl.store import JsonlSessionStore as JsonlSessionStore

__all__ = [
    "FORK_HELD",
    "SUFFIX",
    "JsonlInspection",
    "JsonlSessionHandle",
    "JsonlSessionStore",
    "checkpoint_path",
]
