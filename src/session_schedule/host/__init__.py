"""The many-session host: one process keeping every session with reminders live.

General layout:

- ``scheduler`` — :class:`ScheduleHost`: one timer over the next-target index of any store,
                  sessions opened shortly before they are due and closed when idle, each with
                  its own agent and a driven :class:`~session_schedule.runtime.live.LiveSchedule`;
- ``agents``    — agent factories: the reference harness (with a model, or offline), or the
                  host's own ``run_turn`` through the turn queue.

Imports flow one way: this package uses the harness, runtime, session and core layers.
"""

from session_schedule.host.agents import reference_agents as reference_agents
from session_schedule.host.agents import turn_queue_agents as turn_queue_agents
from session_schedule.host.scheduler import AgentFactory as AgentFactory
from session_schedule.host.scheduler import HostSettings as HostSettings
from session_schedule.host.scheduler import HostStats as HostStats
from session_schedule.host.scheduler import ScheduleHost as ScheduleHost
