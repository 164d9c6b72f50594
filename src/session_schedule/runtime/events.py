"""Operator events of a live Schedule: what happened to each reminder, and why.

Every event is a frozen :class:`ScheduleEvent` with stable fields. It is emitted twice: as a
``logging`` record on the logger ``session_schedule.events`` (the fields in ``extra=``, so a
structured log handler can index them), and to every callback subscribed with
:meth:`ScheduleEvents.subscribe`. A callback that raises is logged and skipped: observing never
breaks delivery.

========================  ===============================================  ====================
kind                      when                                             outcome
========================  ===============================================  ====================
``create``                a reminder was created                           ``created``
``delete``                a delete was asked for                           ``deleted`` or
                                                                           ``not active``
``dispatch``              a reminder was in an accepted follow-up          ``dispatched``
``refusal``               a tool call was answered with an error           ``refused``
``followup-failed``       ``followup()`` raised; the reminder stays active ``not accepted``
``back-off``              the owner waits before trying again              ``agent refused`` or
                                                                           ``agent busy``
``turn-retry``            a turn failed transiently; it runs again         ``retrying``
``turn-failed``           a turn failed for good; it is recorded failed    ``failed``
========================  ===============================================  ====================

``turn-retry`` and ``turn-failed`` are the failed attempts of the Schedule's agent when it is a
:class:`~session_schedule.runtime.turns.TurnQueue`: the Schedule subscribes to them while it is
started. A ``turn-retry`` or ``turn-failed`` event of a reminder turn is emitted once per
occurrence it delivers (with ``schedule_id`` and ``occurrence_key``); one of a host prompt, once
without them.
Its ``detail`` is the failure (``ErrorClass (HTTP status): message``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final, Literal, TypeAlias, final

import msgspec

from session_schedule.core.changes import ScheduleMissChange
from session_schedule.core.due import Delivery
from session_schedule.core.errors import ErrorCode
from session_schedule.core.instants import Instant, format_instant, instant_of_canonical
from session_schedule.runtime.turns import TurnAttemptFailed

EVENT_LOGGER: Final = "session_schedule.events"
logger = logging.getLogger(EVENT_LOGGER)
_internal = logging.getLogger(__name__ + ".callbacks")

EventKind: TypeAlias = Literal[
    "create",
    "delete",
    "update",
    "dispatch",
    "miss",
    "refusal",
    "followup-failed",
    "back-off",
    "turn-retry",
    "turn-failed",
]
EventOutcome: TypeAlias = Literal[
    "created",
    "deleted",
    "updated",
    "missed",
    "not active",
    "dispatched",
    "refused",
    "not accepted",
    "agent refused",
    "agent busy",
    "nothing due",
    "follow-up budget",
    "quiet hours",
    "retrying",
    "failed",
]
BackOffReason: TypeAlias = Literal[
    "agent refused", "agent busy", "nothing due", "follow-up budget", "quiet hours"
]
"""Why the owner backs off: a refused follow-up, an agent that keeps refusing maintenance
although it reported idle, a wake-up the planner keeps contradicting, the Session's budget of
reminder follow-ups spent (a minute's or a day's; due reminders wait until it allows one), or
the person's quiet hours (due reminders wait until they end)."""
EventCallback: TypeAlias = Callable[["ScheduleEvent"], None]

_LEVELS: Final[dict[EventKind, int]] = {
    "create": logging.INFO,
    "delete": logging.INFO,
    "update": logging.INFO,
    "dispatch": logging.INFO,
    "miss": logging.INFO,
    "refusal": logging.INFO,
    "followup-failed": logging.WARNING,
    "back-off": logging.WARNING,
    "turn-retry": logging.WARNING,
    "turn-failed": logging.ERROR,
}


@final
class ScheduleEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One thing that happened to the reminders of one Session."""

    kind: EventKind
    session_id: str
    decided_at: str
    """The wall-clock time of the decision, canonical UTC (a dispatch: its batch's decision
    time)."""
    outcome: EventOutcome
    schedule_id: str | None = None
    occurrence_key: str | None = None
    """``id@scheduledAt`` for dispatches and failed follow-ups."""
    error_code: ErrorCode | None = None
    """The stable code of a refusal."""
    tool: str | None = None
    """The tool a refusal answered."""
    detail: str | None = None
    """A refusal's message, or what ``followup()`` raised."""
    retry_in_seconds: float | None = None
    """How long a back-off waits."""

    def log_fields(self) -> dict[str, object]:
        """The fields as passed in ``extra=`` (``kind`` is named ``event`` there)."""
        fields: dict[str, object] = msgspec.structs.asdict(self)
        fields["event"] = fields.pop("kind")
        return fields


@final
class ScheduleEvents:
    """The events of one live Schedule: emitted to the log and to subscribed callbacks."""

    def __init__(self, session_id: str) -> None:
        self._session_id = session_id
        self._callbacks: dict[object, EventCallback] = {}

    def subscribe(self, callback: EventCallback) -> Callable[[], None]:
        """Call ``callback`` with every later event; returns an idempotent unsubscribe."""
        token = object()
        self._callbacks[token] = callback

        def unsubscribe() -> None:
            self._callbacks.pop(token, None)

        return unsubscribe

    def emit(self, event: ScheduleEvent) -> None:
        """Log ``event``, then hand it to every callback (one that raises is logged)."""
        level = _LEVELS[event.kind]
        if logger.isEnabledFor(level):
            logger.log(
                level,
                "session %s: %s %s%s",
                event.session_id,
                event.kind,
                event.outcome,
                _suffix(event),
                extra=event.log_fields(),
            )
        for callback in list(self._callbacks.values()):
            try:
                callback(event)
            except Exception:
                _internal.exception("a schedule event callback raised; delivery goes on")

    # -- the events the live Schedule and the tools emit --------------------------------------

    def heard(self, kind: EventKind) -> bool:
        """Whether an event of ``kind`` would reach anyone: a subscribed callback, or the log
        at its level. When not, it need not be built (its time formatted, its record made)."""
        return bool(self._callbacks) or logger.isEnabledFor(_LEVELS[kind])

    def created(self, schedule_id: str, now: Instant) -> None:
        if self.heard("create"):
            self.emit(self._event("create", now, "created", schedule_id=schedule_id))

    def deleted(self, schedule_id: str, now: Instant, *, deleted: bool) -> None:
        if self.heard("delete"):
            outcome: EventOutcome = "deleted" if deleted else "not active"
            self.emit(self._event("delete", now, outcome, schedule_id=schedule_id))

    def updated(self, schedule_id: str, now: Instant) -> None:
        if self.heard("update"):
            self.emit(self._event("update", now, "updated", schedule_id=schedule_id))

    def missed(self, miss: ScheduleMissChange) -> None:
        """An occurrence decided too late was recorded as missed, not delivered."""
        if self.heard("miss"):
            self.emit(
                self._event(
                    "miss",
                    instant_of_canonical(miss.accepted_at),
                    "missed",
                    schedule_id=miss.id,
                    occurrence_key=f"{miss.id}@{miss.scheduled_at}",
                )
            )

    def dispatched(self, delivery: Delivery) -> None:
        for occurrence in delivery.occurrences:
            self.emit(
                self._event(
                    "dispatch",
                    delivery.decided_at,
                    "dispatched",
                    schedule_id=occurrence.record.id,
                    occurrence_key=occurrence.key,
                )
            )

    def followup_failed(self, delivery: Delivery, error: BaseException) -> None:
        for occurrence in delivery.occurrences:
            self.emit(
                self._event(
                    "followup-failed",
                    delivery.decided_at,
                    "not accepted",
                    schedule_id=occurrence.record.id,
                    occurrence_key=occurrence.key,
                    detail=f"{type(error).__name__}: {error}",
                )
            )

    def turn_attempt_failed(self, now: Instant, failed: TurnAttemptFailed) -> None:
        """An attempt of a turn failed: ``turn-retry``, or ``turn-failed`` when it was the
        last."""
        kind: EventKind = "turn-failed" if failed.final else "turn-retry"
        outcome: EventOutcome = "failed" if failed.final else "retrying"
        diagnosis = failed.diagnosis
        status = "" if diagnosis.status is None else f" (HTTP {diagnosis.status})"
        detail = f"{diagnosis.error}{status}: {diagnosis.message}"
        keys = failed.turn.occurrences or (None,)
        for key in keys:
            self.emit(
                self._event(
                    kind,
                    now,
                    outcome,
                    schedule_id=None if key is None else key.partition("@")[0],
                    occurrence_key=key,
                    detail=detail,
                    retry_in_seconds=failed.retry_in,
                )
            )

    def backing_off(
        self, now: Instant, *, reason: BackOffReason, seconds: float, detail: str | None = None
    ) -> None:
        """The owner waits ``seconds`` before trying again, for ``reason``."""
        self.emit(self._event("back-off", now, reason, retry_in_seconds=seconds, detail=detail))

    def refused(
        self,
        now: Instant,
        *,
        tool: str,
        code: ErrorCode,
        message: str,
        schedule_id: str | None = None,
    ) -> None:
        self.emit(
            self._event(
                "refusal",
                now,
                "refused",
                schedule_id=schedule_id,
                error_code=code,
                tool=tool,
                detail=message,
            )
        )

    def _event(
        self,
        kind: EventKind,
        decided_at: Instant,
        outcome: EventOutcome,
        *,
        schedule_id: str | None = None,
        occurrence_key: str | None = None,
        error_code: ErrorCode | None = None,
        tool: str | None = None,
        detail: str | None = None,
        retry_in_seconds: float | None = None,
    ) -> ScheduleEvent:
        return ScheduleEvent(
            kind=kind,
            session_id=self._session_id,
            decided_at=format_instant(decided_at),
            outcome=outcome,
            schedule_id=schedule_id,
            occurrence_key=occurrence_key,
            error_code=error_code,
            tool=tool,
            detail=detail,
            retry_in_seconds=retry_in_seconds,
        )


def _suffix(event: ScheduleEvent) -> str:
    parts = [
        f"{name}={value}"
        for name, value in (
            ("schedule", event.schedule_id),
            ("occurrence", event.occurrence_key),
            ("tool", event.tool),
            ("code", event.error_code),
            ("retry_in", None if event.retry_in_seconds is None else f"{event.retry_in_seconds}s"),
        )
        if value is not None
    ]
    if event.detail is not None:
        parts.append(f"({event.detail})")
    return "".join(f" {part}" for part in parts)
