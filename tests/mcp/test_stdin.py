"""The server's stdin: every line bounded, and every request that does not decode answered with
its JSON-RPC error (the SDK alone drops those without a word, and buffers a line forever)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from session_schedule.mcp.stdin import ARGUMENTS_TEXT, MAX_DEPTH, StdinLines, screen
from session_schedule.runtime.clock import SystemClock
from session_schedule.session.jsonl import JsonlSessionStore

PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'


def reader(chunks: list[bytes]) -> Callable[[], Awaitable[bytes]]:
    pending = list(chunks)

    async def read_bytes() -> bytes:
        return pending.pop(0) if pending else b""

    return read_bytes


async def run(chunks: list[bytes], max_line_bytes: int = 1000) -> tuple[list[str], list[object]]:
    answers: list[object] = []

    async def answer(line: str) -> None:
        assert line.endswith("\n")
        answers.append(json.loads(line))

    lines = StdinLines(reader(chunks), answer, max_line_bytes=max_line_bytes)
    return [line async for line in lines], answers


def error(code: int, message: str, request_id: object = None) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


NOT_JSON = "the message is not valid JSON; send one JSON-RPC message per line."
LONE_SURROGATE = (
    "the message is not valid JSON: it holds a lone surrogate escape, half of a character that "
    "cannot be encoded; send the whole character or remove it."
)
NOT_A_NUMBER = "the message is not valid JSON: JSON has no NaN or Infinity; send finite numbers."
BAD_ID = "the id must be a string or an integer; send the request again with one."


@pytest.mark.parametrize(
    ("line", "answer"),
    [
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "\\ud800"}}',
            error(-32700, LONE_SURROGATE, 1),
        ),
        (
            # An id that no answer could carry.
            b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping", "params": {"x": "\\ud800"}}',
            error(-32700, LONE_SURROGATE),
        ),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"n": ' + b"7" * 4301 + b"}}",
            error(-32700, "a number in the message is out of range; send smaller numbers.", 1),
        ),
        (
            b'{"jsonrpc": "2.0", "id": "b", "method": "ping", "params": {"x": 1e999}}',
            error(-32700, "a number in the message is out of range; send smaller numbers.", "b"),
        ),
        (
            # Too deep to decode, not to read the id from: the sender gets its answer.
            b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": '
            + b"[" * 100
            + b"]" * 100
            + b"}",
            error(
                -32700,
                f"the message nests arrays or objects more than {MAX_DEPTH} deep; send less.",
                2,
            ),
        ),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": '
            + b"[" * 10_000
            + b"]" * 10_000
            + b"}",
            error(
                -32700,
                f"the message nests arrays or objects more than {MAX_DEPTH} deep; send less.",
            ),
        ),
        (
            b"[" + PING + b"]",
            error(-32600, "batches are not supported; send one JSON-RPC message per line."),
        ),
        (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', error(-32600, BAD_ID)),
        (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', error(-32600, BAD_ID)),
        (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', error(-32600, BAD_ID)),
        (
            b'{"jsonrpc": "2.0", "id": 3, "method": 7}',
            error(
                -32600,
                "the message is not a valid JSON-RPC 2.0 request; send jsonrpc, id, "
                "method and params.",
                3,
            ),
        ),
        (
            b'{"jsonrpc": "2.0", "id": "a", "params": {}}',
            error(
                -32600,
                "the message is not a valid JSON-RPC 2.0 request; send jsonrpc, id, "
                "method and params.",
                "a",
            ),
        ),
        (b"\xff\xfe", error(-32700, "the message is not valid UTF-8; send UTF-8 JSON.")),
        (b'"text"', error(-32600, "the message is not a JSON-RPC object; send one per line.")),
        (b"{", error(-32700, NOT_JSON)),
        (b'{"jsonrpc": "2.0", "id": 4, "method": "ping",}', error(-32700, NOT_JSON)),
        (
            # NaN and Infinity are not JSON: said so (the message once suggested a lone surrogate).
            b'{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"x": -Infinity}}',
            error(-32700, NOT_A_NUMBER, 5),
        ),
    ],
)
def test_a_line_that_does_not_decode_gets_the_json_rpc_error_it_deserves(
    line: bytes, answer: dict[str, object]
) -> None:
    text, answered = screen(line)
    assert text is None
    assert answered is not None
    assert json.loads(answered) == answer


def tool_call(
    arguments: bytes, *, name: bytes = b'"schedule_create"', head: bytes = b'"id": 7, '
) -> bytes:
    return (
        b'{"jsonrpc": "2.0", '
        + head
        + b'"method": "tools/call", "params": {"name": '
        + name
        + b', "arguments": '
        + arguments
        + b', "_meta": {"progressToken": 1}}}'
    )


@pytest.mark.parametrize(
    ("arguments", "text"),
    [
        (b'{"prompt": "\\ud800", "after_seconds": 60}', '{"prompt":"\\ud800","after_seconds":60}'),
        (b'{"prompt": "p", "after_seconds": 1e400}', '{"prompt":"p","after_seconds":1e400}'),
        (
            b'{"prompt": "p", "after_seconds": ' + b"9" * 5000 + b"}",
            '{"prompt":"p","after_seconds":' + "9" * 5000 + "}",
        ),
        (b'["\\udc00", -1e999]', '["\\udc00",-1e999]'),
    ],
)
def test_a_tool_call_that_does_not_decode_only_for_its_arguments_reaches_the_tool(
    arguments: bytes, text: str
) -> None:
    """A model's broken emoji or 1e400 in a tool's arguments was answered -32700, a protocol
    error the model never sees: the line now reaches the SDK with the arguments as JSON text,
    which the server hands to the tool."""
    passed, answered = screen(tool_call(arguments))
    assert answered is None
    assert passed is not None
    assert json.loads(passed) == {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "schedule_create", "_meta": {"progressToken": 1}, ARGUMENTS_TEXT: text},
    }


@pytest.mark.parametrize(
    ("line", "answer"),
    [
        (tool_call(b'{"prompt": "p", "after_seconds": NaN}'), error(-32700, NOT_A_NUMBER, 7)),
        (tool_call(b"{}", name=b'"\\ud800"'), error(-32700, LONE_SURROGATE, 7)),
        (
            tool_call(b'{"prompt": "p"}', head=b'"id": 7, "x": 1e400, '),
            error(-32700, "a number in the message is out of range; send smaller numbers.", 7),
        ),
        (tool_call(b'{"prompt": "\\ud800"}', head=b""), None),  # a notification
    ],
)
def test_a_tool_call_that_does_not_decode_elsewhere_is_still_a_parse_error(
    line: bytes, answer: dict[str, object] | None
) -> None:
    text, answered = screen(line)
    assert text is None
    assert (answered and json.loads(answered)) == answer


def test_good_messages_pass_and_blank_lines_and_bad_notifications_get_no_answer() -> None:
    assert screen(PING) == (PING.decode(), None)
    assert screen(b"  \r") == (None, None)
    # A notification is never answered, even one that does not decode as one.
    assert screen(b'{"jsonrpc": "2.0", "method": 7}') == (None, None)
    notification = b'{"jsonrpc": "2.0", "method": "notifications/x", "params": '
    assert screen(notification + b'{"x": "\\ud800"}}') == (None, None)
    assert screen(notification + b'{"x": 1e999}}') == (None, None)
    assert screen(notification + b"[" * 100 + b"]" * 100 + b"}") == (None, None)


async def test_lines_are_split_across_chunks_and_bad_ones_answered_in_order() -> None:
    lines, answers = await run([PING[:10], PING[10:] + b"\n[1]\n", PING + b"\n" + PING])
    assert lines == [PING.decode(), PING.decode(), PING.decode()]
    assert answers == [
        error(-32600, "batches are not supported; send one JSON-RPC message per line.")
    ]


async def test_a_line_past_the_bound_is_dropped_and_answered_once_without_buffering_it() -> None:
    too_long = error(-32600, "the message is longer than 1000 bytes; send less in one request.")
    # A long line in many chunks, then a good one: the long one is never held whole.
    chunks = [b"x" * 600] * 50 + [b"tail\n" + PING + b"\n"]
    lines, answers = await run(chunks)
    assert (lines, answers) == ([PING.decode()], [too_long])
    # A long line in one chunk with its newline, and one with no newline before the end.
    lines, answers = await run([b"y" * 1001 + b"\n" + PING + b"\n" + b"z" * 5000])
    assert (lines, answers) == ([PING.decode()], [too_long, too_long])


async def test_a_real_server_answers_every_bad_line_and_goes_on_serving(tmp_path: Path) -> None:
    session = await JsonlSessionStore(tmp_path).create(now=SystemClock().now())
    await session.close()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "session_schedule",
        "--data-dir",
        str(tmp_path),
        "mcp",
        session.id,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    bad = [
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "\\ud800"}}',
        b'{"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"n": ' + b"9" * 4301 + b"}}",
        b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": '
        + b"[" * 5000
        + b"]" * 5000
        + b"}",
        b"[" + PING + b"]",
        b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}',
        b'{"jsonrpc": "2.0", "id": 2.5, "method": "ping"}',
    ]
    initialize = {
        "jsonrpc": "2.0",
        "id": 10,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "stdin-test", "version": "1"},
        },
    }
    try:
        async with asyncio.timeout(30):
            process.stdin.write(json.dumps(initialize).encode() + b"\n")
            process.stdin.write(b"\n".join(bad) + b"\n")
            process.stdin.write(b'{"jsonrpc": "2.0", "id": 11, "method": "ping"}\n')
            await process.stdin.drain()
            answers = [json.loads(await process.stdout.readline()) for _ in range(len(bad) + 2)]
            codes = sorted(
                (answer["error"]["code"] for answer in answers if "error" in answer), reverse=True
            )
            assert codes == [-32600, -32600, -32600, -32700, -32700, -32700]
            assert {answer["id"] for answer in answers if "result" in answer} == {10, 11}
    finally:
        process.stdin.close()
        async with asyncio.timeout(30):
            await process.wait()
    assert process.returncode == 0


async def test_a_real_server_gives_the_tools_error_for_arguments_the_sdk_would_refuse(
    tmp_path: Path,
) -> None:
    """Arguments that do not decode (a lone surrogate, 1e400) were answered -32700, and
    arguments that are not an object -32602 with empty data: protocol errors the model never
    sees. Each is now the tool's error, ``isError: true`` with its ``{"ok": false}`` JSON."""
    session = await JsonlSessionStore(tmp_path).create(now=SystemClock().now())
    await session.close()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "session_schedule",
        "--data-dir",
        str(tmp_path),
        "mcp",
        session.id,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    too_large = (
        "a number in the arguments is too large to represent; send numbers such as "
        '{"prompt": "...", "after_seconds": 600}.'
    )
    surrogate = (
        "`prompt` contains the lone surrogate U+D800 at index 0, half of a character that cannot "
        "be encoded; send the whole character or remove it."
    )
    calls = [
        (b'{"prompt": "\\ud800", "after_seconds": 60}', "invalid_prompt", surrogate),
        (b'{"prompt": "p", "after_seconds": 1e400}', "invalid_selector", too_large),
        (b'{"prompt": "p", "after_seconds": ' + b"9" * 5000 + b"}", "invalid_selector", too_large),
        (b"[1, 2]", "invalid_selector", "the arguments must be a JSON object, not an array."),
        (b'"60"', "invalid_selector", "the arguments must be a JSON object, not a string."),
    ]
    lines = [
        b'{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": '
        b'"schedule_create", "arguments": %s}}' % (number, arguments)
        for number, (arguments, _, _) in enumerate(calls, 20)
    ]
    take = (
        b'{"jsonrpc": "2.0", "id": 30, "method": "tools/call", "params": {"name": '
        b'"schedule_followups_take", "arguments": [1]}}'
    )
    initialize = {
        "jsonrpc": "2.0",
        "id": 10,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "stdin-test", "version": "1"},
        },
    }
    try:
        async with asyncio.timeout(30):
            process.stdin.write(json.dumps(initialize).encode() + b"\n")
            assert json.loads(await process.stdout.readline())["id"] == 10
            process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
            process.stdin.write(b"\n".join([*lines, take]) + b"\n")
            await process.stdin.drain()
            answers = {}
            for _ in range(len(lines) + 1):
                answer = json.loads(await process.stdout.readline())
                answers[answer["id"]] = answer
    finally:
        process.stdin.close()
        async with asyncio.timeout(30):
            await process.wait()
    assert process.returncode == 0
    expected = {
        number: {"ok": False, "error": {"code": code, "message": message}}
        for number, (_, code, message) in enumerate(calls, 20)
    }
    expected[30] = {
        "ok": False,
        "error": {
            "code": "invalid_selector",
            "message": "schedule_followups_take takes no arguments; call it with {}.",
        },
    }
    assert sorted(answers) == sorted(expected)
    for number, result in expected.items():
        answer = answers[number]["result"]
        assert answer["isError"] is True
        assert "structuredContent" not in answer
        assert [json.loads(item["text"]) for item in answer["content"]] == [result]
