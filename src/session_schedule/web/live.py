"""The Sessions the server keeps live, and the events their page subscribers receive.

One :class:`LiveSession` per Session open in the server: the Session handle, the reference chat
(``live_chat``: agent, Schedule and tools, kept running while the Session is open here — that is
what delivers its reminders), the transcript turns seen so far, and the pages subscribed to it.
:class:`LiveSessions` opens Sessions on demand, creates and forks them, and closes every one on
shutdown.

Live Sessions are bounded (:class:`LiveLimits`). A Session is *in use* while it has active
reminders (delivering them is what being live is for: SPEC §5, ``session-local``), while its
agent is busy, or while a page is subscribed to it. One not in use is closed once it has been
idle (no request, no subscriber) for ``idle_seconds``, and the least recently used one is closed
when opening another would pass ``max_live``. A Session in use is never closed for either
reason; when every live Session is in use, opening another is refused
(:class:`TooManyLiveSessions`). A closed Session is opened again by the next request for it.

A transcript turn is known by its ``position`` in the log, and is fanned out to the subscribers
as it is appended. Nothing of the transcript is kept here: a page of turns, or the backlog of a
new subscriber, is read from the end of the Session's entries (see
:func:`~session_schedule.harness.transcript.recent_turns`), so a long history that nobody asks
for is never read. Taking the backlog and subscribing happen in one step, with no ``await``
between them, so a subscriber sees every turn exactly once, in order. A subscriber that falls too
far behind is dropped; its page reconnects and resumes after the position it has.

A live Session whose storage fails (a write or a flush: the handle is poisoned, and its Schedule
or turn queue stops) is reopened from storage at once, then after 1 s, 2 s, 4 s … up to
``REOPEN_MAX_SECONDS`` while reopening fails; its pages are told (a :class:`Notice`) and their
streams end, so they reconnect to the reopened Session, whose delivery resumes.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Final, TypeAlias, final

import msgspec

from session_schedule.core.fold import ScheduleFold
from session_schedule.core.instants import MIN_INSTANT, Instant
from session_schedule.harness.agent import ChatEvent
from session_schedule.harness.chat import LiveChat, live_chat
from session_schedule.harness.model import Model
from session_schedule.harness.transcript import check_fork_cut, recent_turns
from session_schedule.runtime.clock import Clock, SystemClock
from session_schedule.runtime.live import Settings
from session_schedule.runtime.opening import open_when_free
from session_schedule.session.checkpoint import WINDOW
from session_schedule.session.ids import SessionId
from session_schedule.session.message import MESSAGE_ENTRY_TYPE, MessageEntry
from session_schedule.session.port import (
    LogEntry,
    SessionHandle,
    SessionHeader,
    SessionListing,
    SessionStore,
    schedule_changes,
)

logger = logging.getLogger(__name__)

ModelFactory: TypeAlias = Callable[[], Model]
"""Makes the model of one live Session (``None`` instead of a factory: offline mode)."""

DEFAULT_MAX_PENDING: Final = 1000
PAGE_TURNS: Final = 100
"""The most transcript turns in one page (the newest page is what opening a Session shows)."""
MAX_PAGE_ENTRIES: Final = WINDOW
"""The most log entries read for one page (a page has fewer turns when there are more entries).
As many as a Session opened from its checkpoint holds decoded before the checkpoint, so the
newest page never reads the history before them."""
_REAL_TIME: Final = SystemClock()
"""The clock of waits for other processes, which live in real time whatever the server's."""
REOPEN_INITIAL_SECONDS: Final = 1.0
REOPEN_MAX_SECONDS: Final = 30.0
HANDOVER_LINE: Final = (
    "another process holds this session (the host answering a reminder, say) and is asked to "
    "hand it over; it opens here within seconds…"
)
"""What a page shows while the server waits for a Session another process holds."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class LiveLimits:
    """How many Sessions the server keeps live, and for how long without use."""

    max_live: int = 100
    """Live Sessions at most (each holds a file descriptor or three, a task and its memory)."""
    idle_seconds: int = 1800
    """A Session not in use is closed after this long without a request or a subscriber."""
    max_streams: int = 64
    """Open event streams at most, every Session together (each holds a connection for as long
    as its page is open). Kept below the server's connection limit — the server lowers it to
    half that limit if need be — so open pages never take every connection."""
    busy_wait_seconds: float = 5.0
    """Opening a Session another process holds waits this long (in real time) for it — a host
    hands it over within about 2 s once asked — before the request is answered 409. Other
    Sessions' opens wait meanwhile."""


@final
class TurnView(msgspec.Struct, frozen=True, kw_only=True):
    """One transcript turn as the page receives it."""

    position: int
    """Its position in the Session's log: its identity, and what ``fork`` counts."""
    message: MessageEntry


@final
class TurnPage(msgspec.Struct, frozen=True, kw_only=True):
    """Consecutive transcript turns, oldest first, and where the earlier ones are."""

    turns: list[TurnView]
    before: int | None
    """The ``before`` that asks for the turns before these; ``None`` when there are none."""


@final
class Notice(msgspec.Struct, frozen=True, kw_only=True):
    """A problem the harness reports (the model endpoint failed, …): shown, never stored."""

    text: str


StreamItem: TypeAlias = TurnView | Notice


@final
class Subscription:
    """The events of one live Session for one page, in order, until closed."""

    def __init__(self, *, max_pending: int) -> None:
        self._items: deque[StreamItem] = deque()
        self._ready = asyncio.Event()
        self._max_pending = max_pending
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def push(self, item: StreamItem) -> None:
        """Queue ``item``; a subscriber with too much pending is closed instead (it resumes)."""
        if self._closed:
            return
        if len(self._items) >= self._max_pending:
            logger.warning("a page fell %d events behind; its stream is closed", len(self._items))
            self.close()
            return
        self._items.append(item)
        self._ready.set()

    def close(self) -> None:
        self._closed = True
        self._ready.set()

    async def next(self, timeout: float) -> StreamItem | None:
        """The next item, or ``None`` after ``timeout`` seconds without one.

        Raises :class:`SubscriptionClosed` once closed and drained.
        """
        if not self._items and not self._closed:
            self._ready.clear()
            try:
                async with asyncio.timeout(timeout):
                    await self._ready.wait()
            except TimeoutError:
                return None
        if self._items:
            return self._items.popleft()
        raise SubscriptionClosed


@final
class SubscriptionClosed(Exception):  # noqa: N818 - a state, not an error
    """The subscription was closed: the Session closed, the server stops, or it fell behind."""


@final
class TooManyLiveSessions(Exception):  # noqa: N818 - a state, not an error
    """Every live Session is in use and there are ``max_live`` of them: no other is opened."""

    def __init__(self, max_live: int) -> None:
        super().__init__(f"{max_live} sessions are live and in use")
        self.max_live = max_live


@final
class ServerStopping(Exception):  # noqa: N818 - a state, not an error
    """No Session is opened, created or forked once the server has begun to stop."""


@final
class LiveSession:
    """One Session open in this server, with its running chat and its subscribers."""

    def __init__(self, session: SessionHandle, *, max_pending: int) -> None:
        self._session = session
        self._max_pending = max_pending
        self._subscribers: set[Subscription] = set()
        self._stack = AsyncExitStack()
        self._chat: LiveChat | None = None
        self._folded: tuple[ScheduleFold, int] | None = None
        """The fold of the log's changes and how many entries it has read (see :meth:`state`)."""
        self.last_used: Instant | None = None
        """When a request last used it (set by :class:`LiveSessions`)."""

    @property
    def id(self) -> SessionId:
        return self._session.id

    @property
    def header(self) -> SessionHeader:
        return self._session.header

    @property
    def session(self) -> SessionHandle:
        return self._session

    @property
    def chat(self) -> LiveChat:
        if self._chat is None:
            raise RuntimeError("the session's chat is not running")
        return self._chat

    @property
    def end(self) -> int:
        """How many entries the Session's log has: the position its next turn can have."""
        return len(self._session.entries)

    def page(self, before: int | None = None, limit: int = PAGE_TURNS) -> TurnPage:
        """The last ``limit`` turns before position ``before`` (the end of the log when
        ``None``); at most :data:`MAX_PAGE_ENTRIES` entries are read."""
        earlier, entries = recent_turns(
            self._session.entries, limit, end=before, max_entries=MAX_PAGE_ENTRIES
        )
        return TurnPage(turns=_views(entries), before=earlier or None)

    def state(self) -> ScheduleFold:
        """The fold of the log's changes, as :func:`~session_schedule.core.fold.fold` of the
        whole log makes it, in a copy of its own: the page polls the timeline while a reminder
        is overdue, so the fold is kept between calls and reads only the entries appended since
        (the copy costs what the active reminders do). Raises ``corrupt_schedule_log`` as the
        fold does."""
        header, entries = self._session.header, self._session.entries
        state, read = self._folded or (ScheduleFold(session=header.id), 0)
        self._folded = None  # until the replay has succeeded: it may stop half-way
        state.replay(schedule_changes(entries[read:]), seed_length=header.seed_length)
        self._folded = state, len(entries)
        return ScheduleFold.resumed(
            state.by_creation(),
            highest_id=state.highest_id,
            session=header.id,
            statuses=state.statuses().items(),
        )

    @property
    def healthy(self) -> bool:
        """Whether the handle and the Schedule still work (else: reopen from storage)."""
        chat = self._chat
        return (
            chat is not None
            and not self._session.closed
            and not self._session.poisoned
            and chat.failure is None
        )

    async def start(self, *, model: Model | None, clock: Clock, settings: Settings | None) -> None:
        """Run the chat (agent, Schedule, tools) on the Session; raises what ``live_chat`` does."""
        self._chat = await self._stack.enter_async_context(
            live_chat(
                self._session,
                model=model,
                clock=clock,
                settings=settings,
                on_event=self._on_event,
            )
        )

    def subscribe(self, start: int) -> tuple[list[TurnView], Subscription]:
        """The turns from position ``start`` on, and a subscription to every later event."""
        subscription = Subscription(max_pending=self._max_pending)
        self._subscribers.add(subscription)
        return _views(self._session.entries[max(start, 0) :]), subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscribers.discard(subscription)

    async def in_use(self) -> bool:
        """Whether closing it now would stop something: active reminders, a busy agent, a page
        subscribed. If not, its agent is left in a maintenance phase, so nothing can start
        before it is closed; call this only to close it."""
        if self._subscribers or not self.healthy:
            return bool(self._subscribers)
        try:
            _now, active = await self.chat.schedule.active()
        except Exception:  # a Schedule that cannot answer is reopened from storage anyway
            return False
        if active or self._subscribers:
            return True
        return not self.chat.agent.begin_maintenance()

    def notify(self, text: str) -> None:
        """Tell every page ``text`` (shown, never stored)."""
        self._on_event(ChatEvent(kind="error", text=text))

    def close_streams(self) -> None:
        for subscription in self._subscribers:
            subscription.close()
        self._subscribers.clear()

    async def close(self) -> None:
        """Stop the chat and its Schedule, end the streams and release the Session."""
        self.close_streams()
        try:
            await self._stack.aclose()
        finally:
            self._chat = None
            await self._session.close()

    def _on_event(self, event: ChatEvent) -> None:
        if event.kind == "message" and event.message is not None:
            # The harness reports a message right after appending it: it is the last entry.
            item: StreamItem = TurnView(
                position=len(self._session.entries) - 1, message=event.message
            )
        else:
            item = Notice(text=event.text)
        for subscription in list(self._subscribers):
            subscription.push(item)
            if subscription.closed:
                self._subscribers.discard(subscription)


@final
class LiveSessions:
    """The Sessions this server keeps live; opened on demand, all closed by :meth:`close`."""

    def __init__(
        self,
        store: SessionStore,
        *,
        model: ModelFactory | None,
        clock: Clock | None = None,
        settings: Settings | None = None,
        max_pending: int = DEFAULT_MAX_PENDING,
        limits: LiveLimits | None = None,
    ) -> None:
        self._store = store
        self._limits = limits or LiveLimits()
        self._model = model
        self._clock = clock or SystemClock()
        self._settings = settings
        self._max_pending = max_pending
        self._live: dict[SessionId, LiveSession] = {}
        self._waiting: set[SessionId] = set()
        """Sessions another process holds that an open is waiting for (read without the lock,
        which the waiting open holds)."""
        self._lock = asyncio.Lock()
        self._closed = False
        self._watchers: set[asyncio.Task[None]] = set()

    @property
    def offline(self) -> bool:
        """Whether no model answers (the person drives the tools)."""
        return self._model is None

    @property
    def limits(self) -> LiveLimits:
        return self._limits

    @property
    def closing(self) -> bool:
        """Whether the server has begun to stop."""
        return self._closed

    def is_live(self, session_id: SessionId) -> bool:
        return session_id in self._live

    def handover_line(self, session_id: SessionId) -> str | None:
        """:data:`HANDOVER_LINE` while an open of ``session_id`` waits for another process to
        hand it over; ``None`` otherwise."""
        return HANDOVER_LINE if session_id in self._waiting else None

    def live_session(self, session_id: SessionId) -> LiveSession | None:
        """The Session live here under ``session_id`` (healthy or not), without opening it."""
        return self._live.get(session_id)

    async def scan(self) -> SessionListing:
        """Every stored Session's header, and the Sessions whose header cannot be read."""
        return await self._store.scan()

    async def get(self, session_id: SessionId) -> LiveSession:
        """The live Session ``session_id``, opened from storage when it is not live here yet (or
        no longer healthy). Raises what the store's ``open`` and ``live_chat`` raise, and
        :class:`ServerStopping`."""
        async with self._lock:
            live = self._live.get(session_id)
            if live is not None and live.healthy:
                live.last_used = self._clock.now()
                return live
            self._refuse_when_closing()
            if live is not None:
                logger.warning("session %s is no longer usable here; reopening it", session_id)
                del self._live[session_id]
                await _close_quietly(live)
            await self._make_room()

            # A host holding the session hands it over within seconds once asked; the page
            # asks meanwhile what is happening (handover_line).
            def waiting(text: str) -> None:
                logger.warning("%s", text)
                self._waiting.add(session_id)

            try:
                handle = await open_when_free(
                    self._store,
                    session_id,
                    clock=_REAL_TIME,
                    wait_seconds=self._limits.busy_wait_seconds,
                    note=waiting,
                )
            finally:
                self._waiting.discard(session_id)
            return await self._start(handle)

    async def create(self) -> LiveSession:
        """A new, empty Session, live."""
        async with self._lock:
            self._refuse_when_closing()
            await self._make_room()
            return await self._start(await self._store.create(now=self._clock.now()))

    async def fork(self, parent_id: SessionId, at: int | None) -> LiveSession:
        """A new Session seeded with the first ``at`` log entries of ``parent_id`` (all of them
        when ``None``), live. A parent live here is made durable first, so nothing is missed.

        Raises ``ValueError`` when ``at`` is beyond the parent's entries, ``ForkCutError`` (a
        ``ValueError``) when the cut would part a tool call from its results, and what the
        store's ``fork`` raises.
        """
        async with self._lock:
            self._refuse_when_closing()
            parent = self._live.get(parent_id)
            if parent is not None and parent.healthy:
                await parent.session.barrier()
            check_fork_cut(parent_id, (await self._store.read(parent_id)).entries, at)
            await self._make_room()
            handle = await self._store.fork(parent_id, at=at, now=self._clock.now())
            return await self._start(handle)

    def close_streams(self) -> None:
        """End every page's event stream: the server is about to stop (Sessions live already
        keep working until :meth:`close`; no other is opened)."""
        self._closed = True
        for live in self._live.values():
            live.close_streams()

    async def close(self) -> None:
        """Close every live Session."""
        self._closed = True
        watchers, self._watchers = self._watchers, set()
        for watcher in watchers:
            watcher.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
        async with self._lock:
            lives, self._live = list(self._live.values()), {}
            for live in lives:
                await _close_quietly(live)

    def touch(self, live: LiveSession) -> None:
        """Mark ``live`` as used now."""
        live.last_used = self._clock.now()

    async def sweep(self) -> None:
        """Close every live Session not in use that has been idle for ``idle_seconds``."""
        async with self._lock:
            cutoff = self._clock.now() - self._limits.idle_seconds * 1000
            for live in sorted(self._live.values(), key=_last_used):
                if _last_used(live) > cutoff:
                    break
                if not await live.in_use():
                    await self._retire(live, "idle")

    async def _make_room(self) -> None:
        """Close the least recently used Session not in use when another would pass
        ``max_live``; raises :class:`TooManyLiveSessions` when every one is in use."""
        if len(self._live) < self._limits.max_live:
            return
        for live in sorted(self._live.values(), key=_last_used):
            if not await live.in_use():
                await self._retire(live, "the least recently used")
                return
        raise TooManyLiveSessions(self._limits.max_live)

    async def _retire(self, live: LiveSession, why: str) -> None:
        del self._live[live.id]
        logger.info("session %s is closed here (%s, not in use); it opens on demand", live.id, why)
        await _close_quietly(live)

    def _refuse_when_closing(self) -> None:
        if self._closed:
            raise ServerStopping

    async def _start(self, handle: SessionHandle) -> LiveSession:
        live = LiveSession(handle, max_pending=self._max_pending)
        if self._closed:
            await _close_quietly(live)
            raise ServerStopping
        try:
            await live.start(
                model=self._model() if self._model is not None else None,
                clock=self._clock,
                settings=self._settings,
            )
        except BaseException:
            await _close_quietly(live)
            raise
        live.last_used = self._clock.now()
        self._live[live.id] = live
        logger.info("session %s is live", live.id)
        watcher = asyncio.create_task(self._watch(live, live.chat), name=f"watch {live.id}")
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        return live

    async def _watch(self, live: LiveSession, chat: LiveChat) -> None:
        """Reopen ``live`` from storage once its storage fails, retrying with back-off."""
        failure = await chat.wait_failure()
        if failure is None or self._closed:
            return
        logger.error("session %s stopped delivering: %s", live.id, failure)
        live.notify(
            f"storage failed ({failure}); reminders are paused while the session is reopened "
            "from storage"
        )
        delay = REOPEN_INITIAL_SECONDS
        while not self._closed:
            try:
                await self.get(live.id)
            except ServerStopping:
                return
            except Exception as error:
                logger.error(  # noqa: TRY400 - the cause is the message
                    "reopening session %s failed: %s; retrying in %g s", live.id, error, delay
                )
                await self._clock.sleep(delay)
                delay = min(delay * 2, REOPEN_MAX_SECONDS)
            else:
                logger.info("session %s reopened from storage; reminders resume", live.id)
                return


async def _close_quietly(live: LiveSession) -> None:
    try:
        await live.close()
    except Exception:
        logger.exception("closing session %s failed", live.id)


def _last_used(live: LiveSession) -> int:
    return live.last_used if live.last_used is not None else MIN_INSTANT


def _views(entries: Sequence[LogEntry]) -> list[TurnView]:
    return [
        TurnView(position=entry.position, message=entry.payload)
        for entry in entries
        if entry.type == MESSAGE_ENTRY_TYPE and isinstance(entry.payload, MessageEntry)
    ]
