"""The asyncio shell: the clock, the Agent port, the agent-scoped queue, the live Schedule and
its operator events, and the turn queue (the Agent port over a host's ``run_turn``).

The names below are loaded on first use: the clock alone does not import the live Schedule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from session_schedule.extras import lazy_exports

if TYPE_CHECKING:
    from session_schedule.runtime.agent import Agent as Agent
    from session_schedule.runtime.agent import FollowUp as FollowUp
    from session_schedule.runtime.clock import Clock as Clock
    from session_schedule.runtime.clock import SystemClock as SystemClock
    from session_schedule.runtime.events import ScheduleEvent as ScheduleEvent
    from session_schedule.runtime.events import ScheduleEvents as ScheduleEvents
    from session_schedule.runtime.live import LiveSchedule as LiveSchedule
    from session_schedule.runtime.live import Settings as Settings
    from session_schedule.runtime.queue import AgentQueue as AgentQueue
    from session_schedule.runtime.turns import RunTurn as RunTurn
    from session_schedule.runtime.turns import Turn as Turn
    from session_schedule.runtime.turns import TurnQueue as TurnQueue

_EXPORTS: Final = {
    "Agent": "session_schedule.runtime.agent",
    "FollowUp": "session_schedule.runtime.agent",
    "Clock": "session_schedule.runtime.clock",
    "SystemClock": "session_schedule.runtime.clock",
    "ScheduleEvent": "session_schedule.runtime.events",
    "ScheduleEvents": "session_schedule.runtime.events",
    "LiveSchedule": "session_schedule.runtime.live",
    "Settings": "session_schedule.runtime.live",
    "AgentQueue": "session_schedule.runtime.queue",
    "RunTurn": "session_schedule.runtime.turns",
    "Turn": "session_schedule.runtime.turns",
    "TurnQueue": "session_schedule.runtime.turns",
}
"""Each public name and the module that defines it."""

__all__ = [
    "Agent",
    "AgentQueue",
    "Clock",
    "FollowUp",
    "LiveSchedule",
    "RunTurn",
    "ScheduleEvent",
    "ScheduleEvents",
    "Settings",
    "SystemClock",
    "Turn",
    "TurnQueue",
]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
