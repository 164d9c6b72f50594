from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import cast

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from session_schedule.core.errors import ERROR_CODES
from session_schedule.core.rules import Limits
from session_schedule.runtime.events import ScheduleEvent
from session_schedule.runtime.live import LiveSchedule
from session_schedule.session.memory import MemorySessionStore
from session_schedule.testing.agent import FakeAgent
from session_schedule.testing.clock import FakeClock
from session_schedule.tools.catalog import ToolDefinition, tool_definitions
from session_schedule.tools.handlers import ScheduleTools
from tests.core.strategies import json_values

START = "2026-11-29T20:00:00.000Z"


async def _tools() -> tuple[ScheduleTools, LiveSchedule, MemorySessionStore]:
    store = MemorySessionStore()
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    schedule = LiveSchedule(session, FakeAgent(), clock=clock)
    await schedule.start()
    return ScheduleTools(schedule), schedule, store


@pytest.fixture
async def tools() -> AsyncIterator[ScheduleTools]:
    tools, schedule, _ = await _tools()
    yield tools
    await schedule.close()


async def test_create_list_delete_round_trip(tools: ScheduleTools) -> None:
    created = await tools.call("schedule_create", '{"prompt": " stretch ", "after_seconds": 90}')
    assert created == {
        "ok": True,
        "schedule": {
            "kind": "after",
            "id": "sch_1",
            "prompt": "stretch",
            "afterSeconds": 90,
            "scheduledAt": "2026-11-29T20:01:30.000Z",
            "state": "scheduled",
            "deliveryMode": "session-local",
            "runs": 0,
            "lastRun": None,
        },
    }
    listed = await tools.call("schedule_list", None)
    assert listed == {
        "ok": True,
        "now": START,
        "schedules": [created["schedule"]],
        "next_cursor": None,
        "total": 1,
    }
    assert await tools.call("schedule_delete", {"id": "sch_1"}) == {
        "ok": True,
        "id": "sch_1",
        "deleted": True,
    }
    assert await tools.call("schedule_delete", {"id": "sch_1"}) == {
        "ok": True,
        "id": "sch_1",
        "deleted": False,
    }
    assert await tools.call_json("schedule_list", "") == (
        '{"ok":true,"now":"2026-11-29T20:00:00.000Z","schedules":[],"next_cursor":null,"total":0}'
    )


def _error(code: str, message: str) -> dict[str, object]:
    return {"ok": False, "error": {"code": code, "message": message}}


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("schedule_snooze", {}, _error("invalid_selector", "there is no tool 'schedule_snooze'; the schedule tools are schedule_create, schedule_list, schedule_delete, schedule_update.")),
        ("schedule_create", "{prompt: 1}", _error("invalid_selector", 'the arguments are not valid JSON; send a JSON object such as {"prompt": "...", "after_seconds": 600}.')),
        ("schedule_create", b"\xff", _error("invalid_selector", 'the arguments are not valid JSON; send a JSON object such as {"prompt": "...", "after_seconds": 600}.')),
        ("schedule_create", "[1, 2]", _error("invalid_selector", "the arguments must be a JSON object, not an array.")),
        ("schedule_create", 5, _error("invalid_selector", "the arguments must be a JSON object, not a number.")),
        ("schedule_create", {1: "x"}, _error("invalid_selector", 'the arguments must be a JSON object, whose keys are strings, not a number; send one such as {"prompt": "...", "after_seconds": 600}.')),
        ("schedule_list", {"all": True}, _error("invalid_selector", 'schedule_list takes only cursor and limit, got `all`; call it with {"cursor": null, "limit": null} for the first page.')),
        ("schedule_delete", {"id": 3}, _error("invalid_selector", "`id` must be the id string of a reminder (such as 'sch_1'), got 3.")),
        ("schedule_create", {"prompt": "p", "every_seconds": 60}, _error("frequency_too_high", "every_seconds must be at least 300 (5 minutes), got 60; choose a longer interval.")),
        ("schedule_create", {"prompt": "p", "at": "2026-11-29T19:00:00Z"}, _error("not_future", "`at` names 2026-11-29T19:00:00.000Z, which is not after the current time 2026-11-29T20:00:00.000Z; choose a time in the future.")),
        ("schedule_create", {"prompt": "p", "at": "0001-01-01T00:00:00+00:01"}, _error("not_future", "`at` names 0000-12-31T23:59:00.000Z, which is not after the current time 2026-11-29T20:00:00.000Z; choose a time in the future.")),
        ("schedule_create", {"prompt": "p", "at": {"date": "0001-01-01", "time": "00:00", "time_zone": "Asia/Tokyo"}}, _error("not_future", "`at` names 0000-12-31T14:41:01.000Z, which is not after the current time 2026-11-29T20:00:00.000Z; choose a time in the future.")),
        ("schedule_create", {"prompt": "p", "at": "0000-12-31T23:00:00-02:00"}, _error("not_future", "`at` names 0001-01-01T01:00:00.000Z, which is not after the current time 2026-11-29T20:00:00.000Z; choose a time in the future.")),
        ("schedule_create", {"prompt": "p", "at": "9999-12-31T23:30:00-05:00"}, _error("time_out_of_range", "'9999-12-31T23:30:00-05:00' is after 9999-12-31T23:59:59.999Z, the latest instant Schedule can represent; choose an earlier time.")),
    ],
)  # fmt: skip
async def test_everything_a_model_can_cause_comes_back_as_an_error_result(
    tools: ScheduleTools, name: str, arguments: object, expected: dict[str, object]
) -> None:
    assert await tools.call(name, arguments) == expected


_NAMES = "the schedule tools are schedule_create, schedule_list, schedule_delete, schedule_update."


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        (None, "null"),
        (3, "a number"),
        (2.5, "a number"),
        (True, "a boolean"),
        (b"schedule_list", "bytes"),
        (bytearray(b"schedule_list"), "bytes"),
        (["schedule_list"], "an array"),
        ({"name": "schedule_list"}, "a dict"),
    ],
)
async def test_a_tool_name_that_is_not_a_string_is_an_invalid_selector(
    name: object, kind: str
) -> None:
    tools, schedule, _ = await _tools()
    events: list[ScheduleEvent] = []
    schedule.events.subscribe(events.append)
    expected = _error("invalid_selector", f"the tool name must be a string, not {kind}; {_NAMES}")
    untyped = cast(str, name)  # what a fuzzer or an untyped caller can pass
    try:
        assert await tools.call(untyped, {}) == expected
        assert json.loads(await tools.call_json(untyped, "{}")) == expected
        assert msgspec.to_builtins(await tools.call_typed(untyped)) == expected
    finally:
        await schedule.close()
    assert [(event.tool, event.error_code) for event in events] == [
        (f"<{kind}>", "invalid_selector")
    ] * 3


async def test_a_host_s_other_tools_are_listed_with_the_schedule_tools() -> None:
    """The MCP server offers schedule_followups_take too: a call naming no tool lists it."""
    _, schedule, _ = await _tools()
    offering = ScheduleTools(schedule, also_offered=("schedule_followups_take",))
    names = (
        "the schedule tools are schedule_create, schedule_list, schedule_delete, "
        "schedule_update, schedule_followups_take."
    )
    try:
        assert await offering.call("schedule_snooze", {}) == _error(
            "invalid_selector", f"there is no tool 'schedule_snooze'; {names}"
        )
        assert await offering.call(cast(str, None), {}) == _error(
            "invalid_selector", f"the tool name must be a string, not null; {names}"
        )
    finally:
        await schedule.close()


async def test_a_bug_becomes_internal_error_and_is_logged(
    tools: ScheduleTools, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(self: LiveSchedule) -> object:
        raise KeyError("oops")

    # ``call`` lists the ready-made plain views, ``call_typed`` the typed ones: break both.
    monkeypatch.setattr(LiveSchedule, "active", broken)
    monkeypatch.setattr(LiveSchedule, "active_plain", broken)
    expected = _error(
        "internal_error",
        "the schedule tool failed unexpectedly; tell the user that reminders may not be working "
        "and do not retry this call now.",
    )
    with caplog.at_level(logging.ERROR):
        assert await tools.call("schedule_list") == expected
        assert msgspec.to_builtins(await tools.call_typed("schedule_list")) == expected
    assert caplog.text.count("schedule tool 'schedule_list' failed") == 2
    assert caplog.text.count("KeyError: 'oops'") == 2


async def test_a_closed_schedule_answers_one_sentence_and_logs_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemorySessionStore()
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    schedule = LiveSchedule(session, FakeAgent(), clock=clock)
    tools = ScheduleTools(schedule)
    await schedule.start()
    await schedule.close()
    expected = _error(
        "internal_error",
        "this session is closed, so its reminders cannot be managed here; tell the user that "
        "the session must be opened again.",
    )
    with caplog.at_level(logging.WARNING):
        assert await tools.call("schedule_create", {"prompt": "p", "after_seconds": 60}) == expected
        assert await tools.call("schedule_list") == expected
    session_id = session.id
    assert [
        (record.levelname, record.getMessage(), record.exc_info) for record in caplog.records
    ] == [
        (
            "WARNING",
            f"schedule tool {name!r} called after session {session_id} was closed; "
            "it must be opened again",
            None,
        )
        for name in ("schedule_create", "schedule_list")
    ]


async def test_a_failed_barrier_is_persistence_uncertain() -> None:
    tools, schedule, store = await _tools()
    store.fail_next_barrier()
    result = await tools.call("schedule_create", {"prompt": "p", "after_seconds": 60})
    assert result["ok"] is False
    error = result["error"]
    assert isinstance(error, dict)
    assert error["code"] == "persistence_uncertain"
    assert (await tools.call("schedule_list"))["error"] == error | {"message": error["message"]}
    await schedule.close()


def test_adapters_use_the_configured_limits() -> None:
    async def run() -> None:
        tools, schedule, _ = await _tools()
        assert [tool["name"] for tool in tools.anthropic()] == [
            "schedule_create",
            "schedule_list",
            "schedule_delete",
            "schedule_update",
        ]
        assert len(tools.openai(shape="responses")) == 4
        assert len(tools.mcp()) == 4
        assert tools.definitions[0].name == "schedule_create"
        await schedule.close()

    asyncio.run(run())


def test_the_tools_are_described_only_when_asked_for_then_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[Limits] = []

    def counted(limits: Limits) -> tuple[ToolDefinition, ...]:
        made.append(limits)
        return tool_definitions(limits)

    monkeypatch.setattr("session_schedule.tools.handlers.tool_definitions", counted)

    async def run() -> None:
        tools, schedule, _ = await _tools()
        result = await tools.call("schedule_create", {"prompt": "stretch", "after_seconds": 60})
        assert result["ok"] is True
        assert made == []  # a host's agent that never sends the tools to a model pays nothing
        assert len(tools.openai()) == len(tools.anthropic()) == len(tools.mcp()) == 4
        assert tools.definitions is tools.definitions
        assert made == [schedule.settings.limits]
        await schedule.close()

    asyncio.run(run())


tool_names = st.sampled_from(["schedule_create", "schedule_list", "schedule_delete", "x"])
raw_arguments = st.one_of(
    json_values,
    json_values.map(lambda value: msgspec.json.encode(value).decode()),
    st.text(max_size=40),
    st.binary(max_size=40),
    st.dictionaries(
        st.sampled_from(["prompt", "after_seconds", "at", "every_seconds", "daily_at", "id"]),
        json_values,
    ),
)


@settings(max_examples=300, deadline=None)
@given(calls=st.lists(st.tuples(tool_names, raw_arguments), min_size=1, max_size=6))
def test_call_never_raises_and_never_reports_a_bug(calls: list[tuple[str, object]]) -> None:
    async def run() -> None:
        tools, schedule, _ = await _tools()
        try:
            for name, arguments in calls:
                result = await tools.call(name, arguments)
                assert isinstance(result["ok"], bool)
                if result["ok"] is False:
                    error = result["error"]
                    assert isinstance(error, dict)
                    assert error["code"] in ERROR_CODES
                    assert error["code"] not in {"internal_error", "corrupt_schedule_log"}
                    assert isinstance(error["message"], str)
                msgspec.json.encode(result)
        finally:
            await schedule.close()

    asyncio.run(run())


# -- fuzzing with what a harness really hands over -------------------------------------------

_SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
_text_with_surrogates = st.lists(
    st.one_of(_SURROGATES, st.characters(max_codepoint=0x10FFFF)), min_size=1, max_size=12
).map("".join)
_odd_scalars = st.one_of(
    _text_with_surrogates,
    st.integers(min_value=-(10**400), max_value=10**400),
    st.sampled_from([10**400, -(10**400), 2**53, float("inf"), float("-inf"), float("nan")]),
    st.floats(),
    st.booleans(),
    st.none(),
)
_odd_values = st.recursive(
    _odd_scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(_text_with_surrogates, children, max_size=3)
    ),
    max_leaves=8,
)
_keys = st.one_of(
    st.sampled_from(["prompt", "after_seconds", "at", "every_seconds", "id"]),
    _text_with_surrogates,
)


def _nested(depth: int, kind: str) -> object:
    value: object = "x"
    for _ in range(depth):
        value = [value] if kind == "array" else {"at": value}
    return value


def _nested_text(depth: int, kind: str) -> str:
    opening, closing = ("[", "]") if kind == "array" else ('{"at":', "}")
    return '{"prompt":"p","at":' + opening * depth + "1" + closing * depth + "}"


_deep = st.builds(
    lambda depth, kind, as_text: _nested_text(depth, kind) if as_text else _nested(depth, kind),
    st.integers(min_value=1_000, max_value=100_000),
    st.sampled_from(["array", "object"]),
    st.booleans(),
)
_invalid_utf8 = st.builds(
    lambda head, bad, tail: head + bad + tail,
    st.sampled_from([b"", b'{"prompt":"', b'{"id":"', b'{"']),
    st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\xbd", b"\xf4\x90\x80\x80", b"\x80\x80"]),
    st.sampled_from([b"", b'","after_seconds":5}', b'"}', b'":1}']),
)
_fuzz_arguments = st.one_of(
    st.dictionaries(_keys, _odd_values, max_size=4),
    st.fixed_dictionaries(
        {"prompt": _text_with_surrogates}, optional={"after_seconds": _odd_values}
    ),
    st.fixed_dictionaries({"prompt": st.just("p"), "at": _odd_values}),
    st.fixed_dictionaries({"id": _odd_values}),
    # JSON text as stdlib json writes it: lone surrogates as "\ud83d" escapes, NaN, Infinity.
    st.dictionaries(_keys, _odd_values, max_size=4).map(json.dumps),
    _invalid_utf8,
    _deep,
    _odd_values,
)
_fuzz_names = st.one_of(
    st.sampled_from(
        [
            "schedule_create",
            "schedule_list",
            "schedule_delete",
            "schedule_update",
        ]
    ),
    _text_with_surrogates,
    st.none() | st.integers() | st.binary(max_size=16) | st.lists(st.text(max_size=4)),
)
_MODEL_CODES = set(ERROR_CODES) - {"internal_error", "corrupt_schedule_log"}


@settings(max_examples=400, deadline=None)
@given(calls=st.lists(st.tuples(_fuzz_names, _fuzz_arguments), min_size=1, max_size=4))
def test_model_input_never_escapes_as_internal_error(calls: list[tuple[object, object]]) -> None:
    async def run() -> None:
        tools, schedule, _ = await _tools()
        # Operator events carry what the model sent too: they must encode as well.
        events: list[object] = []
        schedule.events.subscribe(events.append)
        try:
            for name, arguments in calls:
                text = await tools.call_json(cast(str, name), arguments)
                result = msgspec.json.decode(text)
                assert text.encode("utf-8")
                if result["ok"] is False:
                    assert result["error"]["code"] in _MODEL_CODES, result
            msgspec.json.encode(events)
        finally:
            await schedule.close()

    asyncio.run(run())


_LONE = "\ud83d"


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("schedule_create", {"prompt": f"buy {_LONE}milk", "after_seconds": 5}, _error("invalid_prompt", "`prompt` contains the lone surrogate U+D83D at index 4, half of a character that cannot be encoded; send the whole character or remove it.")),
        ("schedule_create", {"prompt": "p", "after_seconds": _LONE}, _error("invalid_rule", 'after_seconds must be a positive whole number of seconds, got "\\ud83d".')),
        ("schedule_create", {"prompt": "p", _LONE: 1, "after_seconds": 5}, _error("invalid_selector", "unknown argument `\\ud83d`; schedule_create takes `prompt`, exactly one of `after_seconds`, `at`, `every_seconds`, `daily_at`, `calendar`, and optionally `ends` and `max_lateness_seconds`.")),
        ("schedule_create", {"prompt": "p", "at": f"2026-12-01T09:00:00{_LONE}"}, _error("invalid_selector", "'2026-12-01T09:00:00\\ud83d' is not an RFC 3339 date-time; write YYYY-MM-DDTHH:MM:SS, an optional fraction, then 'Z' or an offset, such as '2026-12-01T09:00:00+09:00'.")),
        ("schedule_list", {_LONE: 1}, _error("invalid_selector", 'schedule_list takes only cursor and limit, got `\\ud83d`; call it with {"cursor": null, "limit": null} for the first page.')),
        (f"schedule_{_LONE}", {}, _error("invalid_selector", "there is no tool 'schedule_\\ud83d'; the schedule tools are schedule_create, schedule_list, schedule_delete, schedule_update.")),
        ("schedule_delete", {"id": f"sch_1{_LONE}"}, {"ok": True, "id": "sch_1\\ud83d", "deleted": False}),
        ("schedule_create", b'{"prompt":"\xff","after_seconds":5}', _error("invalid_selector", 'the arguments are not valid UTF-8 text; send a JSON object such as {"prompt": "...", "after_seconds": 600}.')),
        ("schedule_create", f'{{"prompt":"{_LONE}","after_seconds":5}}', _error("invalid_prompt", "`prompt` contains the lone surrogate U+D83D at index 0, half of a character that cannot be encoded; send the whole character or remove it.")),
        ("schedule_create", '{"prompt":"buy \\ud83d","after_seconds":5}', _error("invalid_prompt", "`prompt` contains the lone surrogate U+D83D at index 4, half of a character that cannot be encoded; send the whole character or remove it.")),
        # The same text as UTF-8 bytes: the same answer.
        ("schedule_create", b'{"prompt":"buy \\ud83d","after_seconds":5}', _error("invalid_prompt", "`prompt` contains the lone surrogate U+D83D at index 4, half of a character that cannot be encoded; send the whole character or remove it.")),
        ("schedule_create", bytearray(b'{"prompt":"p","after_seconds":5'), _error("invalid_selector", 'the arguments are not valid JSON; send a JSON object such as {"prompt": "...", "after_seconds": 600}.')),
        ("schedule_create", '{"prompt":"p","\\udc00":1}', _error("invalid_selector", "unknown argument `\\udc00`; schedule_create takes `prompt`, exactly one of `after_seconds`, `at`, `every_seconds`, `daily_at`, `calendar`, and optionally `ends` and `max_lateness_seconds`.")),
        ("schedule_delete", '{"id":"sch_\\ud83d"}', {"ok": True, "id": "sch_\\ud83d", "deleted": False}),
        ("schedule_create", '{"prompt":"\\ud83d","after_seconds":NaN}', _error("invalid_selector", 'the arguments are not valid JSON; send a JSON object such as {"prompt": "...", "after_seconds": 600}.')),
        ("schedule_create", '{"prompt":"\\ud83d",' + '"at":' + "[" * 5_000 + "]" * 5_000 + "}", _error("invalid_selector", 'the arguments nest arrays or objects more than 8 levels deep; send a flat JSON object such as {"prompt": "...", "after_seconds": 600}.')),
        ("schedule_create", '{"prompt":"p","after_seconds":1e400}', _error("invalid_selector", 'a number in the arguments is too large to represent; send numbers such as {"prompt": "...", "after_seconds": 600}.')),
        ("schedule_create", "[" * 1_000 + "]" * 1_000, _error("invalid_selector", 'the arguments nest arrays or objects more than 8 levels deep; send a flat JSON object such as {"prompt": "...", "after_seconds": 600}.')),
        ("schedule_create", {"prompt": "p", "at": _nested(100_000, "array")}, _error("invalid_selector", 'the arguments nest arrays or objects more than 8 levels deep; send a flat JSON object such as {"prompt": "...", "after_seconds": 600}.')),
        ("schedule_create", {"prompt": "p", "after_seconds": 10**400}, _error("invalid_rule", "after_seconds must be a positive whole number of seconds, got 100000000000000000000000000000000000000….")),
        ("schedule_create", {"prompt": "p", "after_seconds": float("nan")}, _error("invalid_rule", "after_seconds must be a positive whole number of seconds, got nan.")),
        ("schedule_create", {"prompt": "p", "every_seconds": float("-inf")}, _error("invalid_rule", "every_seconds must be a whole number of seconds, got -inf.")),
    ],
)  # fmt: skip
async def test_unencodable_and_hostile_input_gets_a_stable_code_and_an_escaped_message(
    tools: ScheduleTools, name: str, arguments: object, expected: dict[str, object]
) -> None:
    assert await tools.call(name, arguments) == expected
    assert msgspec.json.decode(await tools.call_json(name, arguments)) == expected


async def test_daily_at_round_trip(tools: ScheduleTools) -> None:
    created = await tools.call(
        "schedule_create",
        '{"prompt": "standup", "after_seconds": null, "at": null, "every_seconds": null, '
        '"daily_at": {"time": "09:00", "time_zone": "Asia/Tokyo", "weekdays": null}}',
    )
    assert created == {
        "ok": True,
        "schedule": {
            "kind": "daily",
            "id": "sch_1",
            "prompt": "standup",
            "time": "09:00:00.000",
            "timeZone": "Asia/Tokyo",
            "weekdays": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
            "scheduledAt": "2026-11-30T00:00:00.000Z",
            "state": "scheduled",
            "deliveryMode": "session-local",
            "runs": 0,
            "lastRun": None,
        },
    }
    listed = await tools.call("schedule_list", None)
    assert listed == {
        "ok": True,
        "now": START,
        "schedules": [created["schedule"]],
        "next_cursor": None,
        "total": 1,
    }
    assert await tools.call(
        "schedule_create", {"prompt": "p", "daily_at": {"time": "9", "time_zone": "UTC"}}
    ) == _error(
        "invalid_selector",
        "`time` must have the form HH:MM, HH:MM:SS or HH:MM:SS.sss (24-hour, 1-3 fraction "
        "digits), such as '09:00', not '9'.",
    )


@pytest.mark.parametrize(
    "arguments",
    [
        {"prompt": "a", "after_seconds": 120},
        {"prompt": "b", "at": "2026-12-01T09:00:00+09:00"},
        {"prompt": "c", "every_seconds": 1200},
        {"prompt": "d", "daily_at": {"time": "09:00", "time_zone": "UTC", "weekdays": ["mon"]}},
    ],
)
async def test_a_created_view_is_the_typed_result_converted(arguments: dict[str, object]) -> None:
    # ``call`` converts the view before the barrier; ``call_typed`` returns the typed result.
    plain_tools, plain_schedule, _ = await _tools()
    typed_tools, typed_schedule, _ = await _tools()
    try:
        created = await plain_tools.call("schedule_create", arguments)
        typed = msgspec.to_builtins(await typed_tools.call_typed("schedule_create", arguments))
        assert created["ok"] is True
        assert json.dumps(created) == json.dumps(typed)
    finally:
        await plain_schedule.close()
        await typed_schedule.close()


_READ_ONLY = (
    "a view returned by schedule_list is read-only (it is shared with later results); "
    "copy it first, e.g. with dict(view) or copy.deepcopy(result)"
)


async def test_listed_views_are_shared_read_only_and_follow_every_change() -> None:
    tools, schedule, _ = await _tools()
    clock = schedule._clock
    assert isinstance(clock, FakeClock)
    try:
        await tools.call("schedule_create", {"prompt": "a", "after_seconds": 120})
        await tools.call(
            "schedule_create",
            {
                "prompt": "b",
                "daily_at": {"time": "09:00", "time_zone": "UTC", "weekdays": ["mon"]},
            },
        )
        await tools.call("schedule_create", {"prompt": "c", "after_seconds": 60})
        first = await tools.call("schedule_list")
        # The same result, value for value, as the typed result converted.
        assert first == msgspec.to_builtins(await tools.call_typed("schedule_list"))
        assert json.dumps(first) == json.dumps(
            msgspec.to_builtins(await tools.call_typed("schedule_list"))
        )
        listed = _schedules(first)
        assert [view["id"] for view in listed] == ["sch_3", "sch_1", "sch_2"]
        view, daily = listed[0], listed[2]
        weekdays = daily["weekdays"]
        assert isinstance(weekdays, list)
        changes: tuple[Callable[[], object], ...] = (
            lambda: view.__setitem__("prompt", "changed"),
            lambda: view.pop("prompt"),
            lambda: view.update(prompt="changed"),
            lambda: weekdays.append("tue"),
        )
        for change in changes:
            with pytest.raises(TypeError) as refused:
                change()
            assert str(refused.value) == _READ_ONLY
        # The outer list is the caller's own; copies are plain and mutable.
        listed.clear()
        copied = _schedules(copy.deepcopy(await tools.call("schedule_list")))
        assert type(copied[0]) is dict
        copied[0]["prompt"] = "changed"
        copied_weekdays = copied[2]["weekdays"]
        assert type(copied_weekdays) is list
        copied_weekdays.append("tue")
        again = _schedules(await tools.call("schedule_list"))
        assert [view["prompt"] for view in again] == ["c", "a", "b"]
        assert again[2]["weekdays"] == ["mon"]
        # Time turns the earliest overdue, and a delete drops one.
        clock.jump(90)
        await tools.call("schedule_delete", {"id": "sch_1"})
        later = await tools.call("schedule_list")
        assert [(view["id"], view["state"]) for view in _schedules(later)] == [
            ("sch_3", "overdue"),
            ("sch_2", "scheduled"),
        ]
        assert later == msgspec.to_builtins(await tools.call_typed("schedule_list"))
    finally:
        await schedule.close()


def _schedules(result: dict[str, object]) -> list[dict[str, object]]:
    listed = result["schedules"]
    assert isinstance(listed, list)
    return cast("list[dict[str, object]]", listed)


async def test_results_a_model_reads_as_text_escape_hidden_characters(
    tools: ScheduleTools,
) -> None:
    hidden = "buy milk\U000e0041\U000e0042\u202egnorts\u200b"  # tag letters, a bidi override, ZWSP
    created = await tools.call_json("schedule_create", {"prompt": hidden, "after_seconds": 90})
    listed = await tools.call_json("schedule_list", {})
    for text in (created, listed):
        assert "\U000e0041" not in text
        assert "\u202e" not in text
        assert "\u200b" not in text
        assert "buy milk\\udb40\\udc41\\udb40\\udc42\\u202egnorts\\u200b" in text
    # The text still decodes to the exact prompt.
    assert json.loads(created)["schedule"]["prompt"] == hidden
    assert json.loads(listed)["schedules"][0]["prompt"] == hidden
    # Emoji stay emoji.
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467 \u2764\ufe0f"
    emoji = await tools.call_json("schedule_create", {"prompt": family, "after_seconds": 90})
    assert family in emoji


class _Text(str):
    """A ``str`` of another type, as libraries hand them over (``numpy.str_``)."""


class _Count(int):
    """An ``int`` of another type (an ``IntEnum``)."""


async def test_subclasses_of_json_types_in_the_arguments_are_read_as_those_types() -> None:
    # The id, a zone, a count: a subclass reached the log's records, whose encoding refused it
    # — an update then answered internal_error after appending its first change.
    tools, schedule, store = await _tools()
    [header] = await store.list()
    try:
        created = await tools.call(
            "schedule_create",
            {
                "prompt": _Text("stand up"),
                "daily_at": {"time": _Text("09:00"), "time_zone": _Text("Europe/Paris")},
            },
        )
        assert created["ok"] is True
        every = await tools.call(
            "schedule_create", {"prompt": "water", "every_seconds": _Count(600)}
        )
        assert every["ok"] is True
        entries = len((await store.read(header.id)).entries)
        updated = await tools.call(
            "schedule_update", {"id": _Text("sch_1"), "prompt": "changed", "paused": True}
        )
        assert updated["ok"] is True
        assert updated["schedule"]["prompt"] == "changed"  # type: ignore[index]
        assert updated["schedule"]["paused"] is True  # type: ignore[index]
        written = (await store.read(header.id)).entries[entries:]
        assert [type(entry.payload).__name__ for entry in written] == [
            "ScheduleUpdateChange",
            "SchedulePauseChange",
        ]
        deleted = await tools.call("schedule_delete", {"id": _Text("sch_2")})
        assert deleted == {"ok": True, "id": "sch_2", "deleted": True}
    finally:
        await schedule.close()


async def test_a_message_quoting_a_huge_value_keeps_its_start_and_its_advice(
    tools: ScheduleTools,
) -> None:
    short = await tools.call("schedule_create", {"prompt": "p", "at": "s"})
    advice = short["error"]["message"].removeprefix("'s'")  # type: ignore[index]
    huge = await tools.call("schedule_create", {"prompt": "p", "at": "s" * 1_000_000})
    whole = f"'{'s' * 1_000_000}'{advice}"
    left_out = len(whole) - 800 - 300
    assert huge == {
        "ok": False,
        "error": {
            "code": "invalid_selector",
            "message": f"{whole[:800]}… [{left_out:,} characters left out] …{whole[-300:]}",
        },
    }
    for name, arguments in (
        ("x" * 100_000, {}),
        ("schedule_create", {"prompt": "p", "after_seconds": 60, "k" * 1_000_000: 1}),
        ("schedule_update", {"id": "s" * 1_000_000}),
        ("schedule_create", {"prompt": "p", "calendar": {"rule": "X" * 1_000_000}}),
    ):
        result = await tools.call(name, arguments)
        assert len(result["error"]["message"]) < 1_200 + 40  # type: ignore[index]


async def test_json_text_that_names_a_key_twice_is_refused(tools: ScheduleTools) -> None:
    # A decoder keeps one of the two silently: which one the model meant is unknown.
    twice = "the arguments name `{}` twice in one object; give each argument once."
    for text, key in (
        ('{"prompt": "p", "prompt": "q", "after_seconds": 60}', "prompt"),
        ('{"prompt": "p", "after_seconds": 60, "after_seconds": null}', "after_seconds"),
        (
            '{"prompt": "p", "at": {"date": "2027-01-01", "date": "2027-01-02", '
            '"time": "09:00", "time_zone": "UTC"}}',
            "date",
        ),
        ('{"prompt": "\\ud800", "prompt": "q", "after_seconds": 60}', "prompt"),
    ):
        assert await tools.call("schedule_create", text) == {
            "ok": False,
            "error": {"code": "invalid_selector", "message": twice.format(key)},
        }
    assert await tools.call("schedule_list", "{}") == await tools.call("schedule_list", {})
    made = await tools.call(
        "schedule_create", '{"prompt": "a: b: c", "at": "2027-01-01T09:00:00Z"}'
    )
    assert made["schedule"]["prompt"] == "a: b: c"  # type: ignore[index]


async def test_arguments_that_are_not_json_are_answered_with_the_tool_s_own_example(
    tools: ScheduleTools,
) -> None:
    examples = {
        "schedule_create": '{"prompt": "...", "after_seconds": 600}',
        "schedule_list": '{"cursor": null, "limit": null}',
        "schedule_delete": '{"id": "sch_1"}',
        "schedule_update": '{"id": "sch_1", "paused": true}',
    }
    for name, example in examples.items():
        assert await tools.call(name, "{not json") == {
            "ok": False,
            "error": {
                "code": "invalid_selector",
                "message": f"the arguments are not valid JSON; send a JSON object such as "
                f"{example}.",
            },
        }
        assert await tools.call(name, b'{"id": "\xff"}') == {
            "ok": False,
            "error": {
                "code": "invalid_selector",
                "message": f"the arguments are not valid UTF-8 text; send a JSON object such as "
                f"{example}.",
            },
        }


async def test_a_refusal_that_cannot_be_traced_is_still_answered(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools, schedule, _ = await _tools()

    def broken(*_args: object, **_kwargs: object) -> None:
        raise ValueError("instant 253402300801000 ms is outside years 0001-9999")

    monkeypatch.setattr(schedule.events, "refused", broken)
    try:
        result = await tools.call("schedule_create", {"prompt": "p"})
    finally:
        await schedule.close()
    assert result == {
        "ok": False,
        "error": {
            "code": "invalid_selector",
            "message": "give exactly one of `after_seconds`, `at`, `every_seconds`, `daily_at`, "
            "`calendar` (found none).",
        },
    }
    assert caplog.records[-1].getMessage() == (
        "the refusal of schedule tool 'schedule_create' could not be traced"
    )
