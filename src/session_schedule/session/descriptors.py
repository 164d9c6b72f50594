"""A bounded cache of the descriptors of open sessions' files, shared by the whole process.

An open session does not hold a descriptor of its own for as long as it is open: it holds a
:class:`CachedDescriptor`, which the process-wide :class:`DescriptorCache` keeps open while it is
among the most recently used and closes when others need the room; the next use opens the file
again. The rules:

1. **Bounded.** At most :attr:`DescriptorCache.capacity` descriptors are open, except those in
   use at that moment (their number is bounded by the threads that can use one at once: the
   event loop's and the worker pool's).
2. **Never closed under a user.** A descriptor is used only inside :meth:`CachedDescriptor.use`
   (it is *pinned* meanwhile) and is closed only when no use is in progress: an ``fsync`` or a
   ``pread`` can never land on a number that was closed and reused for another file.
3. **Never closed with unsynced entries.** A use that writes what a barrier must make durable
   says so (``dirty=True``); the descriptor then stays open until an ``fsync`` through it
   (:meth:`CachedDescriptor.sync`) covers that write, so a write-back error can only be reported
   to a descriptor that saw the write. Bookkeeping writes that no caller relies on (a commit
   record, durable with the next fsync) do not hold it open.
4. **Reopened as the same file.** The reopening is the owner's (see
   :class:`~session_schedule.session.jsonl.handle.JsonlSessionHandle`): it must never follow a
   symbolic link and must find the inode it opened first, or fail with an ``OSError``; the
   failure surfaces where the descriptor was wanted (a write or a barrier, which poisons the
   handle), never as another file's bytes.
5. **Least recently used first.** The descriptors closed to make room are those unused the
   longest.
"""

from __future__ import annotations

import collections
import contextlib
import os
import resource
import threading
from collections.abc import Callable, Iterator
from typing import Final, final

DEFAULT_CAPACITY: Final = 256
"""At most this many cached descriptors are open (fewer under a low descriptor limit)."""


def default_capacity() -> int:
    """:data:`DEFAULT_CAPACITY`, or a quarter of the process's soft descriptor limit if less."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return DEFAULT_CAPACITY
    return max(8, min(DEFAULT_CAPACITY, soft // 4))


@final
class CachedDescriptor:
    """The descriptor of one file, opened again by ``reopen`` whenever the cache closed it."""

    __slots__ = (
        "_cache",
        "_closed",
        "_fd",
        "_pins",
        "_released",
        "_reopen",
        "_synced",
        "_written",
    )

    def __init__(
        self,
        cache: DescriptorCache,
        fd: int,
        reopen: Callable[[], int],
        *,
        released: Callable[[], None] | None = None,
    ) -> None:
        """``fd``: the descriptor as the file was first opened (the cache owns it from now on);
        ``reopen``: opens it again (raising ``OSError`` when it is not the same file);
        ``released``: called once the descriptor is closed for good (:meth:`close`, once no
        use is in progress), to give up what its holder must keep until then (an ownership)."""
        self._cache = cache
        self._fd: int | None = fd
        self._reopen = reopen
        self._released = released
        self._pins = 0
        self._written = 0
        self._synced = 0
        self._closed = False
        cache._admit(self)

    @property
    def is_open(self) -> bool:
        """Whether a descriptor is open now (it may be closed to make room, then reopened)."""
        return self._fd is not None

    @contextlib.contextmanager
    def use(self, *, dirty: bool = False) -> Iterator[int]:
        """The descriptor, open (reopened if need be) and pinned until the block ends.

        ``dirty``: the block writes bytes a barrier must make durable (see Rule 3). Raises
        ``OSError`` when the file cannot be opened again as the same file, ``ValueError`` once
        closed.
        """
        fd = self._cache._pin(self)
        try:
            yield fd
        finally:
            self._cache._unpin(self, wrote=dirty)

    def sync(self) -> None:
        """``fsync`` the file; a success covers every dirty write made before it began."""
        with self.use() as fd:
            covered = self._written
            os.fsync(fd)
            self._synced = max(self._synced, covered)

    def close(self) -> None:
        """Close the descriptor for good (once the uses in progress end), then call
        ``released``; idempotent."""
        self._cache._close(self)

    def _evictable(self) -> bool:
        return self._pins == 0 and self._written == self._synced and not self._closed


@final
class DescriptorCache:
    """At most ``capacity`` open descriptors for every :class:`CachedDescriptor` it holds."""

    def __init__(self, capacity: int | None = None) -> None:
        self._capacity = default_capacity() if capacity is None else capacity
        if self._capacity < 1:
            raise ValueError("a descriptor cache holds at least one descriptor")
        self._lock = threading.Lock()
        self._idle: collections.OrderedDict[CachedDescriptor, None] = collections.OrderedDict()
        """The open descriptors that may be closed, least recently used first."""
        self._open = 0
        self._reopened = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def open_count(self) -> int:
        """How many descriptors the cache has open now."""
        return self._open

    @property
    def reopened(self) -> int:
        """How many times a descriptor the cache had closed was opened again."""
        return self._reopened

    def resize(self, capacity: int) -> None:
        """Hold at most ``capacity`` descriptors from now on (closing idle ones if need be)."""
        if capacity < 1:
            raise ValueError("a descriptor cache holds at least one descriptor")
        with self._lock:
            self._capacity = capacity
            self._make_room(0)

    def _admit(self, entry: CachedDescriptor) -> None:
        with self._lock:
            self._open += 1
            self._idle[entry] = None
            self._make_room(0)

    def _pin(self, entry: CachedDescriptor) -> int:
        with self._lock:
            if entry._closed:
                raise ValueError("the descriptor was closed")
            fd = entry._fd
            if fd is None:
                self._make_room(1)
                fd = entry._reopen()
                entry._fd = fd
                self._open += 1
                self._reopened += 1
            else:
                self._idle.pop(entry, None)
            entry._pins += 1
            return fd

    def _unpin(self, entry: CachedDescriptor, *, wrote: bool) -> None:
        with self._lock:
            entry._pins -= 1
            if wrote:
                entry._written += 1
            if entry._closed:
                self._finish(entry)
            elif entry._evictable():
                self._idle[entry] = None
                self._make_room(0)

    def _close(self, entry: CachedDescriptor) -> None:
        with self._lock:
            if entry._closed:
                return
            entry._closed = True
            self._finish(entry)

    def _finish(self, entry: CachedDescriptor) -> None:
        """Close a closed entry's descriptor once nobody uses it (under the lock)."""
        self._idle.pop(entry, None)
        if entry._pins:
            return
        fd = entry._fd
        if fd is not None:
            entry._fd = None
            self._open -= 1
            os.close(fd)
        released, entry._released = entry._released, None
        if released is not None:
            released()

    def _make_room(self, wanted: int) -> None:
        """Close idle descriptors, least recently used first, until ``wanted`` more fit (under
        the lock). In-use and dirty ones stay open: the bound may be exceeded by them."""
        while self._open + wanted > self._capacity and self._idle:
            entry, _ = self._idle.popitem(last=False)
            fd = entry._fd
            if fd is None:
                continue
            entry._fd = None
            self._open -= 1
            os.close(fd)


_PROCESS_CACHE: DescriptorCache | None = None
_process_lock: Final = threading.Lock()


def process_cache() -> DescriptorCache:
    """The cache every JSONL store of the process shares (sized on first use)."""
    global _PROCESS_CACHE  # noqa: PLW0603 - one per process, made when first wanted
    with _process_lock:
        if _PROCESS_CACHE is None:
            _PROCESS_CACHE = DescriptorCache()
        return _PROCESS_CACHE
