"""Retrying a failed turn: which failures pass, how long to wait, what is recorded.

A turn whose ``run_turn`` raises has not been answered. :class:`~session_schedule.runtime.turns.
TurnQueue` asks :func:`diagnose` what went wrong and :func:`next_wait` whether, and after how
long, to run it again.

Rule 1 — **transient or permanent.** A failure is *transient* when the endpoint may answer a
moment later: a connection error or a timeout (the OpenAI and Anthropic SDKs' ``APIConnectionError``
and ``APITimeoutError``, httpx's transport errors, Python's ``ConnectionError`` and
``TimeoutError``), or an HTTP status of 408, 409, 429 or 5xx (the error's ``status_code``, or its
response's: httpx's ``HTTPStatusError``). An ``x-should-retry`` response
header (which both SDKs honour) overrides the status. Anything else is *permanent* — a 400, 401,
403 or 404, a reply the harness cannot use, a bug in the host's ``run_turn`` — and ends the turn
at once. The error and its causes (``raise ... from``) are searched, so a harness that wraps an
SDK error keeps its classification; an error with a boolean ``transient`` attribute (the
harness's ``ModelError`` can carry one) says itself, and that wins.

Rule 2 — **exponential back-off with jitter, bounded twice.** After the n-th failed attempt the
turn waits a random time between half and all of ``min(max_seconds, initial_seconds *
2 ** (n - 1))`` ("equal jitter": never two hosts in lockstep, never a wait shorter than half the
step). A ``Retry-After`` (or ``retry-after-ms``) header replaces that wait (an HTTP date is read
against the response's own ``Date``, never the local clock). The turn fails for good after
``max_attempts`` attempts, or when the next attempt would start more than ``max_age_seconds``
after the first one began.

Rule 3 — **elapsed time.** Waits and the age are measured on the clock's monotonic reading
(:meth:`~session_schedule.runtime.clock.Clock.monotonic`): a wall-clock step neither shortens
nor stretches them.

Rule 4 — **a bounded cause.** What is stored of a failure is its error class, its HTTP status if
any, and its message cut to 300 characters (``MAX_FAILURE_MESSAGE_CHARS``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Final, Literal, TypeAlias, final

import msgspec

from session_schedule.session.turns import MAX_FAILURE_ERROR_CHARS, MAX_FAILURE_MESSAGE_CHARS

FailureKind: TypeAlias = Literal["transient", "permanent"]

_TRANSIENT_STATUSES: Final = frozenset({408, 409, 429})
_TRANSIENT_CLASSES: Final = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "TransportError",
        "TimeoutException",
        "NetworkError",
        "ConnectError",
        "ConnectTimeout",
        "ReadTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "ReadError",
        "WriteError",
        "RemoteProtocolError",
    }
)
_MAX_CHAIN: Final = 8


@final
class TurnRetry(msgspec.Struct, frozen=True, kw_only=True):
    """How a failed turn is retried (Rule 2); one of the live Schedule's ``Settings``."""

    max_attempts: int = 10
    """A turn runs at most this many times (1: never retried)."""
    initial_seconds: float = 2.0
    """The back-off step after the first failed attempt; it doubles after each one."""
    max_seconds: float = 60.0
    """The longest step of the back-off (a ``Retry-After`` may ask for more)."""
    max_age_seconds: float = 600.0
    """No attempt starts more than this long (elapsed) after the first began."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, not {self.max_attempts}")
        for name in ("initial_seconds", "max_seconds", "max_age_seconds"):
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a positive number of seconds, not {value}")


@final
class Diagnosis(msgspec.Struct, frozen=True, kw_only=True):
    """What one failed attempt tells (Rules 1 and 4)."""

    kind: FailureKind
    error: str
    """The class name of the most telling error in the chain (the SDK's, when there is one)."""
    status: int | None = None
    """The HTTP status, when the endpoint answered."""
    message: str
    """The raised error's message, cut to 300 characters."""
    retry_after: float | None = None
    """Seconds the endpoint asked to wait (``Retry-After``), when it said."""
    expected: bool = True
    """Whether the failure is one the code anticipated (an HTTP status, a connection error, an
    error that has a ``transient`` attribute); ``False`` suggests a bug, worth a traceback."""


def diagnose(error: BaseException) -> Diagnosis:
    """Classify ``error`` (Rule 1) and keep its bounded cause (Rule 4)."""
    chain = _chain(error)
    telling = error
    status: int | None = None
    headers: Mapping[str, str] | None = None
    transient_class = False
    declared: bool | None = None
    expected = False
    for link in chain:
        if hasattr(link, "transient"):
            expected = True
            flag = getattr(link, "transient", None)
            if declared is None and isinstance(flag, bool):
                declared = flag
        link_status = getattr(link, "status_code", None)
        if link_status is None:
            # httpx's ``HTTPStatusError`` (``raise_for_status``) and requests' ``HTTPError``
            # carry the status on their response only.
            link_status = getattr(getattr(link, "response", None), "status_code", None)
        if status is None and isinstance(link_status, int) and not isinstance(link_status, bool):
            status = link_status
            telling = link
            headers = _headers(link)
        if any(cls.__name__ in _TRANSIENT_CLASSES for cls in type(link).__mro__) or isinstance(
            link, ConnectionError | TimeoutError
        ):
            if not transient_class and status is None:
                telling = link
            transient_class = True
    kind: FailureKind = "permanent"
    if status is not None:
        kind = "transient" if status in _TRANSIENT_STATUSES or status >= 500 else "permanent"
        should = (headers or {}).get("x-should-retry")
        if should == "true":
            kind = "transient"
        elif should == "false":
            kind = "permanent"
    elif transient_class:
        kind = "transient"
    if declared is not None:
        kind = "transient" if declared else "permanent"
    return Diagnosis(
        kind=kind,
        error=_cut(type(telling).__name__, MAX_FAILURE_ERROR_CHARS),
        status=status,
        message=_cut(
            " ".join(str(error).split()) or type(error).__name__, MAX_FAILURE_MESSAGE_CHARS
        ),
        retry_after=_retry_after(headers) if headers is not None else None,
        expected=expected or transient_class or status is not None,
    )


def next_wait(
    policy: TurnRetry,
    diagnosis: Diagnosis,
    *,
    attempts: int,
    age: float,
    random: Callable[[], float],
) -> float | None:
    """Seconds to wait before attempt ``attempts + 1``, or ``None`` when the turn has failed for
    good (Rule 2). ``age`` is the elapsed time since the first attempt began; ``random`` gives a
    number in [0, 1)."""
    if diagnosis.kind == "permanent" or attempts >= policy.max_attempts:
        return None
    if diagnosis.retry_after is not None:
        wait = diagnosis.retry_after
    else:
        step = min(policy.max_seconds, policy.initial_seconds * 2 ** min(attempts - 1, 62))
        wait = step / 2 + random() * step / 2
    if age + wait > policy.max_age_seconds:
        return None
    return wait


def _chain(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    link: BaseException | None = error
    while link is not None and len(chain) < _MAX_CHAIN and link not in chain:
        chain.append(link)
        link = link.__cause__ or link.__context__
    return chain


def _headers(error: BaseException) -> Mapping[str, str] | None:
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None or not hasattr(headers, "get"):
        return None
    found: dict[str, str] = {}
    for name in ("retry-after", "retry-after-ms", "x-should-retry", "date"):
        value = headers.get(name)
        if isinstance(value, str):
            found[name] = value.strip().lower() if name == "x-should-retry" else value.strip()
    return found


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """The wait a ``retry-after-ms`` or ``Retry-After`` header asks for (seconds or an HTTP
    date), when it is a sensible one (not negative, not over a day)."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            seconds = float(milliseconds) / 1000
        except ValueError:
            seconds = math.nan
        if 0 <= seconds <= 86_400:
            return seconds
    text = headers.get("retry-after")
    if text is None:
        return None
    try:
        seconds = float(text)
    except ValueError:
        # An HTTP date is rare: its parser is imported then, not with the library.
        import email.utils  # noqa: PLC0415 - keeps start-up lean

        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        date = headers.get("date")
        if when.tzinfo is None or date is None:
            return None
        try:
            seconds = (when - email.utils.parsedate_to_datetime(date)).total_seconds()
        except (TypeError, ValueError):
            return None
    return seconds if 0 <= seconds <= 86_400 else None


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
