"""The JSONL store: one file per session in a data directory — the embedded default.

A session is the file ``<data_dir>/<session id>.jsonl`` (mode ``0600``): the header on line 1,
then the entries, one line each, in order. :class:`JsonlSessionStore` is a composition of the
package's parts, each of which opens with its own rules: creating a file (:mod:`.creation`),
opening and reading one (:mod:`.opening`), owning one (:mod:`.handle`), its checkpoint
(:mod:`.checkpoints`) and the entries before it (:mod:`.segments`), all through the file
discipline of :mod:`.files`. What the store itself keeps:

1. **A private data directory.** It is created ``0700`` when missing. One writable by group or
   others is logged as a warning, once per store: whoever can write it can plant or replace
   session files.
2. **Resources do not grow with open sessions.** Each handle runs its blocking calls on a
   :class:`~session_schedule.session.worker.Worker` lane of the process's shared pool; the
   store's other reads run on ``asyncio.to_thread``. A session's descriptor is the process's
   descriptor cache's (:mod:`session_schedule.session.descriptors`: closed while idle when others
   need the room, opened again when used), and its ownership a byte of one lock file per store,
   ``.owners`` (:mod:`session_schedule.session.owners`), so ten thousand open sessions hold a
   few hundred descriptors.
3. **A next-target index** beside the sessions, ``.next-targets``, a cache of the logs kept by
   the owners and checked against each file's inode, size and mtime by readers
   (:mod:`.next_targets`), answers ``due_sessions``.
4. **Hand-over requests** are files beside the sessions'
   (:class:`~session_schedule.session.handover.RequestFiles`).
5. **A fork is written with its checkpoint** (:mod:`.creation`): it keeps only a window of its
   parent's history decoded, and opens from that checkpoint, also after a power cut.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import stat
import threading
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Final, NamedTuple, final

from session_schedule.core.fold import ScheduleFold
from session_schedule.core.instants import Instant
from session_schedule.session import checkpoint
from session_schedule.session.descriptors import process_cache
from session_schedule.session.handover import RequestFiles
from session_schedule.session.ids import SessionId, chosen_session_id, require_session_id
from session_schedule.session.jsonl.checkpoints import (
    checked_fold,
    checkpoint_path,
    checkpoint_problem,
)
from session_schedule.session.jsonl.creation import Owning, Seed, create_session, fork_session
from session_schedule.session.jsonl.files import SUFFIX, source_of
from session_schedule.session.jsonl.handle import JsonlSessionHandle, write_pending_commit
from session_schedule.session.jsonl.next_targets import INDEX_NAME, TargetIndexFile
from session_schedule.session.jsonl.opening import (
    Opened,
    open_session,
    read_log,
    read_session,
    scan_directory,
)
from session_schedule.session.lines import CURRENT_FORMAT, Scan, new_checksums
from session_schedule.session.owners import OwnerLocks
from session_schedule.session.port import (
    DEFAULT_DUE_LIMIT,
    DueSession,
    SessionHeader,
    SessionListing,
    SessionSnapshot,
    listed,
    make_header,
)
from session_schedule.session.private import NotPrivateFile
from session_schedule.session.targets import check_limit, next_target_of
from session_schedule.session.worker import Worker

# The package's one logger: its records keep the name they have always had.
_log: Final = logging.getLogger("session_schedule.session.jsonl")

OWNERS_NAME: Final = ".owners"
"""The store's lock file, beside the sessions: a byte of it per owned session."""
FORK_HELD: Final = checkpoint.WINDOW
"""A fork inheriting more entries than this keeps only a checkpoint's window of them decoded."""


@final
class JsonlInspection(NamedTuple):
    """A session file as :meth:`JsonlSessionStore.inspect` finds it."""

    snapshot: SessionSnapshot
    torn_bytes: int
    """Bytes a torn tail holds: opening the session cuts them."""
    torn_lines: int
    """Complete lines among them (0: only an incomplete last line)."""
    checksums: Sequence[int]
    """Entry ``n``'s chained checksum at index ``n`` (format 2; empty for format 1)."""


class DerivedCheck(NamedTuple):
    """What :meth:`JsonlSessionStore.derived_check` finds."""

    state: ScheduleFold
    """The fold of the log's changes."""
    problems: tuple[str, ...]
    """What :meth:`JsonlSessionStore.derived_problems` says."""


@final
class JsonlSessionStore:
    """Sessions as JSONL files in ``data_dir`` (created ``0700`` when missing)."""

    def __init__(self, data_dir: str | os.PathLike[str], *, flush_on_loop: bool = True) -> None:
        """``data_dir``: a path, as a string or a path object; ``flush_on_loop``: a lone barrier
        fsyncs on the event loop's thread (fast, but the loop waits for the disk meanwhile)
        while no barrier of another session of the loop is at work; ``False`` sends every flush
        to the session's thread."""
        data_dir = Path(data_dir)
        self._dir = data_dir
        self._index = TargetIndexFile(data_dir, suffix=SUFFIX, read_log=read_log)
        self._flush_on_loop = flush_on_loop
        self._directory_lock = threading.Lock()
        self._directory_checked = False
        self._handovers = RequestFiles(data_dir)
        self._owners = OwnerLocks(data_dir / OWNERS_NAME)
        self._descriptors = process_cache()
        self._owning = Owning(self._owners, self._descriptors)

    def check_directory(self) -> None:
        """Log a warning when others than its owner may write the data directory; raise
        ``NotPrivateFile`` when it is not a directory (a regular file named as the store must
        not read as an empty store), as creating a session there does.

        Whoever can write the data directory can plant or replace session files (a symbolic
        link, a FIFO, another session's file), so it should be private (mode ``0700``, as the
        store creates it). Checked once per store, the first time the directory exists.
        """
        with self._directory_lock:
            if self._directory_checked:
                return
            try:
                status = self._dir.stat()
            except FileNotFoundError:
                return
            if not stat.S_ISDIR(status.st_mode):
                raise NotPrivateFile(errno.ENOTDIR, "it is not a directory", str(self._dir))
            mode = stat.S_IMODE(status.st_mode)
            self._directory_checked = True
        if mode & 0o022:
            _log.warning(
                "session data directory %s is writable by %s (mode %04o): another user "
                "could plant or replace session files; make it private (chmod 700)",
                self._dir,
                "its group and others"
                if mode & 0o022 == 0o022
                else "its group"
                if mode & 0o020
                else "others",
                mode,
            )

    @property
    def data_dir(self) -> Path:
        return self._dir

    def path_of(self, session_id: SessionId) -> Path:
        """The file of session ``session_id``."""
        return self._dir / f"{session_id}{SUFFIX}"

    async def request_handover(self, session_id: SessionId) -> None:
        """Ask the holder of ``session_id`` to let it go (a file beside the session's)."""
        await self._handovers.request(session_id)

    async def withdraw_handover(self, session_id: SessionId) -> None:
        await self._handovers.withdraw(session_id)

    async def handover_requests(self, session_ids: Collection[SessionId]) -> frozenset[SessionId]:
        return await self._handovers.live(session_ids)

    async def create(
        self, *, now: Instant, session_id: SessionId | None = None
    ) -> JsonlSessionHandle:
        chosen = chosen_session_id(session_id)

        def job() -> Opened:
            opened = create_session(
                self._dir,
                chosen,
                lambda new_id: make_header(
                    new_id,
                    now=now,
                    parent_id=None,
                    seed_length=0,
                    format_version=CURRENT_FORMAT,
                ),
                Seed([], [], new_checksums()),
                self._owning,
            )
            self.check_directory()
            return opened

        return await self._own(job)

    async def open(self, session_id: str) -> JsonlSessionHandle:
        """Own an existing session (see :class:`SessionStore`), from its checkpoint when one
        matches the log (see :mod:`session_schedule.session.checkpoint`)."""
        checked = require_session_id(session_id)
        path = self.path_of(checked)  # one object for the handle and its reopening
        return await self._own(
            lambda: open_session(
                self._checked(path), source_of(checked), self._owners, self._descriptors
            ),
            path=path,
        )

    def checkpoint_path(self, session_id: SessionId) -> Path:
        """The checkpoint file of session ``session_id`` (beside its log)."""
        return checkpoint_path(self.path_of(session_id))

    async def fork(
        self,
        parent_id: str,
        *,
        at: int | None = None,
        now: Instant,
        session_id: SessionId | None = None,
    ) -> JsonlSessionHandle:
        chosen = chosen_session_id(session_id)
        parent = require_session_id(parent_id)
        parent_path = self.path_of(parent)
        # A parent open on this loop may still owe its file a lone barrier's commit record.
        write_pending_commit(parent_path)

        def job() -> Opened:
            return fork_session(
                self._dir,
                self._checked(parent_path),
                source_of(parent),
                chosen,
                lambda new_id, count: make_header(
                    new_id,
                    now=now,
                    parent_id=parent,
                    seed_length=count,
                    format_version=CURRENT_FORMAT,
                ),
                at,
                self._owning,
            )

        return await self._own(job)

    async def read(self, session_id: str) -> SessionSnapshot:
        checked = require_session_id(session_id)
        parsed = await asyncio.to_thread(
            lambda: read_session(
                self._checked(self.path_of(checked)), source_of(checked), lines=False
            )
        )
        return SessionSnapshot(parsed.header, tuple(parsed.entries))

    async def inspect(self, session_id: str) -> JsonlInspection:
        """Like :meth:`read`, and also what opening the session would cut."""
        checked = require_session_id(session_id)

        def job() -> JsonlInspection:
            parsed = read_session(
                self._checked(self.path_of(checked)), source_of(checked), lines=False
            )
            return JsonlInspection(
                SessionSnapshot(parsed.header, tuple(parsed.entries)),
                parsed.size - parsed.keep,
                parsed.lines_cut,
                parsed.checksums,
            )

        return await asyncio.to_thread(job)

    async def derived_problems(
        self,
        session_id: str,
        *,
        read: SessionSnapshot | None = None,
        folded: ScheduleFold | None = None,
    ) -> tuple[str, ...]:
        """What the files derived from ``session_id``'s log say that its log does not, where
        they would be believed: its checkpoint, when it is bound to the log's commit record (so
        opening the session may use it) but holds other reminders, pending turns or entries
        than the log; its record in the next-target index, when it verifies and describes the
        file but names another next target. Each problem is one clause; none: ``()``.

        A derived file that would not be believed (stale, damaged, unsigned) is no problem: it
        is rebuilt from the log. ``read``: the session as :meth:`inspect` has just read it
        (``check`` passes it), which spares reading the whole log a second time; ``folded``:
        the fold of its changes, which spares folding them again."""
        checked = require_session_id(session_id)
        path = self._checked(self.path_of(checked))
        source = source_of(checked)

        def job() -> tuple[str, ...]:
            parsed = read_session(path, source, lines=False) if read is None else read
            difference = checkpoint_problem(path, parsed, source, checked)
            return self._problems(checked, path, parsed, difference, folded)

        return await asyncio.to_thread(job)

    async def derived_check(self, session_id: str, *, read: SessionSnapshot) -> DerivedCheck:
        """The fold of the changes of ``read`` (``session_id`` as :meth:`inspect` has just read
        it; raises ``corrupt_schedule_log`` as :func:`~session_schedule.core.fold.fold` does)
        and :meth:`derived_problems`, folding the log once: the fold that the comparison with a
        bound checkpoint builds goes on over the rest of the log."""
        checked = require_session_id(session_id)
        path = self._checked(self.path_of(checked))
        source = source_of(checked)

        def job() -> DerivedCheck:
            state, difference = checked_fold(path, read, source, checked)
            return DerivedCheck(state, self._problems(checked, path, read, difference, state))

        return await asyncio.to_thread(job)

    def _problems(
        self,
        checked: SessionId,
        path: Path,
        parsed: Scan | SessionSnapshot,
        difference: str | None,
        folded: ScheduleFold | None,
    ) -> tuple[str, ...]:
        """:meth:`derived_problems`, given what the checkpoint says that the log does not."""
        problems: list[str] = []
        if difference is not None:
            problems.append(
                f"its checkpoint {checkpoint_path(path).name} is bound to its log but "
                f"does not say what the log says ({difference}); delete the checkpoint "
                "(it is rebuilt from the log)"
            )
        target = next_target_of(parsed.header, parsed.entries, folded=folded)
        indexed = self._index.mismatch(checked, path.lstat(), target)
        if indexed is not None:
            problems.append(f"{indexed}; delete {INDEX_NAME} (it is rebuilt from the logs)")
        return tuple(problems)

    async def list(self) -> tuple[SessionHeader, ...]:
        return listed(await self.scan())

    async def scan(self) -> SessionListing:
        def job() -> SessionListing:
            self.check_directory()
            return scan_directory(self._dir)

        return await asyncio.to_thread(job)

    async def due_sessions(
        self, before: Instant, *, limit: int = DEFAULT_DUE_LIMIT
    ) -> tuple[DueSession, ...]:
        """See the port; answered from the sidecar index ``.next-targets`` of the data directory
        (:mod:`.next_targets`), which reads a session's log only when its record is missing or
        stale."""
        check_limit(limit)

        def job() -> tuple[DueSession, ...]:
            self.check_directory()  # a file named as the store is not an empty store
            return self._index.due(before, limit)

        return await asyncio.to_thread(job)

    def _checked(self, path: Path) -> Path:
        self.check_directory()
        return path

    async def _own(
        self, job: Callable[[], Opened], *, path: Path | None = None
    ) -> JsonlSessionHandle:
        worker = Worker("session-jsonl")

        def undo(opened: Opened) -> None:
            opened.file.close()  # and the ownership with it

        opened = await worker.start(job, undo=undo)
        return JsonlSessionHandle(
            opened=opened,
            path=self.path_of(opened.header.id) if path is None else path,
            worker=worker,
            index=self._index,
            flush_on_loop=self._flush_on_loop,
        )
