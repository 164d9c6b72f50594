"""The worst reminder loop a model can build, over a simulated day: how many model turns it
runs, and how large its requests get.

    python3 dev.py bench self_rearming [--hours H] [--budget CHARS]
        [--fan-out | --stagger | --snooze | --list] [--turns-per-day N]

A reminder runs a model turn no person watches. The scripted model here answers every reminder
turn by creating the same reminder again, due one second later (``after_seconds: 1``), and then
says so: a reminder that re-creates itself from its own turn, forever — until the chain depth
(``limits.max_chain_depth``) refuses the create. With ``--fan-out`` it creates a new
``every_seconds: 300`` reminder from every turn instead: the chains stay short, but they
multiply up to ``limits.max_active`` reminders. With ``--snooze`` the person's prompt sets an
``every_seconds: 300`` reminder and the model snoozes it by one second from each of its turns: a
reminder that keeps itself coming back by updating itself — until the chain depth refuses the
update too (an update made during a reminder turn makes the reminder as deep as that turn). With
``--stagger`` each new reminder's period is one second longer than the last (``every_seconds:
301``, ``302``, …), so they drift apart and come due one by one instead of in one batch: the
worst loop this benchmark builds, held only by the follow-up budget and ``max_active`` — and by
the quota a person sets for the session, ``--turns-per-day N`` here (``set_quota``). With
``--list`` the session holds 100 reminders of 4,000 characters (``every_seconds`` 300 to 399, so
they come due apart) and the model answers every turn by calling ``schedule_list``, as a batch
frame that lists prompts by id tells it to: the request size a listing adds over a day. The
reference harness
runs it in virtual time (the library's fake clock), with the default Settings, on an in-memory
session, for H simulated hours (24 by default). Printed: the reminder turns and model requests
run, per day; the largest request in characters against the request budget; the CPU time taken.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass, field

import msgspec

from session_schedule.harness.chat import live_chat
from session_schedule.harness.model import ChatMessage, ModelReply
from session_schedule.harness.transcript import DEFAULT_MAX_CONTEXT_CHARS
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.message import ToolCall
from session_schedule.testing.clock import FakeClock

START = "2026-11-29T20:00:00.000Z"
REARM = '{"prompt": "check the build, then set this reminder again", "after_seconds": 1}'
FAN_OUT = '{"prompt": "check the build, then set another reminder", "every_seconds": 300}'
EVERY = '{"prompt": "check the build, then snooze this reminder", "every_seconds": 300}'
SNOOZE = '{"id": "sch_1", "snooze": {"after_seconds": 1}}'


@dataclass
class RearmingModel:
    """Creates the reminder again whenever it is asked anything, then says it did."""

    requests: int = 0
    largest: int = 0
    calls: int = field(default=0)
    arguments: str = REARM
    snooze: bool = False
    stagger: bool = False
    list_all: bool = False

    @property
    def name(self) -> str:
        return "rearming"

    async def respond(
        self, messages: list[ChatMessage], tools: list[dict[str, object]]
    ) -> ModelReply:
        del tools
        self.requests += 1
        size = sum(len(msgspec.json.encode(message)) for message in messages)
        self.largest = max(self.largest, size)
        if messages[-1].get("role") == "tool":
            return ModelReply(content="Checked; the reminder is set again.")
        self.calls += 1
        if self.list_all:
            call = ToolCall(id=f"call_{self.calls}", name="schedule_list", arguments="{}")
            return ModelReply(content="", tool_calls=(call,))
        if self.snooze and self.calls > 1:
            call = ToolCall(id=f"call_{self.calls}", name="schedule_update", arguments=SNOOZE)
            return ModelReply(content="", tool_calls=(call,))
        arguments = EVERY if self.snooze else self.arguments
        if self.stagger:
            arguments = (
                '{"prompt": "check the build, then set another reminder", '
                f'"every_seconds": {300 + self.calls}}}'
            )
        call = ToolCall(id=f"call_{self.calls}", name="schedule_create", arguments=arguments)
        return ModelReply(content="", tool_calls=(call,))


async def simulate(
    hours: float,
    budget: int,
    *,
    fan_out: bool = False,
    snooze: bool = False,
    stagger: bool = False,
    list_all: bool = False,
    turns_per_day: int | None = None,
) -> tuple[RearmingModel, int]:
    model = RearmingModel(
        arguments=FAN_OUT if fan_out else REARM,
        snooze=snooze,
        stagger=stagger,
        list_all=list_all,
    )
    clock = FakeClock(START)
    session = await MemorySessionStore().create(now=clock.now())
    async with live_chat(session, model=model, clock=clock, max_context_chars=budget) as live:
        if turns_per_day is not None:
            await live.schedule.set_quota("turns_per_day", turns_per_day)
        for index in range(100 if list_all else 0):
            prompt = f"reminder {index} " + "w" * 3_980
            await live.tools.call(
                "schedule_create", {"prompt": prompt, "every_seconds": 300 + index}
            )
        live.agent.submit("check the build every second, forever")
        seconds = int(hours * 3600)
        for _ in range(seconds):
            await live.agent.wait_idle()
            await live.schedule.settled()
            clock.advance(1)
            await live.schedule.settled()
        await live.agent.wait_idle()
        turns = sum(1 for turn in live.agent.transcript if turn.origin == "followup")
    await session.close()
    return model, turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--budget", type=int, default=DEFAULT_MAX_CONTEXT_CHARS)
    loop = parser.add_mutually_exclusive_group()
    loop.add_argument("--fan-out", action="store_true", help="create every_seconds reminders")
    loop.add_argument("--snooze", action="store_true", help="snooze the reminder from its turns")
    loop.add_argument("--stagger", action="store_true", help="reminders of drifting periods")
    loop.add_argument("--list", action="store_true", help="schedule_list from every turn")
    parser.add_argument("--turns-per-day", type=int, default=None, help="the session's quota")
    options = parser.parse_args()
    started = time.process_time()
    model, turns = asyncio.run(
        simulate(
            options.hours,
            options.budget,
            fan_out=options.fan_out,
            snooze=options.snooze,
            stagger=options.stagger,
            list_all=options.list,
            turns_per_day=options.turns_per_day,
        )
    )
    cpu = time.process_time() - started
    per_day = 24 / options.hours
    print(f"simulated {options.hours:g} h with a request budget of {options.budget} characters")
    print(f"reminder turns: {turns} ({turns * per_day:.0f} a day)")
    print(f"model requests: {model.requests} ({model.requests * per_day:.0f} a day)")
    print(f"largest request: {model.largest} characters ({model.largest / options.budget:.2f}x)")
    print(f"cpu: {cpu:.1f} s")


if __name__ == "__main__":
    main()
