"""The ``schedule/quotas`` entry: the quotas a person set for one session, version 1.

A person sets them in the chat (``/turns-per-day``, ``/quiet-hours``, ``/active-reminders``) or
on the page; each setting appends one entry holding every quota the session sets from then on,
so the latest entry is the session's choice whole. Each field is a tri-state:

- absent: the program's setting applies (``Settings`` of the live Schedule);
- ``null``: no such quota in this session, whatever the program sets (``maxActive`` has no
  ``null``: a session always has a bound on its active reminders);
- a value: this session's quota, which beats the program's — except ``maxActive``, which can
  only lower the program's ``Limits.max_active`` (the operator's bound on what a session keeps).

A log that never sets quotas holds no such entry, and its bytes are those of an older version.
An older version refuses a log that holds one (an unknown entry type is corruption, never
skipped); see docs/operations/upgrading.md.

The decoder is strict: unknown or missing fields, a non-canonical instant or form, a count out
of range and quiet hours that do not resolve (an unknown zone, a malformed time, a window that
opens and closes at once) make the entry corrupt (``ValueError`` naming the problem).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal, final

import msgspec

from session_schedule.core.canonical import NESTED_TOO_DEEPLY, why_not_canonical_json
from session_schedule.core.catalog import CATALOG
from session_schedule.core.instants import Instant, format_instant, parse_instant
from session_schedule.core.quiet import QuietHours, quiet_window
from session_schedule.core.records import InstantField

QUOTAS_ENTRY_TYPE: Final = "schedule/quotas"
QUOTAS_VERSION: Final = 1
MAX_TURNS_PER_DAY: Final = 100_000
"""The largest reminder-turn quota a session may set (more than one turn a second)."""
MAX_ACTIVE_QUOTA: Final = 100_000
"""The largest active-reminder quota the entry holds (the program's bound applies anyway)."""

_WallTime = Annotated[str, msgspec.Meta(min_length=5, max_length=12)]
_Zone = Annotated[str, msgspec.Meta(min_length=1, max_length=255)]


@final
class QuietHoursField(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"
):
    """Quiet hours as the entry stores them (see :class:`QuietHours`)."""

    start: _WallTime
    end: _WallTime
    time_zone: _Zone

    def hours(self) -> QuietHours:
        return QuietHours(start=self.start, end=self.end, time_zone=self.time_zone)


@final
class QuotasEntry(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"
):
    """The quotas a session sets (module docstring: absent, ``null`` or a value)."""

    version: Literal[1]
    at: InstantField
    """When the person set them, canonical UTC."""
    turns_per_day: (
        Annotated[int, msgspec.Meta(ge=1, le=MAX_TURNS_PER_DAY)] | msgspec.UnsetType | None
    ) = msgspec.UNSET
    """The most reminder turns in any 24 hours."""
    quiet_hours: QuietHoursField | msgspec.UnsetType | None = msgspec.UNSET
    """Local hours during which a due reminder waits until they end."""
    max_active: Annotated[int, msgspec.Meta(ge=1, le=MAX_ACTIVE_QUOTA)] | msgspec.UnsetType = (
        msgspec.UNSET
    )
    """The most active reminders (at most the program's ``max_active``)."""


QUOTAS_ENTRY: Final = CATALOG.register(
    QUOTAS_ENTRY_TYPE,
    versions=(QUOTAS_VERSION,),
    declaration=QuotasEntry,
    decode=lambda data, _where: decode_quotas(data),
)

_DECODER: Final = msgspec.json.Decoder(QuotasEntry)
_ENCODER: Final = msgspec.json.Encoder()


def decode_quotas(data: bytes) -> QuotasEntry:
    """Strictly decode one ``schedule/quotas`` payload in its canonical byte form; raises
    ``ValueError`` saying what is wrong."""
    try:
        quotas = _DECODER.decode(data)
    except msgspec.ValidationError as error:
        raise ValueError(str(error)[:1].lower() + str(error)[1:]) from None
    except msgspec.DecodeError as error:
        raise ValueError(f"malformed JSON ({error})") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"invalid UTF-8 ({error})") from None
    except RecursionError:
        raise ValueError(NESTED_TOO_DEEPLY) from None
    if _ENCODER.encode(quotas) != data:
        raise ValueError(why_not_canonical_json(data))
    check_quotas(quotas)
    return quotas


def check_quotas(quotas: QuotasEntry) -> None:
    """The rules the struct types only describe; raises ``ValueError`` naming the first broken."""
    try:
        parse_instant(quotas.at)
    except ValueError as error:
        raise ValueError(f"{error} - at `$.at`") from None
    if isinstance(quotas.quiet_hours, QuietHoursField):
        quiet_window(quotas.quiet_hours.hours())  # raises ValueError naming the problem


def quotas_entry(
    *,
    at: Instant,
    turns_per_day: int | msgspec.UnsetType | None = msgspec.UNSET,
    quiet_hours: QuietHours | msgspec.UnsetType | None = msgspec.UNSET,
    max_active: int | msgspec.UnsetType = msgspec.UNSET,
) -> QuotasEntry:
    """The entry for these quotas (checked: raises ``ValueError`` for one out of range)."""
    stored: QuietHoursField | msgspec.UnsetType | None
    if isinstance(quiet_hours, QuietHours):
        stored = QuietHoursField(
            start=quiet_hours.start, end=quiet_hours.end, time_zone=quiet_hours.time_zone
        )
    else:
        stored = quiet_hours
    entry = QuotasEntry(
        version=QUOTAS_VERSION,
        at=format_instant(at),
        turns_per_day=turns_per_day,
        quiet_hours=stored,
        max_active=max_active,
    )
    return decode_quotas(_ENCODER.encode(entry))
