"""FakeClock keeps whole milliseconds: every step and sleep is exact, either way."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from session_schedule.testing.clock import FakeClock

START = "2026-11-29T20:00:00.000Z"
_lengths = st.integers(min_value=0, max_value=10**12)


def _moved(step: str, seconds: float) -> int:
    clock = FakeClock(START)
    before = clock.now()
    getattr(clock, step)(seconds)
    return clock.now() - before


@pytest.mark.parametrize(
    ("step", "seconds", "ms"),
    [
        ("advance", 2.007, 2_007),
        ("jump", 2.007, 2_007),
        ("jump", -2.007, -2_007),
        ("advance", 0.0025, 2),  # half to even
        ("advance", 0.0035, 4),
        ("jump", -0.0025, -2),
        ("advance", 7, 7_000),
        ("advance", 1.0015, 1_002),  # the decimal value, though 1.0015 * 1000 < 1001.5
    ],
)
def test_steps_are_exact_milliseconds(step: str, seconds: float, ms: int) -> None:
    assert _moved(step, seconds) == ms


@given(ms=_lengths)
def test_a_step_of_n_milliseconds_moves_exactly_n_either_way(ms: int) -> None:
    assert _moved("advance", ms / 1000) == ms
    assert _moved("jump", ms / 1000) == ms
    assert _moved("jump", -ms / 1000) == -ms


@given(ms=st.integers(min_value=1, max_value=10**9))
def test_a_sleep_ends_exactly_when_its_milliseconds_have_passed(ms: int) -> None:
    async def run() -> None:
        clock = FakeClock(START)
        sleeper = asyncio.ensure_future(clock.sleep(ms / 1000))
        await asyncio.sleep(0)
        assert clock.next_deadline() == ms / 1000
        clock.advance((ms - 1) / 1000)
        await asyncio.sleep(0)
        assert not sleeper.done()
        assert clock.advance_to_next_wakeup() == 0.001
        await asyncio.sleep(0)
        assert sleeper.done()

    asyncio.run(run())


def test_non_finite_steps_are_refused() -> None:
    clock = FakeClock(START)
    with pytest.raises(ValueError, match=r"^nan seconds is not a finite duration"):
        clock.jump(float("nan"))
    with pytest.raises(ValueError, match=r"^inf seconds is not a finite duration"):
        clock.advance(float("inf"))
