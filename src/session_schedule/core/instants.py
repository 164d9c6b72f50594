"""Instants: integer epoch milliseconds (UTC), and their one canonical text form.

The canonical form is ``YYYY-MM-DDTHH:MM:SS.sssZ`` — a four-digit year, exactly three fraction
digits, upper-case ``T`` and ``Z`` (SPEC §8). It is fixed-width, so string order is time order.
The representable range is ``0001-01-01T00:00:00.000Z`` … ``9999-12-31T23:59:59.999Z``.

Formatting and parsing are done with integer calendar arithmetic (proleptic Gregorian, the
"days from civil" algorithm), never with ``strftime`` — which drops leading zeros of small years
on some platforms.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from functools import lru_cache
from itertools import compress
from typing import Final, NewType

Instant = NewType("Instant", int)
"""Milliseconds since 1970-01-01T00:00:00Z, UTC, in the representable range."""

MS_PER_SECOND: Final = 1_000
MS_PER_DAY: Final = 86_400_000

MIN_INSTANT: Final = Instant(-719_162 * MS_PER_DAY)
"""``0001-01-01T00:00:00.000Z``."""
MAX_INSTANT: Final = Instant(2_932_897 * MS_PER_DAY - 1)
"""``9999-12-31T23:59:59.999Z``."""

_SHAPE: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z", re.ASCII)
# The whole canonical form, calendar included: 30- and 31-day months, February 29 in Gregorian
# leap years only, no year 0000, hours 00-23. One regular expression is far cheaper than
# splitting and checking fields in Python, and replay runs it once per stored instant.
_DATE: Final = (
    r"(?!0000)(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
    r"|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)"
)
_TIME: Final = r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{3}Z"
CANONICAL_INSTANT_PATTERN: Final = f"^{_DATE}{_TIME}\\Z"
"""The canonical form as a ``re.search`` pattern (``\\Z``: a ``$`` would allow a final newline)."""
CANONICAL_INSTANT: Final = re.compile(_DATE + _TIME)
"""The canonical form, for ``fullmatch``."""


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


def milliseconds(seconds: float) -> int:
    """``seconds`` as whole milliseconds: the decimal value ``seconds`` is written as (its
    shortest ``repr``), rounded half to even — so ``2.007`` is 2,007 ms and ``-2.007`` is
    -2,007 ms, where ``2.007 * 1000`` would be 2,007.0000000000002. Raises ``ValueError`` for a
    non-finite number."""
    if isinstance(seconds, int):
        return seconds * MS_PER_SECOND
    if not math.isfinite(seconds):
        raise ValueError(f"{seconds!r} seconds is not a finite duration")
    exact = Decimal(repr(float(seconds))) * MS_PER_SECOND
    return int(exact.to_integral_value(rounding=ROUND_HALF_EVEN))


def in_range(ms: int) -> bool:
    return MIN_INSTANT <= ms <= MAX_INSTANT


def format_instant(instant: Instant) -> str:
    """The canonical text of an instant.

    Raises ``ValueError`` when the instant is outside the representable range.
    """
    if not MIN_INSTANT <= instant <= MAX_INSTANT:
        raise ValueError(f"instant {instant} ms is outside years 0001-9999")
    # Replay formats one instant per Every dispatch, so this is built from cached pieces rather
    # than formatted field by field (about a quarter of the cost).
    days, ms_of_day = divmod(instant, MS_PER_DAY)
    seconds, ms = divmod(ms_of_day, MS_PER_SECOND)
    minutes, second = divmod(seconds, 60)
    return _date_text(days) + _HOUR_MINUTE[minutes] + _SECOND[second] + _MILLISECOND[ms]


def describe_instant(ms: int) -> str:
    """``ms`` (epoch milliseconds) written for a message: its canonical text when it is in the
    representable range, otherwise the same fields with the year as ISO 8601 writes years
    outside 0001-9999 (``0000``, ``-0001``, ``10000``) — an instant before the range is a time
    in the past that a message still names exactly. Never stored: the durable form is only
    :func:`format_instant`'s."""
    if MIN_INSTANT <= ms <= MAX_INSTANT:
        return format_instant(Instant(ms))
    days, ms_of_day = divmod(ms, MS_PER_DAY)
    year, month, day = civil_from_days(days)
    seconds, fraction = divmod(ms_of_day, MS_PER_SECOND)
    minutes, second = divmod(seconds, 60)
    year_text = f"-{-year:04d}" if year < 0 else f"{year:04d}"
    return (
        f"{year_text}-{month:02d}-{day:02d}T{_HOUR_MINUTE[minutes]}{_SECOND[second]}"
        f"{_MILLISECOND[fraction]}"
    )


@lru_cache(maxsize=4096)
def _date_text(days: int) -> str:
    year, month, day = civil_from_days(days)
    return f"{year:04d}-{month:02d}-{day:02d}T"


_HOUR_MINUTE: Final = tuple(f"{m // 60:02d}:{m % 60:02d}:" for m in range(24 * 60))
_SECOND: Final = tuple(f"{s:02d}." for s in range(60))
_MILLISECOND: Final = tuple(f"{ms:03d}Z" for ms in range(1000))


def instant_from_fields(
    year: int, month: int, day: int, hour: int, minute: int, second: int, ms: int
) -> int:
    """Epoch milliseconds of validated UTC calendar fields (the result may be out of range)."""
    seconds = ((days_from_civil(year, month, day) * 24 + hour) * 60 + minute) * 60 + second
    return seconds * MS_PER_SECOND + ms


def parse_instant(text: str) -> Instant:
    """Parse exactly the canonical form; anything else raises ``ValueError`` saying why."""
    instant = canonical_instant(text)
    if instant is None:
        raise ValueError(why_not_canonical(text))
    return Instant(instant)


def canonical_instant(text: str) -> int | None:
    """The instant of ``text`` (epoch milliseconds) when it is in the canonical form, else
    ``None``.

    Accepts exactly what :func:`parse_instant` accepts, at the cost of two dictionary look-ups
    for an instant whose minute and whose second were seen before: replay checks and converts
    one instant per stored create and Every dispatch. A text is split into its minute
    (``YYYY-MM-DDTHH:MM:``, date and time of day checked) and its second (``SS.sssZ``); any
    checked minute followed by any checked second is canonical, so a text whose two parts are
    both known is canonical. An unseen minute costs two more look-ups (date, time of day), an
    unseen second two (whole second, milliseconds), and a date not seen before one match of the
    calendar expression: a realistic log's dispatches fall on new minutes. The tables of seen
    parts are bounded: each is forgotten whenever it fills. (Many instants only checked, not
    converted, are checked at once by :func:`all_canonical`.)
    """
    minute_ms = _MINUTE_MS.get(text[:17])
    if minute_ms is None:
        # An unseen minute: its date (``YYYY-MM-DDT``, checked once per date by the calendar
        # expression) and its time of day (``HH:MM:``), each looked up in a table of every valid
        # form; the slices have fixed widths, so a text of any other length matches no table.
        date = text[:11]
        day_ms = _DAY_MS.get(date)
        if day_ms is None:
            if _CANONICAL_DATE.fullmatch(date) is None:
                return None
            day_ms = days_from_civil(int(date[:4]), int(date[5:7]), int(date[8:10])) * MS_PER_DAY
            _remember(_DAY_MS, date, day_ms)
        time_ms = _TIME_OF_DAY_MS.get(text[11:17])
        if time_ms is None:
            return None
        minute_ms = day_ms + time_ms
        _remember(_MINUTE_MS, text[:17], minute_ms)
    second_ms = _SECOND_MS.get(text[17:])
    if second_ms is None:
        # An unseen second: its whole second (``SS.``) and its milliseconds (``sssZ``).
        whole_ms = _WHOLE_SECOND_MS.get(text[17:20])
        fraction_ms = _FRACTION_MS.get(text[20:])
        if whole_ms is None or fraction_ms is None:
            return None
        second_ms = whole_ms + fraction_ms
        _remember(_SECOND_MS, text[17:], second_ms)
    return minute_ms + second_ms


def _remember(table: dict[str, int], key: str, value: int) -> None:
    if len(table) >= _PARTS_REMEMBERED:
        table.clear()
    table[key] = value


# The minutes (``YYYY-MM-DDTHH:MM:`` → its first millisecond) and seconds within a minute
# (``SS.sssZ`` → milliseconds) of canonical instants seen: only checked parts ever enter.
_MINUTE_MS: Final[dict[str, int]] = {}
_SECOND_MS: Final[dict[str, int]] = {}
_DAY_MS: Final[dict[str, int]] = {}
"""The dates (``YYYY-MM-DDT`` → its first millisecond) of canonical instants seen."""
_CANONICAL_DATE: Final = re.compile(_DATE + "T")
_TIME_OF_DAY_MS: Final = {text: minute * 60_000 for minute, text in enumerate(_HOUR_MINUTE)}
_WHOLE_SECOND_MS: Final = {text: second * MS_PER_SECOND for second, text in enumerate(_SECOND)}
_FRACTION_MS: Final = {text: ms for ms, text in enumerate(_MILLISECOND)}
_PARTS_REMEMBERED: Final = 1 << 16

KNOWN_DATE_MS: Final[Mapping[str, int]] = _DAY_MS
"""The dates (``YYYY-MM-DDT``) :func:`canonical_instant` has checked so far, each with its
first millisecond. With :data:`TIME_OF_DAY_MS` and :data:`KNOWN_SECOND_MS`: a text of which a
known date (its first 11 characters), a time of day (the next 6) and a known second (the rest)
are found is canonical, and its instant is the sum of the three (what a loop over many instants
at new minutes can look up without a call each; any part not found, it asks
:func:`canonical_instant`, which says whether the text is canonical and remembers its parts)."""
TIME_OF_DAY_MS: Final[Mapping[str, int]] = _TIME_OF_DAY_MS
"""Every valid ``HH:MM:`` with its first millisecond in the day."""
KNOWN_SECOND_MS: Final[Mapping[str, int]] = _SECOND_MS
"""The seconds within a minute (``SS.sssZ``) :func:`canonical_instant` has checked so far, each
with its milliseconds."""


_CANONICAL_LENGTH: Final = len("2026-05-01T09:00:00.000Z")
_ROW: Final = _CANONICAL_LENGTH + 1
_AT_ONCE: Final = 8
"""Fewer texts than this are checked one by one (:func:`canonical_instant`)."""
_CLASSES: Final = bytes(
    b"#"[0] if byte in b"0123456789" else byte if byte in b"-T:.Z\n" else b"?"[0]
    for byte in range(256)
)
"""Each byte's class: ``#`` for a digit, the separators of the form themselves, ``?`` else."""
_ROW_CLASSES: Final = b"####-##-##T##:##:##.###Z\n"


class _RowBytes(dict[int, tuple[int, int, bytes]]):
    """For ``n`` rows: the integers of ``n`` bytes each 1, and each ``0x30`` (the digit 0), and
    the classes of ``n`` canonical rows."""

    def __missing__(self, count: int) -> tuple[int, int, bytes]:
        found = (
            int.from_bytes(b"\x01" * count, "big"),
            int.from_bytes(b"0" * count, "big"),
            _ROW_CLASSES * count,
        )
        if count <= _ROWS_REMEMBERED:
            self[count] = found
        return found


_BYTES_OF: Final = _RowBytes()
_ROWS_REMEMBERED: Final = 4096


def all_canonical(texts: Sequence[str]) -> bool:
    """Whether every one of ``texts`` is in the canonical form: what ``canonical_instant(text)
    is not None`` says of each, for many at once (a chunk of a long log's instants, at new
    minutes or not), by operations over all of them at once rather than a step per text.

    The canonical form is fixed-width and holds no newline, so the texts joined by newlines are
    that many canonical instants exactly when the joined text has the length of that many and
    their separators, each of its characters is of the class its column wants (a digit, or the
    one separator), and each row's fields are in range. The classes are compared in one
    ``bytes.translate`` and one comparison; the fields are checked a column at a time, each
    column's digits read as one integer holding a digit per byte, whose bytes are tested all at
    once by adding a constant and masking each byte's top bit (no byte carries into the next).
    A row whose day is 29 or later (the calendar decides: month, leap year) is asked of
    :func:`canonical_instant`, and so is every row when the chunk holds too few texts for this
    to pay.
    """
    count = len(texts)
    if count < _AT_ONCE:
        return all(map(_is_canonical, texts))
    joined = "\n".join(texts)
    if len(joined) != (_CANONICAL_LENGTH + 1) * count - 1 or not joined.isascii():
        return False
    data = joined.encode("ascii") + b"\n"
    ones, zeros, classes = _BYTES_OF[count]
    if data.translate(_CLASSES) != classes:
        return False

    def column(at: int) -> int:
        """The digits of column ``at``, one per byte of an integer, as their values 0-9."""
        return int.from_bytes(data[at::_ROW], "big") - zeros

    top = ones * 0x80

    def each_at_least(value: int, least: int) -> int:
        """The top bit of each byte of ``value`` (each 0-99) that is at least ``least``."""
        return (value + ones * (0x80 - least)) & top

    year = column(0) | column(1) | column(2) | column(3)
    month = column(5) * 10 + column(6)
    day = column(8) * 10 + column(9)
    hour = column(11) * 10 + column(12)
    if (
        each_at_least(year, 1) != top  # not the year 0000
        or each_at_least(month, 1) != top  # month 1-12
        or each_at_least(month, 13)
        or each_at_least(day, 1) != top  # day 1-31
        or each_at_least(day, 32)
        or each_at_least(hour, 24)  # hour 0-23
        or each_at_least(column(14), 6)  # the tens of the minute: 0-5
        or each_at_least(column(17), 6)  # the tens of the second: 0-5
    ):
        return False
    # Day 31 only in a month of 31 days; a day after the 28th of February: by the calendar.
    short = 0
    for thirty in (4, 6, 9, 11):
        short |= top ^ each_at_least(month ^ (ones * thirty), 1)
    if short & each_at_least(day, 31):
        return False
    february = top ^ each_at_least(month ^ (ones * 2), 1)
    late = february & each_at_least(day, 29)
    return not late or all(map(_is_canonical, compress(texts, late.to_bytes(count, "big"))))


def _is_canonical(text: str) -> bool:
    return canonical_instant(text) is not None


def instant_of_canonical(text: str) -> Instant:
    """The instant of ``text``, which the caller knows to be canonical (a decoded record field):
    :func:`parse_instant`, named for what the caller knows."""
    return parse_instant(text)


def why_not_canonical(text: str) -> str:
    """Why ``text``, which is not a canonical instant, is not one."""
    match = _SHAPE.fullmatch(text)
    if match is None:
        return f"expected an instant of the form YYYY-MM-DDTHH:MM:SS.sssZ, got {text!r}"
    year, month, day = map(int, match.groups()[:3])
    if year == 0 or not 1 <= month <= 12 or not 1 <= day <= days_in_month(year, month):
        return f"{text!r} is not a real calendar date"
    return f"{text!r} is not a real time of day"
