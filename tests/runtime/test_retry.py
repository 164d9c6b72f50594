"""Retrying failed turns: the classification of real SDK errors, the bounded back-off, and the
turn queue retrying in elapsed (virtual) time whatever the wall clock does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anthropic
import httpx2 as httpx
import openai
import pytest

from session_schedule.harness.model import ModelError
from session_schedule.runtime.retry import Diagnosis, TurnRetry, diagnose, next_wait
from session_schedule.runtime.turns import Turn, TurnAttemptFailed, TurnQueue
from session_schedule.session.memory import MemorySessionStore
from session_schedule.session.port import SessionHandle
from session_schedule.session.turns import TURN_FINISHED_TYPE, TurnFinished, turn_failure
from session_schedule.testing.clock import FakeClock

START = "2026-11-29T20:00:00.000Z"
REQUEST = httpx.Request("POST", "https://api.example.test/v1/chat/completions")


def _response(status: int, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, headers=headers or {}, request=REQUEST)


def _openai_status(status: int, headers: dict[str, str] | None = None) -> openai.APIStatusError:
    classes: dict[int, type[openai.APIStatusError]] = {
        400: openai.BadRequestError,
        401: openai.AuthenticationError,
        403: openai.PermissionDeniedError,
        404: openai.NotFoundError,
        409: openai.ConflictError,
        429: openai.RateLimitError,
    }
    cls = classes.get(
        status, openai.InternalServerError if status >= 500 else openai.APIStatusError
    )
    return cls(f"Error code: {status}", response=_response(status, headers), body=None)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "permanent"),
        (401, "permanent"),
        (403, "permanent"),
        (404, "permanent"),
        (408, "transient"),
        (409, "transient"),
        (422, "permanent"),
        (429, "transient"),
        (500, "transient"),
        (503, "transient"),
    ],
)
def test_openai_status_errors_are_classified_by_status(status: int, kind: str) -> None:
    diagnosis = diagnose(_openai_status(status))
    assert (diagnosis.kind, diagnosis.status, diagnosis.expected) == (kind, status, True)


def test_connection_errors_and_timeouts_of_both_sdks_are_transient() -> None:
    for error in (
        openai.APIConnectionError(request=REQUEST),
        openai.APITimeoutError(request=REQUEST),
        anthropic.APIConnectionError(request=REQUEST),
        anthropic.APITimeoutError(request=REQUEST),
        httpx.ConnectError("refused"),
        ConnectionRefusedError(111, "Connection refused"),
        TimeoutError(),
    ):
        diagnosis = diagnose(error)
        assert (diagnosis.kind, diagnosis.status) == ("transient", None), error


def test_anthropic_overloaded_is_transient_and_its_bad_request_permanent() -> None:
    overloaded = anthropic.APIStatusError("overloaded", response=_response(529), body=None)
    assert diagnose(overloaded).kind == "transient"
    bad = anthropic.BadRequestError("bad", response=_response(400), body=None)
    assert diagnose(bad).kind == "permanent"


def test_a_wrapped_sdk_error_keeps_its_class_status_and_the_wrapper_message() -> None:
    try:
        try:
            raise _openai_status(503)
        except openai.APIError as error:
            raise ModelError("the model endpoint failed: Error code: 503") from error
    except ModelError as wrapped:
        diagnosis = diagnose(wrapped)
    assert diagnosis == Diagnosis(
        kind="transient",
        error="InternalServerError",
        status=503,
        message="the model endpoint failed: Error code: 503",
    )


def test_x_should_retry_and_a_declared_transient_flag_override_the_status() -> None:
    assert diagnose(_openai_status(400, {"x-should-retry": "true"})).kind == "transient"
    assert diagnose(_openai_status(503, {"x-should-retry": "false"})).kind == "permanent"
    assert diagnose(ModelError("no choices", transient=True)).kind == "transient"
    declared = ModelError("no choices")
    assert (diagnose(declared).kind, diagnose(declared).expected) == ("permanent", True)


def _raised_for_status(status: int, headers: dict[str, str] | None = None) -> Exception:
    try:
        _response(status, headers).raise_for_status()
    except httpx.HTTPStatusError as error:
        return error
    raise AssertionError(f"HTTP {status} raised nothing")


def test_an_http_status_error_of_httpx_is_classified_by_its_response_status() -> None:
    # raise_for_status() carries the status on the error's response only.
    for status, kind in ((429, "transient"), (503, "transient"), (401, "permanent")):
        diagnosis = diagnose(_raised_for_status(status))
        assert (diagnosis.kind, diagnosis.status, diagnosis.expected, diagnosis.error) == (
            kind,
            status,
            True,
            "HTTPStatusError",
        )
    assert diagnose(_raised_for_status(429, {"retry-after": "12"})).retry_after == 12.0


def test_retry_after_in_seconds_milliseconds_or_as_an_http_date() -> None:
    assert diagnose(_openai_status(429, {"retry-after": "7"})).retry_after == 7.0
    assert diagnose(_openai_status(429, {"retry-after-ms": "1500"})).retry_after == 1.5
    dated = {
        "retry-after": "Sun, 29 Nov 2026 20:00:30 GMT",
        "date": "Sun, 29 Nov 2026 20:00:00 GMT",
    }
    assert diagnose(_openai_status(503, dated)).retry_after == 30.0
    for nonsense in ("-1", "soon", "999999"):
        assert diagnose(_openai_status(429, {"retry-after": nonsense})).retry_after is None


def test_a_bug_is_permanent_unexpected_and_its_message_is_bounded() -> None:
    diagnosis = diagnose(RuntimeError("x" * 1000))
    assert (diagnosis.kind, diagnosis.expected, diagnosis.error) == (
        "permanent",
        False,
        "RuntimeError",
    )
    assert diagnosis.message == "x" * 299 + "…"


POLICY = TurnRetry(max_attempts=4, initial_seconds=2, max_seconds=5, max_age_seconds=20)
TRANSIENT = diagnose(TimeoutError())


def test_the_back_off_doubles_with_equal_jitter_up_to_its_ceiling() -> None:
    def waits(fraction: float) -> list[float | None]:
        return [
            next_wait(POLICY, TRANSIENT, attempts=n, age=0, random=lambda: fraction)
            for n in range(1, 5)
        ]

    assert waits(0.0) == [1.0, 2.0, 2.5, None]
    assert waits(0.5) == [1.5, 3.0, 3.75, None]


def test_the_back_off_is_bounded_by_the_age_and_retry_after_replaces_it() -> None:
    half = 0.5
    assert next_wait(POLICY, TRANSIENT, attempts=1, age=18.5, random=lambda: half) == 1.5
    assert next_wait(POLICY, TRANSIENT, attempts=1, age=18.5, random=lambda: 0.75) is None
    limited = diagnose(_openai_status(429, {"retry-after": "9"}))
    assert next_wait(POLICY, limited, attempts=1, age=0, random=lambda: half) == 9.0
    assert next_wait(POLICY, limited, attempts=1, age=12, random=lambda: half) is None
    permanent = diagnose(_openai_status(401))
    assert next_wait(POLICY, permanent, attempts=1, age=0, random=lambda: half) is None


def test_the_policy_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match=r"^max_attempts must be at least 1, not 0$"):
        TurnRetry(max_attempts=0)
    with pytest.raises(ValueError, match=r"^max_age_seconds must be a positive number"):
        TurnRetry(max_age_seconds=float("inf"))


# -- the turn queue -------------------------------------------------------------------------


@dataclass
class FlakyHost:
    """A ``run_turn`` that raises the errors it is given, one per attempt, then succeeds."""

    turns: TurnQueue | None = None
    errors: list[Exception] = field(default_factory=list)
    ran: list[Turn] = field(default_factory=list)

    async def run_turn(self, text: str) -> None:
        assert self.turns is not None
        current = self.turns.current
        assert current is not None
        assert current.text == text
        self.ran.append(current)
        if self.errors:
            raise self.errors.pop(0)


@dataclass
class World:
    store: MemorySessionStore
    session: SessionHandle
    clock: FakeClock
    host: FlakyHost
    turns: TurnQueue
    failures: list[TurnAttemptFailed]

    def finished(self) -> list[TurnFinished]:
        return [
            entry.payload
            for entry in self.session.entries
            if entry.type == TURN_FINISHED_TYPE and isinstance(entry.payload, TurnFinished)
        ]

    def build(self) -> None:
        self.host = FlakyHost(errors=self.host.errors)
        self.turns = TurnQueue(
            self.session, self.host.run_turn, clock=self.clock, retry=POLICY, random_fraction=half
        )
        self.host.turns = self.turns
        self.turns.subscribe(self.failures.append)

    async def settle(self) -> None:
        for _ in range(20):
            await _yield()


async def _yield() -> None:
    import asyncio  # noqa: PLC0415 - only to yield to the loop

    await asyncio.sleep(0)


def half() -> float:
    return 0.5


@pytest.fixture
async def world() -> AsyncIterator[World]:
    store = MemorySessionStore()
    clock = FakeClock(START)
    session = await store.create(now=clock.now())
    current = World(store, session, clock, FlakyHost(), TurnQueue(session), [])
    current.build()
    yield current
    await current.turns.close()


async def test_a_transient_failure_is_retried_after_elapsed_time_whatever_the_wall_clock(
    world: World,
) -> None:
    world.host.errors += [openai.APIConnectionError(request=REQUEST), _openai_status(503)]
    await world.turns.start()
    world.turns.submit("hello")
    await world.settle()
    assert [turn.attempt for turn in world.host.ran] == [1]
    assert [failed.retry_in for failed in world.failures] == [1.5]
    # The wall clock steps back an hour: the wait is elapsed time, so it still ends on time.
    world.clock.jump(-3600)
    world.clock.advance(1.4)
    await world.settle()
    assert len(world.host.ran) == 1
    world.clock.advance(0.1)
    await world.settle()
    assert [turn.attempt for turn in world.host.ran] == [1, 2]
    assert [failed.retry_in for failed in world.failures] == [1.5, 3.0]
    # A step forward does not end the wait early either.
    world.clock.jump(3600)
    await world.settle()
    assert len(world.host.ran) == 2
    world.clock.advance(3.0)
    await world.turns.wait_idle()
    assert [turn.attempt for turn in world.host.ran] == [1, 2, 3]
    [finished] = world.finished()
    assert (finished.outcome, finished.attempts, finished.failure) == ("completed", 3, None)


async def test_a_turn_that_keeps_failing_is_recorded_failed_with_its_cause_and_the_next_runs(
    world: World,
) -> None:
    world.host.errors += [_openai_status(429) for _ in range(POLICY.max_attempts)]
    await world.turns.start()
    world.turns.submit("doomed")
    world.turns.submit("next")
    while not world.failures or not world.failures[-1].final:
        await world.settle()
        world.clock.advance_to_next_wakeup()
    await world.turns.wait_idle()
    assert [(turn.text, turn.attempt) for turn in world.host.ran] == [
        ("doomed", 1),
        ("doomed", 2),
        ("doomed", 3),
        ("doomed", 4),
        ("next", 1),
    ]
    failed, completed = world.finished()
    assert failed.outcome == "failed"
    assert failed.attempts == POLICY.max_attempts
    assert failed.failure == turn_failure("RateLimitError", status=429, message="Error code: 429")
    assert (completed.outcome, completed.attempts) == ("completed", 1)


async def test_a_permanent_failure_ends_the_turn_at_once(world: World) -> None:
    world.host.errors += [_openai_status(401)]
    await world.turns.start()
    world.turns.submit("hello")
    await world.turns.wait_idle()
    assert len(world.host.ran) == 1
    [finished] = world.finished()
    assert finished.failure == turn_failure(
        "AuthenticationError", status=401, message="Error code: 401"
    )
    assert [failed.final for failed in world.failures] == [True]


async def test_a_turn_closed_during_its_retry_wait_stays_pending_and_runs_again(
    world: World,
) -> None:
    world.host.errors += [TimeoutError()]
    await world.turns.start()
    world.turns.submit("hello")
    await world.settle()
    assert len(world.failures) == 1
    await world.turns.close()
    assert world.finished() == []
    world.build()
    assert [(turn.text, turn.restored) for turn in world.turns.pending] == [("hello", True)]
    await world.turns.start()
    await world.turns.wait_idle()
    [finished] = world.finished()
    assert (finished.outcome, finished.attempts) == ("completed", 1)
