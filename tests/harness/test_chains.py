"""A reminder that re-creates itself from its own turn stops at the chain depth."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import msgspec

from session_schedule.core.rules import Limits
from session_schedule.harness.chat import live_chat
from session_schedule.harness.model import ChatMessage, ModelReply
from session_schedule.runtime.live import Settings
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.message import ToolCall
from session_schedule.testing.clock import FakeClock

REARM = '{"prompt": "check the build, then set this reminder again", "after_seconds": 1}'


@dataclass
class RearmingModel:
    """Creates the reminder again whenever it is asked anything; keeps the tool results."""

    results: list[object] = field(default_factory=list)

    @property
    def name(self) -> str:
        return "rearming"

    async def respond(
        self, messages: list[ChatMessage], tools: list[dict[str, object]]
    ) -> ModelReply:
        del tools
        last = messages[-1]
        if last.get("role") == "tool":
            self.results.append(json.loads(str(last.get("content"))))
            return ModelReply(content="done")
        call = ToolCall(id=f"call_{len(self.results)}", name="schedule_create", arguments=REARM)
        return ModelReply(content="", tool_calls=(call,))


async def _loop(settings: Settings | None, seconds: int) -> tuple[RearmingModel, list[str]]:
    model = RearmingModel()
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    async with live_chat(session, model=model, clock=clock, settings=settings) as live:
        live.agent.submit("check the build every second, forever")
        for _ in range(seconds):
            await live.agent.wait_idle()
            await live.schedule.settled()
            clock.advance(1)
            await live.schedule.settled()
        await live.agent.wait_idle()
        followups = [turn.content for turn in live.agent.transcript if turn.origin == "followup"]
    await session.close()
    return model, followups


async def test_a_self_re_arming_reminder_stops_at_the_chain_depth() -> None:
    model, followups = await _loop(None, 60)
    # The person's prompt creates sch_1 (depth 0); its turns create sch_2..sch_4 (depths 1-3).
    assert len(followups) == 4
    assert "set during" not in followups[0]
    assert [line for line in followups[3].splitlines() if line.startswith("set during")] == [
        "set during: reminder sch_3@2026-11-29T20:00:03.000Z, not by the user"
    ]
    results = msgspec.to_builtins(model.results)
    assert [result["ok"] for result in results] == [True] * 4 + [False]
    # The view a create answers with names the reminder turn that made it.
    assert "setDuring" not in results[0]["schedule"]
    assert [result["schedule"]["setDuring"] for result in results[1:4]] == [
        "reminder sch_1@2026-11-29T20:00:01.000Z",
        "reminder sch_2@2026-11-29T20:00:02.000Z",
        "reminder sch_3@2026-11-29T20:00:03.000Z",
    ]
    assert model.results[-1] == {
        "ok": False,
        "error": {
            "code": "invalid_rule",
            "message": "a reminder set now would be 4 deep in a chain of reminders each set "
            "during the previous one's turn, deeper than this session allows (max_chain_depth "
            "= 3); do not create it, ask the user whether they want one.",
        },
    }


async def test_the_chain_depth_is_a_setting() -> None:
    model, followups = await _loop(Settings(limits=Limits(max_chain_depth=0)), 30)
    assert len(followups) == 1
    assert msgspec.to_builtins(model.results)[-1]["error"]["message"].startswith(
        "a reminder set now would be 1 deep in a chain"
    )


@dataclass
class OnceModel:
    """Sets a one-shot when the person asks, and a recurring reminder in that one's turn."""

    calls: int = 0

    @property
    def name(self) -> str:
        return "once"

    async def respond(
        self, messages: list[ChatMessage], tools: list[dict[str, object]]
    ) -> ModelReply:
        del tools
        if messages[-1].get("role") == "tool" or self.calls == 2:
            return ModelReply(content="done")
        self.calls += 1
        arguments = (
            '{"prompt": "check", "after_seconds": 60}'
            if self.calls == 1
            else '{"prompt": "check hourly", "every_seconds": 3600}'
        )
        call = ToolCall(id=f"call_{self.calls}", name="schedule_create", arguments=arguments)
        return ModelReply(content="", tool_calls=(call,))


async def test_a_listed_reminder_names_the_reminder_turn_that_created_it() -> None:
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    async with live_chat(session, model=OnceModel(), clock=clock) as live:
        live.agent.submit("check in a minute, and then every hour")
        await live.agent.wait_idle()
        clock.advance(60)
        await live.schedule.settled()
        await live.agent.wait_idle()
        _, views = await live.schedule.active()
        _, plain = await live.schedule.active_plain()
    await session.close()
    made = "reminder sch_1@2026-11-29T20:01:00.000Z"
    assert [(view.id, view.set_during) for view in views] == [("sch_2", made)]
    assert [(view["id"], view["setDuring"]) for view in plain] == [("sch_2", made)]


@dataclass
class SnoozingModel:
    """Sets a recurring reminder when the person asks; snoozes it from its own turn."""

    results: list[object] = field(default_factory=list)

    @property
    def name(self) -> str:
        return "snoozing"

    async def respond(
        self, messages: list[ChatMessage], tools: list[dict[str, object]]
    ) -> ModelReply:
        del tools
        last = messages[-1]
        if last.get("role") == "tool":
            self.results.append(json.loads(str(last.get("content"))))
            return ModelReply(content="done")
        if not self.results:
            name, arguments = "schedule_create", '{"prompt": "tick", "every_seconds": 300}'
        else:
            name, arguments = "schedule_update", '{"id": "sch_1", "snooze": {"after_seconds": 1}}'
        call = ToolCall(id=f"call_{len(self.results)}", name=name, arguments=arguments)
        return ModelReply(content="", tool_calls=(call,))


async def test_an_update_from_too_deep_a_chain_is_refused_as_a_create_is() -> None:
    model = SnoozingModel()
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    settings = Settings(limits=Limits(max_chain_depth=0))
    async with live_chat(session, model=model, clock=clock, settings=settings) as live:
        live.agent.submit("tick every five minutes")
        await live.agent.wait_idle()
        for _ in range(10):
            clock.advance(30)
            await live.schedule.settled()
            await live.agent.wait_idle()
    await session.close()
    results = msgspec.to_builtins(model.results)
    assert [result["ok"] for result in results] == [True, False]
    assert results[1]["error"]["code"] == "invalid_rule"
    assert results[1]["error"]["message"].startswith("a reminder changed now would be 1 deep")


async def test_a_reminder_cannot_keep_itself_alive_by_snoozing_itself() -> None:
    # Each snooze from the reminder's own turn makes it one deeper, as a re-create would: the
    # loop stops at the chain depth (3) instead of running every second forever.
    model = SnoozingModel()
    clock = FakeClock("2026-11-29T20:00:00.000Z")
    session = await MemorySessionStore().create(now=clock.now())
    async with live_chat(session, model=model, clock=clock) as live:
        live.agent.submit("tick every five minutes")
        await live.agent.wait_idle()
        for _ in range(360):
            clock.advance(1)
            await live.schedule.settled()
            await live.agent.wait_idle()
        _, views = await live.schedule.active()
    await session.close()
    results = msgspec.to_builtins(model.results)
    assert [result["ok"] for result in results] == [True] * 4 + [False]
    # The view an update answers with names the reminder turn that changed it last.
    assert [result["schedule"].get("setDuring") for result in results[1:4]] == [
        "reminder sch_1@2026-11-29T20:05:00.000Z",
        "reminder sch_1@2026-11-29T20:10:00.000Z",
        "reminder sch_1@2026-11-29T20:15:00.000Z",
    ]
    assert results[4]["error"] == {
        "code": "invalid_rule",
        "message": "a reminder changed now would be 4 deep in a chain of reminders each set or "
        "changed during the previous one's turn, deeper than this session allows (max_chain_depth "
        "= 3); leave it as it is, ask the user whether they want it changed.",
    }
    assert [view.set_during for view in views] == ["reminder sch_1@2026-11-29T20:15:00.000Z"]
