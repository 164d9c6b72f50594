"""A tiny OpenAI-compatible Chat Completions server on loopback that plays a scripted model.

It answers ``POST /v1/chat/completions`` with the next scripted reply, in the real response shape
(``id``, ``object: "chat.completion"``, ``created``, ``model``, ``choices[0].message`` with
``tool_calls``, ``finish_reason``, ``usage``), and records every request: its headers and its
JSON body. Standard library only; a thread serves it for the ``with`` block.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Self

from tests.cli.chat_process import TIMEOUT

PATH: Final = "/v1/chat/completions"


@dataclass(frozen=True)
class Answer:
    """The model replies with text."""

    content: str


@dataclass(frozen=True)
class CallTool:
    """The model calls one tool; ``arguments`` is the JSON text it sends."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Fail:
    """The endpoint fails with ``status``, and tells the SDK not to retry (unless ``retry``)."""

    status: int
    message: str
    retry: bool = False


Reply = Answer | CallTool | Fail
Responder = Callable[[dict[str, Any]], Reply]
"""Picks the reply to a request body (for a script as long as the test runs)."""


@dataclass
class Recorded:
    headers: dict[str, str]
    """Names in lower case."""
    body: dict[str, Any]


@dataclass
class _Script:
    replies: list[Reply]
    responder: Responder | None = None
    requests: list[Recorded] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)


class ScriptedEndpoint:
    """``with ScriptedEndpoint([...]) as endpoint:`` serves ``endpoint.base_url``.

    ``replies`` is the script, one reply per request, or a :data:`Responder` that picks each.
    ``port`` is the loopback port to serve (default: any free one).
    """

    def __init__(self, replies: list[Reply] | Responder, *, port: int = 0) -> None:
        self._script = (
            _Script([], responder=replies) if callable(replies) else _Script(list(replies))
        )
        script = self._script

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                try:
                    body = json.loads(self.rfile.read(length))
                except json.JSONDecodeError:  # the client was killed in the middle of sending
                    return
                with script.changed:
                    script.requests.append(
                        Recorded(
                            {name.lower(): value for name, value in self.headers.items()}, body
                        )
                    )
                    number = len(script.requests)
                    if script.responder is not None:
                        reply: Reply = script.responder(body)
                    elif script.replies:
                        reply = script.replies.pop(0)
                    else:
                        reply = Fail(500, "the script has no reply left")
                    script.changed.notify_all()
                if self.path != PATH:
                    reply = Fail(404, f"no route {self.path}")
                if isinstance(reply, Fail):
                    self._send(
                        reply.status,
                        {
                            "error": {
                                "message": reply.message,
                                "type": "server_error",
                                "param": None,
                                "code": None,
                            }
                        },
                        retry=reply.retry,
                    )
                else:
                    self._send(200, _completion(number, str(body.get("model")), reply))

            def _send(self, status: int, payload: dict[str, Any], *, retry: bool = False) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("x-should-retry", "true" if retry else "false")
                self.end_headers()
                with contextlib.suppress(ConnectionError):  # the client was killed meanwhile
                    self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="endpoint")

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def requests(self) -> list[Recorded]:
        with self._script.changed:
            return list(self._script.requests)

    def wait_for_requests(self, count: int, timeout: float = TIMEOUT) -> list[Recorded]:
        with self._script.changed:
            if not self._script.changed.wait_for(
                lambda: len(self._script.requests) >= count, timeout
            ):
                raise AssertionError(
                    f"expected {count} requests within {timeout} s, got "
                    f"{len(self._script.requests)}"
                )
            return list(self._script.requests)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def _completion(number: int, model: str, reply: Answer | CallTool) -> dict[str, Any]:
    if isinstance(reply, Answer):
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
        finish_reason = "stop"
    else:
        message = {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {
                    "id": reply.call_id,
                    "type": "function",
                    "function": {"name": reply.name, "arguments": reply.arguments},
                }
            ],
        }
        finish_reason = "tool_calls"
    return {
        "id": f"chatcmpl-scripted-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }
