"""Instants: integer epoch milliseconds (UTC), and their one canonical text form.

The canonical form is ``YYYY-MM-DDTHH:MM:SS.sssZ`` — a four-digit year, exactly three fraction
digits, upper-case ``T`` and ``Z`` (SPEC §8). It is fixed-width, so string order is time order.
The representable range is ``0001-01-01T00:00:00.000Z`` … ``9999-12-31T23:59:59.999Z``.

Formatting and parsing are done with integer calendar arithmetic (proleptic Gregorian, the
"days from civil" algorithm), never with ``strftime`` — which drops leading zeros of small years
on some platforms.
"""

from __future__ import annotations

import re
from typing import Final, NewType

Instant = NewType("Instant", int)
"""Milliseconds since 1970-01-01T00:00:00Z, UTC, in the representable range."""

MS_PER_SECOND: Final = 1_000
MS_PER_DAY: Final = 86_400_000

MIN_INSTANT: Final = Instant(-719_162 * MS_PER_DAY)
"""``0001-01-01T00:00:00.000Z``."""
MAX_INSTANT: Final = Instant(2_932_897 * MS_PER_DAY - 1)
"""``9999-12-31T23:59:59.999Z``."""

_CANONICAL: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z", re.ASCII
)


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (no validation)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """The proleptic Gregorian (year, month, day) of a day count since 1970-01-01."""
    days += 719_468
    era = days // 146_097
    doe = days - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def is_leap_year(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if is_leap_year(year) else 28
    return 30 if month in {4, 6, 9, 11} else 31


def in_range(ms: int) -> bool:
    return MIN_INSTANT <= ms <= MAX_INSTANT


def format_instant(instant: Instant) -> str:
    """The canonical text of an instant.

    Raises ``ValueError`` when the instant is outside the representable range.
    """
    if not in_range(instant):
        raise ValueError(f"instant {instant} ms is outside years 0001-9999")
    days, ms_of_day = divmod(instant, MS_PER_DAY)
    year, month, day = civil_from_days(days)
    seconds, ms = divmod(ms_of_day, MS_PER_SECOND)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{ms:03d}Z"


def instant_from_fields(
    year: int, month: int, day: int, hour: int, minute: int, second: int, ms: int
) -> int:
    """Epoch milliseconds of validated UTC calendar fields (the result may be out of range)."""
    seconds = ((days_from_civil(year, month, day) * 24 + hour) * 60 + minute) * 60 + second
    return seconds * MS_PER_SECOND + ms


def parse_instant(text: str) -> Instant:
    """Parse exactly the canonical form; anything else raises ``ValueError`` saying why."""
    match = _CANONICAL.fullmatch(text)
    if match is None:
        raise ValueError(f"expected an instant of the form YYYY-MM-DDTHH:MM:SS.sssZ, got {text!r}")
    year, month, day, hour, minute, second, ms = map(int, match.groups())
    if year == 0 or not 1 <= month <= 12 or not 1 <= day <= days_in_month(year, month):
        raise ValueError(f"{text!r} is not a real calendar date")
    if hour > 23 or minute > 59 or second > 59:
        raise ValueError(f"{text!r} is not a real time of day")
    return Instant(instant_from_fields(year, month, day, hour, minute, second, ms))
