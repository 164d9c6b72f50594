"""The ``message`` entry: registration, wire form, strict decoding."""

from __future__ import annotations

import pytest

from session_schedule.core.catalog import CATALOG
from session_schedule.session import MessageEntry, ToolCall
from session_schedule.session.codec import encode_payload
from session_schedule.session.message import (
    MESSAGE_ENTRY,
    assistant_message,
    decode_message,
    tool_message,
    user_message,
)
from session_schedule.testing.session_contract import NOW
from tests import invalid_utf8

AT = '"at":"2026-05-01T09:00:00.000Z"'


def test_the_type_is_registered_under_its_declaration() -> None:
    entry = CATALOG.entry("message")
    assert entry is MESSAGE_ENTRY
    assert entry.declaration == "session_schedule.session.message.MessageEntry"
    assert entry.versions == (1,)
    assert CATALOG.decoder("message") is not None
    definitions = entry.schema["$defs"]
    assert isinstance(definitions, dict)
    assert set(definitions["MessageEntry"]["properties"]) == {
        "role",
        "content",
        "at",
        "origin",
        "toolCalls",
        "toolCallId",
    }


@pytest.mark.parametrize(
    ("message", "wire"),
    [
        (
            user_message("hi", at=NOW),
            f'{{"role":"user","content":"hi",{AT},"origin":"person"}}',
        ),
        (
            user_message("[reminder]", at=NOW, origin="followup"),
            f'{{"role":"user","content":"[reminder]",{AT},"origin":"followup"}}',
        ),
        (
            assistant_message("ok", at=NOW),
            f'{{"role":"assistant","content":"ok",{AT},"origin":"model"}}',
        ),
        (
            assistant_message(
                "", at=NOW, tool_calls=(ToolCall(id="c1", name="schedule_list", arguments="{}"),)
            ),
            f'{{"role":"assistant","content":"",{AT},"origin":"model",'
            '"toolCalls":[{"id":"c1","name":"schedule_list","arguments":"{}"}]}',
        ),
        (
            tool_message("[]", at=NOW, tool_call_id="c1"),
            f'{{"role":"tool","content":"[]",{AT},"origin":"tool","toolCallId":"c1"}}',
        ),
    ],
)
def test_wire_forms_round_trip(message: MessageEntry, wire: str) -> None:
    value, data = encode_payload("message", message)
    assert data == wire.encode()
    assert value == message
    assert decode_message(data) == message


@pytest.mark.parametrize(
    ("wire", "problem"),
    [
        ('{"role":"user","content":"x",' + AT + "}", "object missing required field `origin`"),
        (
            '{"role":"user","content":"x",' + AT + ',"origin":"person","extra":1}',
            "object contains unknown field `extra`",
        ),
        (
            '{"role":"system","content":"x",' + AT + ',"origin":"person"}',
            "invalid enum value 'system' - at `$.role`",
        ),
        (
            '{"role":"user","content":1,' + AT + ',"origin":"person"}',
            "expected `str`, got `int` - at `$.content`",
        ),
        (
            '{"role":"assistant","content":"x",' + AT + ',"origin":"person"}',
            "a assistant turn cannot have origin 'person'",
        ),
        (
            '{"role":"user","content":"x",' + AT + ',"origin":"person","toolCalls":[]}',
            "only an assistant turn may carry `toolCalls`",
        ),
        (
            '{"role":"tool","content":"x",' + AT + ',"origin":"tool"}',
            "a tool turn, and only a tool turn, carries `toolCallId`",
        ),
        (
            '{"role":"user","content":"x",' + AT + ',"origin":"person","toolCallId":"c"}',
            "a tool turn, and only a tool turn, carries `toolCallId`",
        ),
        (
            '{"role":"assistant","content":"",'
            + AT
            + ',"origin":"model","toolCalls":[{"id":"c","name":"f","arguments":"{"}]}',
            "tool call arguments are not JSON text - at `$.toolCalls[0].arguments`",
        ),
        (
            '{"role":"assistant","content":"",'
            + AT
            + ',"origin":"model","toolCalls":[{"id":"","name":"f","arguments":"{}"}]}',
            "expected `str` of length >= 1 - at `$.toolCalls[0].id`",
        ),
        ("{", "malformed JSON (Input data was truncated)"),
    ],
)
def test_strict_decoding(wire: str, problem: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        decode_message(wire.encode())
    assert str(caught.value) == problem


def test_a_non_canonical_instant_is_refused() -> None:
    with pytest.raises(ValueError, match=r"- at `\$\.at`$"):
        decode_message(
            b'{"role":"user","content":"x","at":"2026-05-01T09:00:00Z","origin":"person"}'
        )


def test_invalid_utf8_is_a_value_error() -> None:
    with pytest.raises(ValueError) as caught:
        decode_message(b'{"role":"user","content":"\xe1","at":"x","origin":"person"}')
    if invalid_utf8.MSGSPEC_CHECKS_UTF8:
        assert str(caught.value) == invalid_utf8.MALFORMED
    else:
        assert str(caught.value).startswith("invalid UTF-8 (")
