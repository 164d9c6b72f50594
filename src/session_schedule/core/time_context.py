"""The per-turn time context for the web overlay (SPEC §2), and the time text of every model
request (:func:`request_context`).

The overlay captures the browser's IANA zone with every prompt. When the prompts of the open turn
carry exactly one valid zone, the model is told to read otherwise-unqualified dates and times in
that zone — and still to pass the zone explicitly; when the zones are mixed, invalid or missing,
it is told to ask. The text is computed for one turn and never stored: it is not a Session
default, and Schedule itself never reads it.

A reported zone is text from a request body. Only a zone that passes the ``at`` local form's
``time_zone`` rule (:func:`~session_schedule.core.time_input.is_supported_zone`) is ever written
into the text; any other is described as "an unrecognised zone", never echoed, so a body cannot
put words of its own into the model's system message.
"""

from __future__ import annotations

from collections.abc import Sequence

from session_schedule.core.instants import Instant, format_instant
from session_schedule.core.time_input import is_supported_zone

UNRECOGNISED_ZONE = "an unrecognised zone"


def request_context(now: Instant, *, zones: Sequence[str | None] | None = None) -> str:
    """What every model request says about time: the current instant, then — when the zones of
    the turn's prompts are known (``zones``: one entry per prompt, ``None`` for one without) —
    the turn's :func:`time_context`. Without ``zones`` nothing is said about a zone.

    The reference harness and every framework adapter put this text into each request (the
    system message, or the framework's instructions), so a model can resolve "tomorrow at 9".
    """
    lines = [f"Current time: {format_instant(now)} (UTC)."]
    if zones is not None:
        lines.append(time_context(zones))
    return "\n".join(lines)


def time_context(zones: Sequence[str | None]) -> str:
    """The guidance for a turn whose prompts reported ``zones`` (one entry per prompt)."""
    reported = [zone for zone in zones if zone]
    distinct = set(reported)
    valid = sorted(zone for zone in distinct if is_supported_zone(zone))
    unrecognised = len(distinct) - len(valid)
    if len(distinct) == 1 and len(reported) == len(zones) and valid:
        zone = valid[0]
        return (
            f"Time context for this turn: the user's time zone is {zone}, as reported with "
            "their messages. "
            f"Read dates and times the user gives without a zone or UTC offset as {zone} "
            "local time, and still state the zone explicitly when you call schedule_create "
            f'(for example "time_zone": "{zone}" in `at`). This applies to this turn only.'
        )
    if not reported:
        reason = "no time zone was reported with the user's messages"
    elif len(distinct) > 1:
        named = [*valid, *([_unrecognised(unrecognised)] if unrecognised else [])]
        reason = (
            f"the user's messages in this turn came with different time zones ({', '.join(named)})"
        )
    elif len(reported) < len(zones):
        named_zone = valid[0] if valid else UNRECOGNISED_ZONE
        reason = (
            f"only some of the user's messages in this turn reported a time zone ({named_zone})"
        )
    else:
        reason = f"the time zone reported with the user's messages is {UNRECOGNISED_ZONE}"
    return (
        f"Time context for this turn: {reason}. If the user gives a date or time without a zone "
        "or UTC offset, ask which time zone they mean before calling schedule_create; do not "
        "assume one."
    )


def _unrecognised(count: int) -> str:
    return UNRECOGNISED_ZONE if count == 1 else f"{count} unrecognised zones"
