"""The Agent port: the little Schedule needs from the agent it serves (SPEC §6).

Schedule never steers and never interrupts a turn. It waits until the agent is fully idle, takes
a maintenance phase (while it is held no turn starts), queues exactly one follow-up turn, and
lets go. A host implements this Protocol over its own agent loop — or hands its
``run_turn`` to :class:`~session_schedule.runtime.turns.TurnQueue`, which implements it.

``followup``, ``begin_maintenance`` and ``end_maintenance`` must be plain methods: an
``async def followup`` would return a coroutine nobody awaits, and the reminder would be recorded
as delivered and lost. :func:`check_agent` refuses such an agent when the live Schedule starts,
and :func:`discard_awaitable` catches one at call time.

An agent that is shutting down — closed, or closing, so that it will run no more turns — raises
:class:`AgentClosed` from ``followup()`` (or ``followup_keyed()``): Schedule records no dispatch
and keeps the reminder, as for any refusal, but quietly — a shutdown is not a failed delivery.
:class:`~session_schedule.runtime.turns.TurnQueue` raises it once it is closed.

Two methods are optional:

- ``followup_keyed(followup)``, plain like ``followup``: an agent that has one is handed the
  follow-up as a :class:`FollowUp` — the frame's text and the occurrence keys it names, as
  Schedule built them — in place of ``followup(text)``, so it never reads the keys back out of the
  text. :class:`~session_schedule.runtime.turns.TurnQueue` has one; a hand-written agent may keep
  to ``followup(text)``.
- ``async def handed_over()``. An agent that has one is awaited after ``followup()`` (or
  ``followup_keyed()``) returned and before the dispatch is appended; an exception from it means
  the turn was not accepted after all, and no dispatch is recorded. It lets an agent make its own
  record of the hand-over durable (a file and its ``fsync``) off the event loop, yet before the
  dispatch.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Final, Protocol, final

import msgspec

logger = logging.getLogger(__name__)

PLAIN_METHODS: Final = ("followup", "begin_maintenance", "end_maintenance")
ASYNC_METHODS: Final = ("wait_idle",)
OPTIONAL_PLAIN_METHODS: Final = ("followup_keyed",)
OPTIONAL_ASYNC_METHODS: Final = ("handed_over",)


class AgentClosed(RuntimeError):  # noqa: N818 - named as SessionClosed is: a state
    """The agent is closed (or closing) and takes no more turns: a follow-up it is handed is
    declined, and nothing was queued. Schedule keeps the reminder active, records no dispatch and
    logs no failure (a delivery due while a program shuts down is left for the next time the
    session is live)."""


@final
class FollowUp(msgspec.Struct, frozen=True, kw_only=True):
    """A follow-up turn as Schedule queues it: the text the model reads, and the occurrence keys
    (``id@scheduledAt``) of the reminders it delivers, in frame order — the keys the frame names."""

    text: str
    occurrences: tuple[str, ...]


class Agent(Protocol):
    async def wait_idle(self) -> None:
        """Return once the agent is fully idle: no turn running, none queued to start, and no
        maintenance phase held (by anyone)."""
        ...

    def begin_maintenance(self) -> bool:
        """Enter the maintenance phase if the agent is idle right now, and say whether it did.

        While the phase is held no turn starts. Never blocks: a due task that finds the agent
        busy gives way (a turn's own tool calls may be queued behind it) and waits for idle
        again.
        """
        ...

    def end_maintenance(self) -> None:
        """Leave the maintenance phase; a follow-up queued during it may now start."""
        ...

    def followup(self, message: str) -> None:
        """Queue ``message`` as the next follow-up turn, synchronously, or raise.

        Returning means the turn was accepted; any exception means it was not, and Schedule
        records no dispatch (the reminder stays active and is retried). :class:`AgentClosed`
        says the agent is shutting down: the same, without a failure being reported. An agent
        that also has the optional ``followup_keyed(followup: FollowUp)`` is called there
        instead, with the occurrence keys beside the same text.
        """
        ...


def check_agent(agent: object) -> None:
    """Refuse an object that cannot serve as an Agent: ``TypeError`` naming the method that is
    missing, ``async def`` where it must be plain, or plain where it must be ``async def``."""
    for name in (*PLAIN_METHODS, *ASYNC_METHODS):
        method = getattr(agent, name, None)
        if not callable(method):
            raise TypeError(f"the agent has no {name}() method")
        is_async = inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method)
        if name in ASYNC_METHODS and not is_async:
            raise TypeError(f"the agent's {name}() must be `async def`")
        if name in PLAIN_METHODS and is_async:
            raise TypeError(
                f"the agent's {name}() is `async def`; it must be a plain method that does its "
                "work before it returns (a coroutine nobody awaits would lose reminders)"
            )
    for name in OPTIONAL_PLAIN_METHODS:
        method = getattr(agent, name, None)
        if method is None:
            continue
        if not callable(method):
            raise TypeError(f"the agent's {name} is not a method")
        if inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method):
            raise TypeError(
                f"the agent's {name}() is `async def`; it must be a plain method that does its "
                "work before it returns (a coroutine nobody awaits would lose reminders)"
            )
    for name in OPTIONAL_ASYNC_METHODS:
        method = getattr(agent, name, None)
        if method is not None and not inspect.iscoroutinefunction(method):
            raise TypeError(f"the agent's {name}() must be `async def`")


def queue_followup(agent: Agent, followup: FollowUp) -> tuple[str, object]:
    """Hand ``followup`` to the agent — to its ``followup_keyed()`` when it has one, else its text
    to ``followup()`` — and say which method was called and what it returned (the port declares
    ``None``; an awaitable in its place must not be dropped unawaited: see
    :func:`discard_awaitable`)."""
    keyed = getattr(agent, "followup_keyed", None)
    if keyed is not None:
        return "followup_keyed", keyed(followup)
    plain: Callable[[str], object] = agent.followup
    return "followup", plain(followup.text)


async def handed_over(agent: object) -> None:
    """Await the agent's optional ``handed_over()``; without one, the hand-over is complete."""
    method = getattr(agent, "handed_over", None)
    if method is not None:
        await method()


def discard_awaitable(value: object, method: str) -> bool:
    """Whether ``value``, returned by the agent's ``method``, is an awaitable where a plain value
    was due; if so it is closed (never run) and the error is logged."""
    if not inspect.isawaitable(value):
        return False
    close = getattr(value, "close", None)
    if callable(close):
        close()
    logger.error(
        "the agent's %s() returned an awaitable instead of doing its work; it was discarded "
        "and nothing was recorded (write %s() as a plain method)",
        method,
        method,
    )
    return True
