"""Session ids: one accepted form, fresh ones are of it."""

from __future__ import annotations

import pytest

from session_schedule.session import SessionNotFound, parse_session_id
from session_schedule.session.ids import chosen_session_id, new_session_id, require_session_id


@pytest.mark.parametrize("text", ["s_aaaaaaaaaaaa", "s_0123456789az", "s_zzzzzzzzzzzz"])
def test_valid_ids(text: str) -> None:
    assert parse_session_id(text) == text
    assert require_session_id(text) == text
    assert chosen_session_id(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "s_",
        "s_aaaaaaaaaaa",
        "s_aaaaaaaaaaaaa",
        "S_aaaaaaaaaaaa",
        "s_AAAAAAAAAAAA",
        "s_aaaaaaaaaaa/",
        "../aaaaaaaaaa",
        "s_aaaaaaaaaaaa\n",
        "s_aaaaaaaaaaa\u0131",
        "s-aaaaaaaaaaaa",
    ],
)
def test_invalid_ids(text: str) -> None:
    assert parse_session_id(text) is None
    with pytest.raises(SessionNotFound, match="is not a session id"):
        require_session_id(text)
    with pytest.raises(ValueError, match="is not a session id"):
        chosen_session_id(text)


def test_fresh_ids_are_valid_and_distinct() -> None:
    ids = {new_session_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(parse_session_id(session_id) == session_id for session_id in ids)
    assert chosen_session_id(None) is None
