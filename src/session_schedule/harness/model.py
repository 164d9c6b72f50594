"""The model behind the reference harness: a small port, and an OpenAI-compatible client."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal, Protocol, final

import msgspec

from session_schedule.session.message import ToolCall

if TYPE_CHECKING:
    from openai import AsyncOpenAI

REQUEST_TIMEOUT_SECONDS: Final = 120.0
"""How long one model request may take (the SDK's own default is ten minutes, during which the
turn — and every reminder waiting for the agent to be idle — would be stuck)."""

_TOOL_CHOICE: Final[Literal["auto"]] = "auto"

ChatMessage = dict[str, object]
"""One message in the OpenAI Chat Completions format."""


@final
class ModelReply(msgspec.Struct, frozen=True, kw_only=True):
    content: str
    tool_calls: tuple[ToolCall, ...] = ()


@final
class ModelError(Exception):
    """The endpoint failed (unreachable, refused, rate-limited, malformed reply).

    The message is shown to the person as it is; the session is not affected. The turn queue
    classifies it by its cause (the SDK's error, chained with ``raise ... from``) unless
    ``transient`` says whether trying again may help.
    """

    def __init__(self, message: str, *, transient: bool | None = None) -> None:
        super().__init__(message)
        self.transient = transient


class Model(Protocol):
    @property
    def name(self) -> str: ...

    async def respond(
        self, messages: list[ChatMessage], tools: list[dict[str, object]]
    ) -> ModelReply:
        """The model's next turn for ``messages``, given ``tools``; raises ``ModelError``."""
        ...


@final
class OpenAIChatModel:
    """Any OpenAI-compatible Chat Completions endpoint, through the official ``openai`` SDK.

    OpenAI itself, Ollama, vLLM, the llama.cpp server, LM Studio …: ``base_url`` picks the
    endpoint, ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` work as the SDK documents.
    """

    def __init__(
        self, client: AsyncOpenAI, model: str, *, timeout_seconds: float = REQUEST_TIMEOUT_SECONDS
    ) -> None:
        self._client = client
        self._model = model
        self._timeout = timeout_seconds

    @property
    def name(self) -> str:
        return self._model

    async def respond(
        self, messages: list[ChatMessage], tools: list[dict[str, object]]
    ) -> ModelReply:
        import openai  # noqa: PLC0415 - only a configured model needs the SDK

        try:
            completion = await self._client.chat.completions.create(
                model=self._model,
                messages=messages,  # type: ignore[arg-type]
                tools=tools,  # type: ignore[arg-type]
                # Explicit, although it is the API's default when tools are given: some local
                # OpenAI-compatible servers (llama.cpp's among them) offer the model no tools
                # unless the request says so.
                tool_choice=_TOOL_CHOICE,
                timeout=self._timeout,
            )
        except openai.APIError as error:
            raise ModelError(f"the model endpoint failed: {_describe(error)}") from error
        if not completion.choices:
            raise ModelError("the model endpoint returned no choices")
        message = completion.choices[0].message
        calls = tuple(
            ToolCall(id=call.id, name=call.function.name, arguments=call.function.arguments)
            for call in message.tool_calls or ()
            if call.type == "function"
        )
        return ModelReply(content=message.content or "", tool_calls=calls)


def _describe(error: Exception) -> str:
    text = str(error).strip() or type(error).__name__
    cause = error.__cause__
    if cause is not None and str(cause).strip() and str(cause).strip() not in text:
        # A connection error's own text is generic; the cause says what actually happened.
        text = f"{text.rstrip('.')} ({str(cause).strip()})"
    return text if len(text) <= 300 else text[:299] + "…"
