"""``GET/POST /api/sessions/{id}/quotas``: the quotas a person sets for one session on the page.

The body of a POST names the quotas to change, each optional: ``turnsPerDay`` (a number,
``null`` for none, ``"default"`` for the program's setting), ``quietHours`` (``"22:00-07:00
Europe/Paris"``, ``null`` or ``"default"``) and ``maxActive`` (a number or ``"default"``). They
are read as the chat reads ``/turns-per-day``, ``/quiet-hours`` and ``/active-reminders``, set
together in one ``schedule/quotas`` entry (none when one is refused, with 422 and a sentence
that says why), and either method answers with the quotas applied and who set each.
"""

from __future__ import annotations

from typing import Annotated, Literal, final

import msgspec

from session_schedule.core.quiet import describe, parse_quiet_hours
from session_schedule.runtime.live import LiveSchedule, QuotaName, SessionQuotas, SetBy
from session_schedule.web.problems import HttpProblem

_Default = Literal["default"]
_QUIET_TEXT_CHARS = 300


@final
class QuotasBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """The quotas to change; an absent one stays as it is."""

    turns_per_day: int | _Default | msgspec.UnsetType | None = msgspec.UNSET
    quiet_hours: (
        Annotated[str, msgspec.Meta(max_length=_QUIET_TEXT_CHARS)] | msgspec.UnsetType | None
    ) = msgspec.UNSET
    max_active: int | _Default | msgspec.UnsetType = msgspec.UNSET


@final
class QuotasView(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The quotas a session applies, and whether the session or the program set each."""

    turns_per_day: int | None
    turns_per_day_set_by: SetBy
    quiet_hours: str | None
    """``22:00-07:00 Europe/Paris``, as the body takes it."""
    quiet_hours_text: str | None
    """``22:00 to 07:00 Europe/Paris``, as a frame says it."""
    quiet_hours_set_by: SetBy
    max_active: int
    max_active_set_by: SetBy
    program_max_active: int


def quotas_view(quotas: SessionQuotas) -> QuotasView:
    quiet = quotas.quiet_hours
    return QuotasView(
        turns_per_day=quotas.turns_per_day,
        turns_per_day_set_by=quotas.turns_per_day_set_by,
        quiet_hours=None if quiet is None else f"{quiet.start}-{quiet.end} {quiet.time_zone}",
        quiet_hours_text=None if quiet is None else describe(quiet),
        quiet_hours_set_by=quotas.quiet_hours_set_by,
        max_active=quotas.max_active,
        max_active_set_by=quotas.max_active_set_by,
        program_max_active=quotas.program_max_active,
    )


async def set_quotas(schedule: LiveSchedule, body: QuotasBody) -> QuotasView:
    """Apply ``body`` to ``schedule``; raises :class:`HttpProblem` (422) for a quota refused."""
    values: dict[QuotaName, object] = {}
    if not isinstance(body.turns_per_day, msgspec.UnsetType):
        values["turns_per_day"] = _default(body.turns_per_day)
    if not isinstance(body.quiet_hours, msgspec.UnsetType):
        text = body.quiet_hours
        if text is None or text.strip().lower() in {"off", "default"}:
            off = text is None or text.strip().lower() == "off"
            values["quiet_hours"] = None if off else msgspec.UNSET
        else:
            try:
                values["quiet_hours"] = parse_quiet_hours(text)
            except ValueError as error:
                raise HttpProblem(422, _sentence(str(error))) from None
    if not isinstance(body.max_active, msgspec.UnsetType):
        values["max_active"] = _default(body.max_active)
    if not values:
        return quotas_view(schedule.quotas())
    try:
        return quotas_view(await schedule.set_quotas(values))
    except ValueError as error:
        raise HttpProblem(422, _sentence(str(error))) from None


def _default(value: object) -> object:
    return msgspec.UNSET if value == "default" else value


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith(".") else text + "."
