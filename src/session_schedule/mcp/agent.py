"""The Agent port for a host that pulls its follow-ups: :class:`PullAgent`.

A generic MCP client cannot be handed a turn: the server can only answer requests. So here the
agent is "idle and accepting" exactly while a host request for a follow-up — a *take* — is
waiting, and at no other time:

- ``wait_idle()`` is called by the live Schedule's owner only when something is due. The agent
  announces that a follow-up is pending (the ``announce`` callback; the MCP server sends
  ``notifications/resources/updated`` and a log message) and returns once a take is waiting.
- ``begin_maintenance()`` succeeds only while a take is waiting, and binds that take to the
  phase.
- ``followup(text)`` hands ``text`` to the bound take — that hand-over is the synchronous queue
  acceptance after which the owner appends the dispatch. If the take has gone (the host
  cancelled it, or it timed out), ``followup`` raises, so no dispatch is recorded and the
  reminder stays due.
- ``end_maintenance()`` answers a bound take that got nothing (nothing was due at the decision
  time) with ``None``.

So the owner's discipline is unchanged — one queue, barriers, one decision time, at-least-once —
and a follow-up nobody takes is never dispatched: it stays due, across restarts too.

Handed over is not yet received. The owner records the dispatch right after the hand-over, but
the host has the text only once the take's answer has gone out — and has *kept* it: a client that
cancelled the take drops its late answer, as the MCP specification says. A take cancelled in
between, an answer that is never sent or is dropped, or a crash of the process in between would
leave a reminder recorded as dispatched that no host has seen. So every handed-over text is
*undelivered* until its taker says the host has it (:meth:`PullAgent.delivered`):

- ``followup(text)`` adds ``text`` to the undelivered ones, and with an ``outbox`` file starts
  writing them there durably (written whole, flushed to disk, renamed into place, the directory
  flushed) on a worker thread, so the event loop goes on reading requests meanwhile. The owner
  awaits that write (:meth:`PullAgent.handed_over`) before it appends the dispatch, and the take
  returns the text only once it is done. If the write fails, nothing is recorded and the take
  gets nothing.
- a take cancelled after the hand-over, or a taker that could not send the text
  (:meth:`PullAgent.requeue`), leaves it undelivered and re-offered: the next take returns it
  before anything newly due; a text the host was thought to have, whose take turns out to have
  been cancelled, is offered again too (:meth:`PullAgent.reoffer`);
- a process that restarts on the same outbox re-offers every text in it, except those whose
  occurrences the schedule is about to deliver again (:meth:`PullAgent.discard`).

The outbox holds prompt text: it is written ``0600`` whatever the umask, through a temporary
file that is never a link, and read as the session files are — a symbolic link, FIFO or device
in its place, or a file past :data:`MAX_OUTBOX_BYTES`, is refused
(:class:`OutboxCorruptError`), never followed, waited on or read whole
(:mod:`session_schedule.session.private`). Its directory is made before the session is opened
(:func:`outbox_directory`): missing, it is created ``0700`` with every missing parent, whatever
the umask; one that cannot be made stops the server at start (:class:`OutboxDirectoryError`),
not every take.

A text is removed from the outbox only by :meth:`PullAgent.delivered`. A crash before that
removal offers the text again after the restart, with the same occurrence key: delivery stays
at-least-once, never at-most-once.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final, final

import msgspec

from session_schedule.runtime.clock import Clock, SystemClock
from session_schedule.session.private import (
    NotPrivateFile,
    private_directory,
    read_private,
    sync_directory,
    write_private,
)

logger = logging.getLogger(__name__)

MAX_OUTBOX_BYTES: Final = 64 * 1024 * 1024
"""The largest outbox read: far more undelivered follow-ups than a session's budget allows."""


@final
class FollowupNotTakenError(Exception):
    """``followup()`` found no waiting take to hand the follow-up to; nothing was accepted."""


@final
class OutboxCorruptError(Exception):
    """The outbox file of undelivered follow-ups cannot be read as one."""


@final
class OutboxDirectoryError(Exception):
    """The directory of the outbox cannot be made or is not a directory."""


def outbox_directory(directory: Path) -> None:
    """Make ``directory`` the outbox's: left as it is when it is a directory, else created
    ``0700`` with every missing parent (whatever the umask), durably. Raises
    :class:`OutboxDirectoryError` saying why it cannot be."""
    try:
        if directory.is_dir():
            return
        private_directory(directory)
        sync_directory(directory.parent)
    except OSError as error:
        raise OutboxDirectoryError(
            f"the outbox of undelivered follow-ups cannot be kept in {directory} "
            f"({error.strerror or error})"
        ) from None


@final
class PullAgent:
    """An :class:`~session_schedule.runtime.Agent` whose follow-ups are taken, not pushed.

    ``announce`` is awaited whenever the owner starts waiting with something due and no take is
    waiting; an exception from it is logged and does not stop delivery. ``clock`` times the
    takes' waits (the system clock by default; a fake one in tests). ``outbox`` is the file
    that keeps the handed-over follow-ups not yet :meth:`delivered` across a crash; the texts
    it holds are re-offered first. Without it they are kept in memory only.

    Raises :class:`OutboxCorruptError` when ``outbox`` exists and is not a JSON array of
    strings.
    """

    def __init__(
        self,
        announce: Callable[[], Awaitable[None]] | None = None,
        *,
        clock: Clock | None = None,
        outbox: Path | None = None,
    ) -> None:
        self._announce = announce
        self._clock = clock or SystemClock()
        self._takers: deque[asyncio.Future[str | None]] = deque()
        self._outbox = outbox
        self._undelivered: list[str] = [] if outbox is None else _read_outbox(outbox)
        self._unclaimed: deque[str] = deque(self._undelivered)
        self._signal = asyncio.Event()
        self._in_phase = False
        self._phase_taker: asyncio.Future[str | None] | None = None
        self._recheck = False
        self._owner_waiting = False
        self._last_write: asyncio.Future[None] | None = None
        self._handing_over: asyncio.Future[None] | None = None
        self._handovers: dict[str, asyncio.Future[None]] = {}
        """The outbox writes of texts handed over, until each is done."""

    @property
    def unclaimed(self) -> int:
        """How many accepted follow-ups wait to be offered again (their take was cancelled or
        could not send them, or the process restarted before they went out)."""
        return len(self._unclaimed)

    @property
    def undelivered(self) -> tuple[str, ...]:
        """The follow-ups handed over and not yet :meth:`delivered`, oldest first."""
        return tuple(self._undelivered)

    async def delivered(self, *texts: str) -> None:
        """Say that each of ``texts``, returned by a take, has reached the host: they are no
        longer re-offered, and leave the outbox (written off the event loop)."""
        if any(text not in self._undelivered for text in texts):
            raise ValueError("delivered() names a text that no take has returned")
        for text in texts:
            self._undelivered.remove(text)
        if texts:
            await self._persist()

    def requeue(self, text: str) -> None:
        """Say that ``text``, returned by a take, did not reach the host: the next take returns
        it again."""
        if text not in self._undelivered:
            raise ValueError("requeue() names a text that no take has returned")
        logger.warning("a follow-up did not reach the host; the next take receives it again")
        self._unclaimed.appendleft(text)

    async def reoffer(self, text: str) -> None:
        """Say that ``text``, already :meth:`delivered`, did not reach the host after all (its
        take was cancelled and the host dropped the answer): it is undelivered again, in the
        outbox, and the next take returns it."""
        logger.warning(
            "a follow-up went out for a take that its host had cancelled; "
            "the next take receives it again"
        )
        if text not in self._undelivered:
            self._undelivered.append(text)
        if text not in self._unclaimed:
            self._unclaimed.appendleft(text)
        await self._persist()

    async def discard(self, text: str) -> None:
        """Stop offering ``text``, undelivered: what it carried is delivered afresh instead
        (the dispatch never became durable, so the schedule still has it due)."""
        if text not in self._undelivered:
            raise ValueError("discard() names a text that is not undelivered")
        self._undelivered.remove(text)
        if text in self._unclaimed:
            self._unclaimed.remove(text)
        await self._persist()

    @property
    def waiting_takes(self) -> int:
        """How many takes are waiting for the owner."""
        return sum(1 for taker in self._takers if not taker.done())

    async def take(self, *, timeout: float) -> str | None:
        """Wait up to ``timeout`` seconds for the owner to hand over the next follow-up.

        Returns its text, or ``None`` when nothing was handed over (nothing was due when the
        owner decided, or the time ran out — then nothing was accepted and the reminder is still
        due). A follow-up that is waiting to be offered again is returned first. A follow-up that
        was accepted for a take that was then cancelled is kept and returned by the next take.
        The text returned stays undelivered until the caller passes it to :meth:`delivered`
        (or, if it could not send it on, to :meth:`requeue`).
        """
        if self._unclaimed:
            again = self._unclaimed.popleft()
            try:
                return again if await self._written(again) else None
            except asyncio.CancelledError:
                self._unclaimed.appendleft(again)
                raise
        taker: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._takers.append(taker)
        self._signal.set()
        sleeper = asyncio.ensure_future(self._clock.sleep(timeout))
        try:
            # ``asyncio.wait`` leaves the taker alone when this take is cancelled, so an
            # accepted follow-up can still be read from it below.
            waits: set[asyncio.Future[str | None] | asyncio.Future[None]] = {taker, sleeper}
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            text = taker.result() if taker.done() and not taker.cancelled() else None
            written = text is None or await self._written(text)
        except asyncio.CancelledError:
            if taker.done() and not taker.cancelled():
                accepted = taker.result()
                if accepted is not None and accepted in self._undelivered:
                    logger.warning(
                        "a follow-up was accepted for a take that was then cancelled; "
                        "the next take receives it"
                    )
                    self._unclaimed.append(accepted)
            raise
        else:
            return text if written else None
        finally:
            sleeper.cancel()
            if not taker.done():
                taker.cancel()
            if taker in self._takers:
                self._takers.remove(taker)

    def recheck(self) -> None:
        """Let an owner that is waiting for a take look again at what is due.

        Call it when what it waits to deliver may have gone (a delete): the owner then finds
        nothing due and goes back to sleeping until the next target, instead of waiting for a
        take that would get nothing.
        """
        if self._owner_waiting:
            self._recheck = True
            self._signal.set()

    # -- the Agent port ----------------------------------------------------------------------

    async def wait_idle(self) -> None:
        """Announce the pending follow-up, then return once a take is waiting (or a
        :meth:`recheck` asks the owner to look again)."""
        if not self._has_taker() and self._announce is not None:
            try:
                await self._announce()
            except Exception:
                logger.exception("announcing a pending follow-up failed")
        self._owner_waiting = True
        try:
            while not self._has_taker() and not self._recheck:
                self._signal.clear()
                await self._signal.wait()
        finally:
            self._owner_waiting = False

    def begin_maintenance(self) -> bool:
        if self._in_phase:
            return False
        while self._takers and self._takers[0].done():
            self._takers.popleft()
        if self._takers:
            self._phase_taker = self._takers.popleft()
        elif self._recheck:
            self._phase_taker = None
        else:
            return False
        self._recheck = False
        self._in_phase = True
        return True

    def end_maintenance(self) -> None:
        if not self._in_phase:
            raise RuntimeError("end_maintenance without a maintenance phase")
        taker, self._phase_taker = self._phase_taker, None
        self._in_phase = False
        if taker is not None and not taker.done():
            taker.set_result(None)

    def followup(self, message: str) -> None:
        if not self._in_phase:
            raise RuntimeError("followup() outside a maintenance phase")
        taker = self._phase_taker
        if taker is None:
            raise FollowupNotTakenError("no host is waiting to take a follow-up")
        if taker.done():
            raise FollowupNotTakenError("the take ended before the follow-up was accepted")
        self._undelivered.append(message)
        if self._outbox is not None:
            handing_over = asyncio.ensure_future(self._hand_over(message))
            self._handing_over = self._handovers[message] = handing_over
            handing_over.add_done_callback(lambda _: self._handovers.pop(message, None))
        taker.set_result(message)

    async def handed_over(self) -> None:
        """Return once the follow-up just handed over is in the outbox durably; raise (so that
        no dispatch is recorded) when that write failed."""
        handing_over, self._handing_over = self._handing_over, None
        if handing_over is not None:
            await asyncio.shield(handing_over)

    async def _hand_over(self, message: str) -> None:
        try:
            await self._persist()
        except BaseException:
            if message in self._undelivered:
                self._undelivered.remove(message)
            if message in self._unclaimed:
                self._unclaimed.remove(message)
            raise

    async def _written(self, text: str) -> bool:
        """Wait until the hand-over of ``text`` is durable; whether it became so."""
        handing_over = self._handovers.get(text)
        if handing_over is None:
            return text in self._undelivered
        try:
            await asyncio.shield(handing_over)
        except Exception:
            return False
        return True

    async def _persist(self) -> None:
        """Make the outbox hold exactly the undelivered texts, durably, on a worker thread.

        Writes run one after another, each of the texts as they are when it starts, so the last
        write leaves the latest state. A caller cancelled while it waits leaves its write to
        finish: a write is never abandoned halfway, nor overlapped by the next."""
        path = self._outbox
        if path is None:
            return
        previous = self._last_write

        async def write() -> None:
            if previous is not None:
                await asyncio.wait({previous})  # its own caller hears how it ended
            await _off_loop(_write_outbox, path, list(self._undelivered))

        task = asyncio.ensure_future(write())
        task.add_done_callback(_heard)
        self._last_write = task
        await asyncio.shield(task)

    def _has_taker(self) -> bool:
        return any(not taker.done() for taker in self._takers)


def _heard(write: asyncio.Future[None]) -> None:
    """Retrieve how ``write`` ended, so that a failure whose caller was cancelled is not
    reported as never retrieved (its caller, or the next write, has been told)."""
    if not write.cancelled():
        write.exception()


async def _off_loop(write: Callable[[Path, list[str]], None], path: Path, texts: list[str]) -> None:
    """Run ``write(path, texts)`` on a worker thread: its ``fsync`` calls leave the loop free."""
    await asyncio.to_thread(write, path, texts)


def _write_outbox(path: Path, texts: list[str]) -> None:
    """Make ``path`` hold exactly ``texts``, durably (none: no file), in a file only its owner
    can read (it holds prompt text), never written through a link."""
    if not texts:
        path.unlink(missing_ok=True)
        sync_directory(path.parent)
    else:
        write_private(path, msgspec.json.encode(texts))


def _read_outbox(path: Path) -> list[str]:
    try:
        data = read_private(path, limit=MAX_OUTBOX_BYTES)
    except NotPrivateFile as error:
        raise OutboxCorruptError(
            f"the outbox of undelivered follow-ups {path} cannot be read ({error.strerror}); move "
            "it away to start without it, and any follow-up it held will not be offered again"
        ) from None
    if data is None:
        return []
    try:
        return msgspec.json.decode(data, type=list[str])
    except msgspec.DecodeError as error:
        raise OutboxCorruptError(
            f"the outbox of undelivered follow-ups {path} is corrupt ({error}); move it away to "
            "start without it, and any follow-up it held will not be offered again"
        ) from None
