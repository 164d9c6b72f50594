"""Rate limits of the overlay: token buckets on a monotonic clock.

A bucket holds up to ``burst`` tokens and gains one every ``refill_seconds``; an action takes
one. When the bucket is empty the action is refused, and the refusal says how long to wait
(``Retry-After``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import final


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Rate:
    """``burst`` at once, then one per ``refill_seconds``."""

    burst: int
    refill_seconds: float


@final
class TokenBucket:
    """One :class:`Rate`, enforced. ``monotonic`` is the clock in seconds (tests pass their own)."""

    def __init__(self, rate: Rate, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate
        self._monotonic = monotonic
        self._tokens = float(rate.burst)
        self._at = monotonic()

    def take(self) -> float | None:
        """Take a token: ``None`` when there was one, else the seconds until there is."""
        now = self._monotonic()
        self._tokens = min(
            float(self._rate.burst), self._tokens + (now - self._at) / self._rate.refill_seconds
        )
        self._at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return None
        return (1 - self._tokens) * self._rate.refill_seconds
