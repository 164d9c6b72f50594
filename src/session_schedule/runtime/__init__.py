"""The asyncio shell: the clock, the Agent port, the agent-scoped queue, the live Schedule and
its operator events, and the turn queue (the Agent port over a host's ``run_turn``)."""

from session_schedule.runtime.agent import Agent as Agent
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
