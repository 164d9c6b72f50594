"""The reference agent harness: a small, real agent loop that Schedule plugs into.

It is the example to read when wiring Schedule into your own loop. One worker task runs turns
one at a time from a queue; the transcript lives in the Session log as ``message`` entries; the
model's tool calls go to :class:`~session_schedule.tools.ScheduleTools`; and the four methods of
the Agent port are a few lines over the queue:

- **idle** — no turn running, none queued, no maintenance phase held;
- **maintenance** — entered only when idle; while it is held, the worker starts no turn;
- **followup(text)** — queue a follow-up turn (it starts when maintenance ends).

Prompts the person sends while a turn runs are queued, and the queued prompts are answered
together as one turn. Each turn's system message carries the current time and the turn's time
context (SPEC §2), computed from the zones reported with that turn's prompts — never stored.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Final, Literal, Self, TypeAlias, final

import msgspec

from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import format_instant
from session_schedule.core.time_context import time_context
from session_schedule.harness.model import ChatMessage, Model, ModelError
from session_schedule.harness.transcript import chat_messages, messages_of
from session_schedule.runtime.clock import Clock
from session_schedule.session.errors import SessionError
from session_schedule.session.message import (
    MESSAGE_ENTRY_TYPE,
    MessageEntry,
    ToolCall,
    assistant_message,
    tool_message,
    user_message,
)
from session_schedule.session.port import SessionHandle
from session_schedule.tools.handlers import ScheduleTools

logger = logging.getLogger(__name__)

SYSTEM_PROMPT: Final = (
    "You are a helpful assistant. You can set reminders for the user with the schedule tools "
    "(schedule_create, schedule_list, schedule_delete). A reminder comes back into this "
    "conversation as a new turn that starts with '[session-schedule] Reminder follow-up'; when "
    "one arrives, act on its prompt."
)
MAX_TOOL_ROUNDS: Final = 8


@final
class PersonPrompt(msgspec.Struct, frozen=True):
    text: str
    zone: str | None
    """The IANA zone reported with the prompt (a browser's), if any."""


@final
class FollowupTurn(msgspec.Struct, frozen=True):
    text: str


@final
class ToolTurn(msgspec.Struct, frozen=True):
    """A tool call the person makes directly (offline mode), recorded as a model would."""

    name: str
    arguments: Mapping[str, object]


Turn: TypeAlias = PersonPrompt | FollowupTurn | ToolTurn


@final
class ChatEvent(msgspec.Struct, frozen=True, kw_only=True):
    """What the harness tells its front end: a new transcript turn, or a problem to show."""

    kind: Literal["message", "error"]
    message: MessageEntry | None = None
    text: str = ""


@final
class ChatAgent:
    """A chat agent over a live Session, implementing the Agent port for Schedule.

    ``model=None`` is offline mode: prompts are recorded, nobody answers, and the person calls
    the tools directly with :meth:`submit_tool`.
    """

    def __init__(
        self,
        session: SessionHandle,
        *,
        clock: Clock,
        model: Model | None,
        time_zone: str | None = None,
        on_event: Callable[[ChatEvent], None] | None = None,
    ) -> None:
        self._session = session
        self._clock = clock
        self._model = model
        self._time_zone = time_zone
        self._on_event = on_event or (lambda _event: None)
        self._tools: ScheduleTools | None = None
        self._queue: deque[Turn] = deque()
        self._running = False
        self._maintenance = False
        self._idle = asyncio.Event()
        self._ready = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._refresh()

    @property
    def model(self) -> Model | None:
        return self._model

    @property
    def transcript(self) -> list[MessageEntry]:
        return messages_of(self._session.entries)

    def bind(self, tools: ScheduleTools) -> None:
        """Give the agent its tools (they need the live Schedule, which needs this agent)."""
        self._tools = tools

    # -- life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        self._worker = asyncio.create_task(self._work(), name=f"agent {self._session.id}")

    async def close(self) -> None:
        """Stop the worker; a turn in progress is cancelled."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # -- the person's side -------------------------------------------------------------------

    def submit(self, text: str, *, zone: str | None = None) -> None:
        """Queue a prompt from the person; ``zone`` is the zone reported with it, if any
        (without one, the ``time_zone`` the agent was configured with is used)."""
        self._enqueue(PersonPrompt(text, zone or self._time_zone))

    def submit_tool(self, name: str, arguments: Mapping[str, object]) -> None:
        """Queue a tool call made by the person directly (offline mode)."""
        self._enqueue(ToolTurn(name, arguments))

    # -- the Agent port ----------------------------------------------------------------------

    async def wait_idle(self) -> None:
        await self._idle.wait()

    def begin_maintenance(self) -> bool:
        if not self._idle.is_set():
            return False
        self._maintenance = True
        self._refresh()
        return True

    def end_maintenance(self) -> None:
        self._maintenance = False
        self._refresh()

    def followup(self, message: str) -> None:
        if self._worker is None or self._worker.done():
            raise RuntimeError("the agent is not running")
        self._enqueue(FollowupTurn(message))

    # -- the loop ----------------------------------------------------------------------------

    def _enqueue(self, turn: Turn) -> None:
        self._queue.append(turn)
        self._refresh()

    def _refresh(self) -> None:
        busy = self._running or bool(self._queue) or self._maintenance
        if busy:
            self._idle.clear()
        else:
            self._idle.set()
        if self._queue and not self._running and not self._maintenance:
            self._ready.set()
        else:
            self._ready.clear()

    def _take(self) -> list[Turn]:
        """The next turn: one follow-up or tool call, or every prompt queued in a row."""
        first = self._queue.popleft()
        taken: list[Turn] = [first]
        while isinstance(first, PersonPrompt) and self._queue:
            following = self._queue[0]
            if not isinstance(following, PersonPrompt):
                break
            taken.append(self._queue.popleft())
        return taken

    async def _work(self) -> None:
        while True:
            await self._ready.wait()
            turn = self._take()
            self._running = True
            self._refresh()
            try:
                await self._run(turn)
            except ModelError as error:
                self._emit(ChatEvent(kind="error", text=str(error)))
            except (SessionError, ScheduleError) as error:
                self._emit(ChatEvent(kind="error", text=str(error)))
            except Exception as error:
                logger.exception("turn failed in session %s", self._session.id)
                self._emit(ChatEvent(kind="error", text=f"the turn failed: {error!r}"))
            finally:
                self._running = False
                self._refresh()

    async def _run(self, turn: list[Turn]) -> None:
        first = turn[0]
        if isinstance(first, ToolTurn):
            await self._person_tool_call(first)
        else:
            zones: list[str | None] = []
            for item in turn:
                if isinstance(item, PersonPrompt):
                    self._append(user_message(item.text, at=self._clock.now()))
                    zones.append(item.zone)
                elif isinstance(item, FollowupTurn):
                    self._append(user_message(item.text, at=self._clock.now(), origin="followup"))
            if self._model is not None:
                await self._answer(self._model, zones if zones else None)
        await self._session.barrier()

    async def _answer(self, model: Model, zones: list[str | None] | None) -> None:
        for _ in range(MAX_TOOL_ROUNDS):
            reply = await model.respond(self._context(zones), self._tool_list())
            self._append(
                assistant_message(
                    reply.content,
                    at=self._clock.now(),
                    tool_calls=tuple(_storable(call) for call in reply.tool_calls),
                )
            )
            if not reply.tool_calls:
                return
            for call in reply.tool_calls:
                result = await self._call_tool(call.name, call.arguments)
                self._append(tool_message(result, at=self._clock.now(), tool_call_id=call.id))
        self._emit(
            ChatEvent(
                kind="error",
                text=f"the model kept calling tools; stopped after {MAX_TOOL_ROUNDS} rounds",
            )
        )

    async def _person_tool_call(self, turn: ToolTurn) -> None:
        arguments = msgspec.json.encode(turn.arguments).decode()
        call = ToolCall(
            id=f"person_{len(self._session.entries)}", name=turn.name, arguments=arguments
        )
        self._append(assistant_message("", at=self._clock.now(), tool_calls=(call,)))
        result = await self._call_tool(turn.name, arguments)
        self._append(tool_message(result, at=self._clock.now(), tool_call_id=call.id))

    async def _call_tool(self, name: str, arguments: str) -> str:
        if self._tools is None:
            raise RuntimeError("the agent has no tools: call bind() first")
        return await self._tools.call_json(name, arguments)

    def _tool_list(self) -> list[dict[str, object]]:
        return self._tools.openai() if self._tools is not None else []

    def _context(self, zones: list[str | None] | None) -> list[ChatMessage]:
        lines = [SYSTEM_PROMPT, f"Current time: {format_instant(self._clock.now())} (UTC)."]
        if zones is not None:
            lines.append(time_context(zones))
        system: ChatMessage = {"role": "system", "content": "\n".join(lines)}
        return [system, *chat_messages(self.transcript)]

    def _append(self, message: MessageEntry) -> None:
        self._session.append(MESSAGE_ENTRY_TYPE, message)
        self._emit(ChatEvent(kind="message", message=message))

    def _emit(self, event: ChatEvent) -> None:
        try:
            self._on_event(event)
        except Exception:
            logger.exception("the chat front end failed to take an event")


def _storable(call: ToolCall) -> ToolCall:
    """``call`` with arguments the log accepts: a model's malformed JSON is kept as a string."""
    try:
        msgspec.json.decode(call.arguments)
    except msgspec.DecodeError:
        return msgspec.structs.replace(call, arguments=msgspec.json.encode(call.arguments).decode())
    return call
