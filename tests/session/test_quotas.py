"""The ``schedule/quotas`` entry: strict decoding, canonical bytes, and what a store reads back."""

from __future__ import annotations

import pytest

from session_schedule.core.catalog import CATALOG
from session_schedule.core.instants import Instant, parse_instant
from session_schedule.core.quiet import QuietHours
from session_schedule.session.codec import encode_payload
from session_schedule.session.quotas import (
    QUOTAS_ENTRY_TYPE,
    QuietHoursField,
    decode_quotas,
    quotas_entry,
)

AT = Instant(parse_instant("2026-11-29T20:00:00.000Z"))


def test_absent_null_and_a_value_are_three_different_choices() -> None:
    entry = quotas_entry(
        at=AT,
        turns_per_day=None,
        quiet_hours=QuietHours(start="22:00", end="07:00", time_zone="Europe/Paris"),
    )
    data = encode_payload(QUOTAS_ENTRY_TYPE, entry)[1]
    assert data == (
        b'{"version":1,"at":"2026-11-29T20:00:00.000Z","turnsPerDay":null,'
        b'"quietHours":{"start":"22:00","end":"07:00","timeZone":"Europe/Paris"}}'
    )
    decoded = decode_quotas(data)
    assert decoded == entry
    assert decoded.quiet_hours == QuietHoursField(
        start="22:00", end="07:00", time_zone="Europe/Paris"
    )
    assert QUOTAS_ENTRY_TYPE in CATALOG
    assert CATALOG.entry(QUOTAS_ENTRY_TYPE) is not None


@pytest.mark.parametrize(
    ("data", "message"),  # the last: keys out of order
    [
        (
            b'{"version":1,"at":"2026-11-29T20:00:00.000Z","turnsPerDay":0}',
            "expected `int` >= 1 - at `$.turnsPerDay`",
        ),
        (
            b'{"version":2,"at":"2026-11-29T20:00:00.000Z"}',
            "invalid enum value 2 - at `$.version`",
        ),
        (
            b'{"version":1,"at":"2026-11-29T20:00:00.000Z","maxActive":null}',
            "expected `int`, got `null` - at `$.maxActive`",
        ),
        (
            b'{"version":1,"at":"2026-11-29T20:00:00.000Z","other":1}',
            "object contains unknown field `other`",
        ),
        (
            b'{"version":1,"at":"2026-11-29T20:00:00.000Z","quietHours":'
            b'{"start":"22:00","end":"22:00","timeZone":"UTC"}}',
            "quiet hours: the window opens and closes at 22:00; leave it out",
        ),
        (
            b'{"at":"2026-11-29T20:00:00.000Z","version":1}',
            "the bytes are not the canonical encoding of their value (whitespace, key order or "
            "escapes differ from what a writer produces)",
        ),
    ],
)
def test_the_decoder_is_strict(data: bytes, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        decode_quotas(data)
    assert str(raised.value) == message
