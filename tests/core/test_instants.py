from __future__ import annotations

import datetime as dt
from random import Random
from typing import Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from session_schedule.core.instants import (
    CANONICAL_INSTANT,
    MAX_INSTANT,
    MIN_INSTANT,
    Instant,
    all_canonical,
    canonical_instant,
    civil_from_days,
    days_from_civil,
    describe_instant,
    format_instant,
    milliseconds,
    parse_instant,
)

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (MIN_INSTANT, "0001-01-01T00:00:00.000Z"),
        (MAX_INSTANT, "9999-12-31T23:59:59.999Z"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z"),
        (-61_851_600_000_000 + 1_234, "0010-01-01T00:00:01.234Z"),
    ],
)
def test_format_and_parse_known_instants(ms: int, text: str) -> None:
    assert format_instant(Instant(ms)) == text
    assert parse_instant(text) == ms


@given(st.integers(min_value=MIN_INSTANT, max_value=MAX_INSTANT))
def test_format_agrees_with_datetime_and_round_trips(ms: int) -> None:
    expected = EPOCH + dt.timedelta(milliseconds=ms)
    text = format_instant(Instant(ms))
    assert text == (
        f"{expected.year:04d}-{expected.month:02d}-{expected.day:02d}T"
        f"{expected.hour:02d}:{expected.minute:02d}:{expected.second:02d}."
        f"{expected.microsecond // 1000:03d}Z"
    )
    assert parse_instant(text) == ms


@given(st.integers(min_value=-800_000, max_value=3_000_000))
def test_civil_days_round_trip(days: int) -> None:
    assert days_from_civil(*civil_from_days(days)) == days


@pytest.mark.parametrize("ms", [MIN_INSTANT - 1, MAX_INSTANT + 1])
def test_format_refuses_out_of_range(ms: int) -> None:
    with pytest.raises(ValueError, match=r"outside years 0001-9999"):
        format_instant(Instant(ms))


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (MIN_INSTANT, "0001-01-01T00:00:00.000Z"),
        (MAX_INSTANT, "9999-12-31T23:59:59.999Z"),
        (0, "1970-01-01T00:00:00.000Z"),
        # Outside the range, the year as ISO 8601 writes it; year 0000 is a leap year.
        (MIN_INSTANT - 1, "0000-12-31T23:59:59.999Z"),
        (MIN_INSTANT - 307 * 86_400_000, "0000-02-29T00:00:00.000Z"),
        (MIN_INSTANT - 366 * 86_400_000, "0000-01-01T00:00:00.000Z"),
        (MIN_INSTANT - 366 * 86_400_000 - 60_000, "-0001-12-31T23:59:00.000Z"),
        (MAX_INSTANT + 1, "10000-01-01T00:00:00.000Z"),
    ],
)
def test_describe_instant(ms: int, text: str) -> None:
    assert describe_instant(ms) == text


@given(st.integers(min_value=MIN_INSTANT, max_value=MAX_INSTANT))
def test_describe_instant_is_the_canonical_form_in_the_range(ms: int) -> None:
    assert describe_instant(ms) == format_instant(Instant(ms))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "2026-01-01T00:00:00Z",
            "expected an instant of the form YYYY-MM-DDTHH:MM:SS.sssZ, got '2026-01-01T00:00:00Z'",
        ),
        (
            "2026-01-01T00:00:00.000z",
            "expected an instant of the form YYYY-MM-DDTHH:MM:SS.sssZ, "
            "got '2026-01-01T00:00:00.000z'",
        ),
        (
            "2026-01-01T00:00:00.000Z\n",
            "expected an instant of the form YYYY-MM-DDTHH:MM:SS.sssZ, "
            "got '2026-01-01T00:00:00.000Z\\n'",
        ),
        (
            "2026-01-01T00:00:00.000+00:00",
            "expected an instant of the form YYYY-MM-DDTHH:MM:SS.sssZ, "
            "got '2026-01-01T00:00:00.000+00:00'",
        ),
        (
            "\uff12026-01-01T00:00:00.000Z",
            "expected an instant of the form YYYY-MM-DDTHH:MM:SS.sssZ, "
            "got '\uff12026-01-01T00:00:00.000Z'",
        ),
        ("2025-02-29T00:00:00.000Z", "'2025-02-29T00:00:00.000Z' is not a real calendar date"),
        ("0000-01-01T00:00:00.000Z", "'0000-01-01T00:00:00.000Z' is not a real calendar date"),
        ("2026-13-01T00:00:00.000Z", "'2026-13-01T00:00:00.000Z' is not a real calendar date"),
        ("2026-04-31T00:00:00.000Z", "'2026-04-31T00:00:00.000Z' is not a real calendar date"),
        ("2026-04-00T00:00:00.000Z", "'2026-04-00T00:00:00.000Z' is not a real calendar date"),
        ("2026-04-01T24:00:00.000Z", "'2026-04-01T24:00:00.000Z' is not a real time of day"),
        ("2026-04-01T23:60:00.000Z", "'2026-04-01T23:60:00.000Z' is not a real time of day"),
        ("2026-04-01T23:59:60.000Z", "'2026-04-01T23:59:60.000Z' is not a real time of day"),
    ],
)
def test_parse_rejects_everything_but_the_canonical_form(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_instant(text)
    assert str(caught.value) == message


def test_leap_years_follow_the_gregorian_rule() -> None:
    assert parse_instant("2000-02-29T00:00:00.000Z") == 951_782_400_000
    assert parse_instant("2024-02-29T00:00:00.000Z") > 0
    with pytest.raises(ValueError, match="not a real calendar date"):
        parse_instant("1900-02-29T00:00:00.000Z")


@pytest.mark.parametrize(
    ("seconds", "ms"),
    [(2.007, 2_007), (-2.007, -2_007), (0.0025, 2), (-0.0025, -2), (0.0035, 4), (1.0015, 1_002),
     (3, 3_000), (-3, -3_000), (0.0, 0), (1e-9, 0), (123456789.123, 123_456_789_123)],
)  # fmt: skip
def test_milliseconds_rounds_the_decimal_value_half_to_even(seconds: float, ms: int) -> None:
    assert milliseconds(seconds) == ms


@given(ms=st.integers(min_value=-(10**15), max_value=10**15))
def test_milliseconds_of_n_thousandths_is_n(ms: int) -> None:
    assert milliseconds(ms / 1000) == ms


def test_milliseconds_refuses_non_finite_numbers() -> None:
    with pytest.raises(ValueError, match=r"^-inf seconds is not a finite duration$"):
        milliseconds(float("-inf"))


# The canonical instants of years 0001-9999, and texts that are nearly one: a canonical text with
# one character replaced, inserted or dropped.
_canonical = st.integers(MIN_INSTANT, MAX_INSTANT).map(lambda ms: format_instant(Instant(ms)))
_near_misses = st.one_of(
    st.tuples(_canonical, st.integers(0, 23), st.characters(codec="utf-8")).map(
        lambda t: t[0][: t[1]] + t[2] + t[0][t[1] + 1 :]
    ),
    st.tuples(_canonical, st.integers(0, 24), st.characters(codec="utf-8")).map(
        lambda t: t[0][: t[1]] + t[2] + t[0][t[1] :]
    ),
    st.tuples(_canonical, st.integers(0, 23)).map(lambda t: t[0][: t[1]] + t[0][t[1] + 1 :]),
)


def _fully_checked(text: str) -> int | None:
    """What the canonical form's expression and ``datetime`` say of ``text``."""
    if CANONICAL_INSTANT.fullmatch(text) is None:
        return None
    return (dt.datetime.fromisoformat(text) - EPOCH) // dt.timedelta(milliseconds=1)


@given(st.lists(_canonical, min_size=1, max_size=8), st.lists(_near_misses, max_size=8))
def test_the_remembered_minutes_and_seconds_accept_exactly_the_canonical_form(
    seen: list[str], others: list[str]
) -> None:
    # Seeing instants fills the tables; every minute of one followed by every second of
    # another is then known, and must still mean what the full check says.
    for text in seen:
        assert canonical_instant(text) == _fully_checked(text)
    spliced = [minute[:17] + second[17:] for minute in seen for second in seen]
    for text in spliced + others + [text[:17] for text in seen] + [text[17:] for text in seen]:
        assert canonical_instant(text) == _fully_checked(text), text


@given(_canonical)
def test_parse_instant_round_trips_through_the_remembered_parts(text: str) -> None:
    assert format_instant(parse_instant(text)) == text
    assert format_instant(parse_instant(text)) == text


_joined_pairs = st.tuples(_canonical, _canonical).map(lambda t: t[0] + "\n" + t[1])


@given(st.lists(st.one_of(_canonical, _canonical, _near_misses, _joined_pairs), max_size=12))
def test_many_instants_are_canonical_together_exactly_when_each_is(texts: list[str]) -> None:
    assert all_canonical(texts) == all(_fully_checked(text) is not None for text in texts)


@pytest.mark.parametrize(
    ("texts", "canonical"),
    [
        ([], True),
        (["2024-02-29T23:59:59.999Z", "0001-01-01T00:00:00.000Z"], True),
        (["2025-02-29T00:00:00.000Z"], False),
        # Joined, these two are two canonical instants; neither is one.
        (["2026-05-01T09:00:00.000Z\n2026-05-01T09:00:00.000Z", ""], False),
        (["2026-05-01T09:00:00.000Z\n", "2026-05-01T09:00:00.000Z"], False),
        (["2026-05-01T09:00:00.000Z", "2026-05-01T09:00:00.000Z\n"], False),
    ],
)
def test_instants_joined_by_newlines_are_not_taken_for_others(
    texts: list[str], canonical: bool
) -> None:
    assert all_canonical(texts) is canonical


@given(st.lists(st.one_of(_canonical, _near_misses), max_size=8))
def test_an_unseen_minute_or_second_is_checked_in_full(texts: list[str]) -> None:
    # Whatever is remembered already, each text means what the full check says; a text whose
    # minute is valid and whose second is not (or the reverse) leaves only its valid part.
    for text in texts:
        assert canonical_instant(text) == _fully_checked(text), text
        assert canonical_instant(text[:17] + "99.000Z") is None
        assert canonical_instant("2026-13-01T00:00:" + text[17:]) is None


# A canonical instant with one field set near the edge of its range or past it: the year 0000,
# month 0 or 13, the 29th to 32nd of a month (February of leap years and others, months of 30
# days), hour 24, minute or second 60 and more.
_FIELD_AT: Final = {"year": 0, "month": 5, "day": 8, "hour": 11, "minute": 14, "second": 17}
_edge_fields = st.one_of(
    st.tuples(_canonical, st.just("year"), st.sampled_from([0, 1, 1900, 2000, 2024, 2025])),
    st.tuples(_canonical, st.just("month"), st.sampled_from([0, 2, 4, 9, 10, 11, 12, 13, 20])),
    st.tuples(_canonical, st.just("day"), st.sampled_from([0, 10, 28, 29, 30, 31, 32, 40])),
    st.tuples(_canonical, st.just("hour"), st.sampled_from([9, 19, 20, 23, 24, 29, 30])),
    st.tuples(_canonical, st.sampled_from(["minute", "second"]), st.sampled_from([59, 60, 69, 99])),
).map(
    lambda t: (
        t[0][: _FIELD_AT[t[1]]]
        + ("%04d" if t[1] == "year" else "%02d") % t[2]
        + t[0][_FIELD_AT[t[1]] + (4 if t[1] == "year" else 2) :]
    )
)


@given(
    st.lists(_canonical, min_size=8, max_size=40),
    st.lists(_edge_fields, min_size=1, max_size=2),
    st.lists(st.one_of(_near_misses, _joined_pairs), max_size=1),
    st.randoms(use_true_random=False),
)
def test_many_instants_at_the_edges_of_their_fields_are_canonical_exactly_when_each_is(
    texts: list[str], edges: list[str], odd: list[str], random: Random
) -> None:
    # Enough texts for all_canonical to check them a column at a time, all canonical but one
    # or two near the edges of their fields (and now and then one nearly canonical).
    for text in edges + odd:
        texts.insert(random.randint(0, len(texts)), text)
    assert all_canonical(texts) == all(_fully_checked(text) is not None for text in texts)


@pytest.mark.parametrize(
    "text",
    [
        "2024-02-29T12:00:00.000Z",
        "2000-02-29T12:00:00.000Z",
        "2025-02-29T12:00:00.000Z",
        "2100-02-29T12:00:00.000Z",
        "2024-02-30T12:00:00.000Z",
        "2026-04-30T12:00:00.000Z",
        "2026-04-31T12:00:00.000Z",
        "2026-11-31T12:00:00.000Z",
        "2026-12-31T12:00:00.000Z",
        "2026-01-32T12:00:00.000Z",
        "2026-01-00T12:00:00.000Z",
        "2026-00-01T12:00:00.000Z",
        "2026-13-01T12:00:00.000Z",
        "0000-01-01T12:00:00.000Z",
        "0001-01-01T00:00:00.000Z",
        "2026-05-01T23:59:59.999Z",
        "2026-05-01T24:00:00.000Z",
        "2026-05-01T30:00:00.000Z",
        "2026-05-01T12:60:00.000Z",
        "2026-05-01T12:00:60.000Z",
        "2026-05-01T12:00:00.000z",
        "2026-05-01 12:00:00.000Z",
    ],
)
def test_one_instant_among_many_is_checked_field_by_field(text: str) -> None:
    texts = [format_instant(Instant(1_780_000_000_000 + k * 61_001)) for k in range(20)]
    texts.insert(7, text)
    assert all_canonical(texts) is (_fully_checked(text) is not None)
