"""The per-turn time context for the web overlay (SPEC §2).

The overlay captures the browser's IANA zone with every prompt. When the prompts of the open turn
carry exactly one valid zone, the model is told to read otherwise-unqualified dates and times in
that zone — and still to pass the zone explicitly; when the zones are mixed, invalid or missing,
it is told to ask. The text is computed for one turn and never stored: it is not a Session
default, and Schedule itself never reads it.
"""

from __future__ import annotations

from collections.abc import Sequence

from session_schedule.core.time_input import is_supported_zone


def time_context(zones: Sequence[str | None]) -> str:
    """The guidance for a turn whose prompts reported ``zones`` (one entry per prompt)."""
    reported = [zone for zone in zones if zone]
    distinct = sorted(set(reported))
    if len(distinct) == 1 and len(reported) == len(zones) and is_supported_zone(distinct[0]):
        zone = distinct[0]
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
        reason = (
            "the user's messages in this turn came with different time zones "
            f"({', '.join(distinct)})"
        )
    elif len(reported) < len(zones):
        reason = (
            f"only some of the user's messages in this turn reported a time zone ({distinct[0]})"
        )
    else:
        reason = (
            f"the time zone reported with the user's messages is not recognised ({distinct[0]!r})"
        )
    return (
        f"Time context for this turn: {reason}. If the user gives a date or time without a zone "
        "or UTC offset, ask which time zone they mean before calling schedule_create; do not "
        "assume one."
    )
