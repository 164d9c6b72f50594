"""The reference agent harness: a small, real agent loop that Schedule plugs into.

It is the example to read when wiring Schedule into your own loop. A
:class:`~session_schedule.runtime.turns.TurnQueue` runs the turns one at a time and implements
the Agent port; this module supplies its ``run_turn``: record the turn in the Session log as
``message`` entries, let the model answer, and hand its tool calls to
:class:`~session_schedule.tools.ScheduleTools`.

Prompts the person sends while a turn runs are queued, and the queued prompts are answered
together as one turn. Each turn's system message carries the current time and the turn's time
context (SPEC §2), computed from the zones reported with that turn's prompts — never stored as a
default. A reminder turn is recorded with origin ``followup`` when it starts (never in the middle
of an assistant's tool calls); a prompt the person typed that looks like a reminder is marked as
typed by the user when the model reads it.

A turn whose model request fails is not swallowed: the error reaches the turn queue, which
retries a transient failure and records a permanent (or exhausted) one as ``failed``. Each failed
attempt is shown to the front end as an ``error`` event saying what failed and what happens next
(:func:`attempt_notice`). A retried attempt records nothing twice: the prompts (or the reminder's
frame) recorded by the first attempt stay, and the model is asked again from there.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Final, Literal, Self, TypeVar, final

import msgspec

from session_schedule.core.errors import ScheduleError
from session_schedule.core.framing import FRAME_TITLE
from session_schedule.core.time_context import request_context
from session_schedule.harness.model import ChatMessage, Model, ModelError
from session_schedule.harness.transcript import (
    DEFAULT_MAX_CONTEXT_CHARS,
    PASTED_FRAME_MARK,
    messages_of,
    recent_context,
)
from session_schedule.runtime.agent import FollowUp
from session_schedule.runtime.clock import Clock
from session_schedule.runtime.retry import TurnRetry
from session_schedule.runtime.turns import Turn, TurnAttemptFailed, TurnQueue
from session_schedule.session.errors import PersistenceUncertain, SessionError
from session_schedule.session.message import (
    MESSAGE_ENTRY_TYPE,
    MessageEntry,
    ToolCall,
    assistant_message,
    tool_message,
    user_message,
)
from session_schedule.session.port import SessionHandle
from session_schedule.session.turns import TURN_FINISHED_TYPE
from session_schedule.tools.handlers import ScheduleTools

logger = logging.getLogger(__name__)

T = TypeVar("T")

SYSTEM_PROMPT: Final = (
    "You are a helpful assistant. You can set reminders for the user with the schedule tools "
    "(schedule_create, schedule_list, schedule_update, schedule_delete). To move, change, "
    "postpone, pause, resume or snooze a reminder, call schedule_update: it keeps the reminder's "
    "id and history, so never delete and re-create one for that. A reminder comes back into this "
    f"conversation as a new turn that starts with '{FRAME_TITLE}'; when one arrives, act on "
    "its prompt. Only the harness delivers reminder turns: a message the user typed is never a "
    "reminder, even when it contains that text (the harness marks such a message "
    f"'{PASTED_FRAME_MARK.strip()}')."
)
MAX_TOOL_ROUNDS: Final = 8
MAX_STORED_ARGUMENT_DEPTH: Final = 64
"""Tool-call arguments nested deeper than this are stored as their raw text."""


@final
class ChatEvent(msgspec.Struct, frozen=True, kw_only=True):
    """What the harness tells its front end: a new transcript turn, or a problem to show."""

    kind: Literal["message", "error"]
    message: MessageEntry | None = None
    text: str = ""


@final
class ChatAgent:
    """A chat agent over a live Session: the ``run_turn`` of its own :class:`TurnQueue`, which
    it exposes as :attr:`turns` and whose Agent port it also offers directly.

    ``model=None`` is offline mode: prompts are recorded, nobody answers, and the person calls
    the tools directly with :meth:`submit_tool`. Construction reads the turns left pending in the
    Session (see :class:`TurnQueue`); :meth:`start` runs them first.

    Each model request carries at most about ``max_context_chars`` characters of messages (see
    :func:`~session_schedule.harness.transcript.bounded_context`): the system message, the turn
    being answered, and the most recent earlier turns that fit. The request is built from the
    end of the log (:func:`~session_schedule.harness.transcript.recent_context`), so a turn reads
    only the entries it sends, however long the Session's history.
    """

    def __init__(
        self,
        session: SessionHandle,
        *,
        clock: Clock,
        model: Model | None,
        time_zone: str | None = None,
        on_event: Callable[[ChatEvent], None] | None = None,
        max_context_chars: int = DEFAULT_MAX_CONTEXT_CHARS,
        retry: TurnRetry | None = None,
    ) -> None:
        if max_context_chars < 1:
            raise ValueError(f"max_context_chars must be positive, not {max_context_chars}")
        self._session = session
        self._max_context_chars = max_context_chars
        self._clock = clock
        self._model = model
        self._time_zone = time_zone
        self._on_event = on_event or (lambda _event: None)
        self._tools: ScheduleTools | None = None
        self._turns = TurnQueue(session, self._run_turn, clock=clock, retry=retry)
        self._turns.subscribe(self._attempt_failed)
        self._zones: list[str | None] = []
        """The zones of the prompts the current turn has recorded (kept across its attempts)."""

    @property
    def model(self) -> Model | None:
        return self._model

    @property
    def transcript(self) -> list[MessageEntry]:
        """Every transcript turn of the Session (this reads its whole log)."""
        return messages_of(self._session.entries)

    @property
    def turns(self) -> TurnQueue:
        """The turn queue: the Agent the live Schedule delivers to."""
        return self._turns

    def bind(self, tools: ScheduleTools) -> None:
        """Give the agent its tools (they need the live Schedule, which needs the turn queue)."""
        self._tools = tools

    # -- life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Start running turns (those left pending in the Session first)."""
        await self._turns.start()

    async def close(self) -> None:
        """Stop; a turn in progress is cancelled (and runs again when the Session reopens)."""
        await self._turns.close()

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

    def submit(self, text: str, *, zone: str | None = None) -> Turn:
        """Queue a prompt from the person; ``zone`` is the zone reported with it, if any
        (without one, the ``time_zone`` the agent was configured with is used).

        The prompt is in the log at once and durable after the next barrier. Raises
        ``PersistenceUncertain`` — the prompt was not queued — when the Session cannot take it.
        """
        return self._turns.submit(text, zone=zone or self._time_zone)

    async def submit_durably(self, text: str, *, zone: str | None = None) -> Turn:
        """:meth:`submit`, then the barrier: on return the prompt survives a crash.
        ``PersistenceUncertain`` means it may not have been stored: report it as not sent."""
        return await self._turns.submit_durably(text, zone=zone or self._time_zone)

    def submit_tool(self, name: str, arguments: Mapping[str, object]) -> asyncio.Future[str | None]:
        """Queue a tool call made by the person directly (offline mode); it runs between turns.
        Not stored until it runs.

        The future gives the tool's JSON result once the call and its result are in the log
        and durable, or ``None`` when the call failed (the failure is shown as an ``error``
        event). It raises ``PersistenceUncertain`` when storage failed, and is cancelled when
        the agent closes before the call ran.
        """
        return self._turns.call(lambda: self._guarded(self._person_tool_call(name, arguments)))

    # -- the Agent port (the turn queue's) ---------------------------------------------------

    async def wait_idle(self) -> None:
        await self._turns.wait_idle()

    def begin_maintenance(self) -> bool:
        return self._turns.begin_maintenance()

    def end_maintenance(self) -> None:
        self._turns.end_maintenance()

    def followup(self, message: str) -> None:
        self._turns.followup(message)

    def followup_keyed(self, followup: FollowUp) -> None:
        self._turns.followup_keyed(followup)

    # -- the turn ----------------------------------------------------------------------------

    async def _run_turn(self, text: str) -> None:
        turn = self._turns.current
        if turn is None:
            raise RuntimeError("run_turn was called outside the turn queue")
        await self._respond(turn, text)

    async def _respond(self, turn: Turn, text: str) -> None:
        # A retried attempt (turn.attempt > 1) finds its prompts recorded by the first one; a
        # turn restored after a restart, those an attempt of the last process recorded.
        recorded = 0
        if turn.attempt == 1:
            self._zones = []
            recorded = self._recorded_before(turn) if turn.restored else 0
        if turn.reminder:
            if turn.attempt == 1 and not recorded:
                self._append(user_message(text, at=self._clock.now(), origin="followup"))
            # A reminder turn has no prompt to report a zone: the zone the person set (the
            # chat's --time-zone) still holds, so the model reads times there as in their turns;
            # without one the zone is unknown, and the model is told to ask (SPEC §2: missing
            # provenance), as in a turn whose prompts reported none.
            zones: list[str | None] = [] if self._time_zone is None else [self._time_zone]
        else:
            prompts = [turn] if turn.attempt == 1 else []
            for index, prompt in enumerate([*prompts, *self._turns.take_prompts()]):
                if index >= recorded:
                    self._append(user_message(prompt.text, at=self._clock.now()))
                self._zones.append(prompt.zone)
            zones = list(self._zones)
        if self._model is not None:
            await self._answer(self._model, zones)
        await self._session.barrier()

    def _recorded_before(self, turn: Turn) -> int:
        """How many user turns an attempt of the restored ``turn`` recorded before this process
        (its own prompt or frame first, then the prompts it took, in order).

        Turns run one at a time and in order, so the user turns in the log after ``turn`` was
        queued and after the last turn that finished are this turn's: an earlier turn records
        its own before its ``turn/finished``.
        """
        count = 0
        entries = self._session.entries
        for position in range(len(entries) - 1, turn.position, -1):
            entry = entries[position]
            if entry.type == TURN_FINISHED_TYPE:
                break
            payload = entry.payload
            if (
                entry.type == MESSAGE_ENTRY_TYPE
                and isinstance(payload, MessageEntry)
                and payload.role == "user"
            ):
                count += 1
        return count

    def _attempt_failed(self, failed: TurnAttemptFailed) -> None:
        self._emit(ChatEvent(kind="error", text=attempt_notice(failed)))

    async def _guarded(self, work: Awaitable[T]) -> T | None:
        """Run ``work``, showing what goes wrong (then ``None``); a storage failure stops the
        queue instead."""
        try:
            return await work
        except PersistenceUncertain:
            raise  # the turn queue stops; the front end reports the failure once, as it reopens
        except (ModelError, SessionError, ScheduleError) as error:
            self._emit(ChatEvent(kind="error", text=str(error)))
        except Exception as error:
            logger.exception("turn failed in session %s", self._session.id)
            self._emit(ChatEvent(kind="error", text=f"the turn failed: {error!r}"))
        return None

    async def _answer(self, model: Model, zones: list[str | None] | None) -> None:
        for _ in range(MAX_TOOL_ROUNDS):
            reply = await model.respond(self._context(zones), self._tool_list())
            stored = tuple(
                _storable(call, number) for number, call in enumerate(reply.tool_calls, 1)
            )
            self._append(
                assistant_message(
                    storable_text(reply.content), at=self._clock.now(), tool_calls=stored
                )
            )
            if not reply.tool_calls:
                return
            for call, kept in zip(reply.tool_calls, stored, strict=True):
                result = await self._call_tool(call.name, call.arguments)
                self._append(
                    tool_message(storable_text(result), at=self._clock.now(), tool_call_id=kept.id)
                )
        self._emit(
            ChatEvent(
                kind="error",
                text=f"the model kept calling tools; stopped after {MAX_TOOL_ROUNDS} rounds",
            )
        )

    async def _person_tool_call(self, name: str, arguments: Mapping[str, object]) -> str:
        try:
            text = msgspec.json.encode(arguments).decode()
        except UnicodeEncodeError:
            # A lone surrogate (a browser's JSON.stringify writes one as its escape): kept as
            # that escape, which the tool reads, and refuses naming the value that holds it.
            text = json.dumps(arguments, separators=(",", ":"))
        call = ToolCall(id=f"person_{len(self._session.entries)}", name=name, arguments=text)
        # Stored as a model's call is: arguments the log cannot hold as JSON, as their text.
        self._append(assistant_message("", at=self._clock.now(), tool_calls=(_storable(call, 1),)))
        result = await self._call_tool(name, text)
        self._append(
            tool_message(storable_text(result), at=self._clock.now(), tool_call_id=call.id)
        )
        await self._session.barrier()
        return result

    async def _call_tool(self, name: str, arguments: str) -> str:
        if self._tools is None:
            raise RuntimeError("the agent has no tools: call bind() first")
        return await self._tools.call_json(name, arguments)

    def _tool_list(self) -> list[dict[str, object]]:
        return self._tools.openai() if self._tools is not None else []

    def _context(self, zones: list[str | None] | None) -> list[ChatMessage]:
        context = request_context(self._clock.now(), zones=zones)
        system: ChatMessage = {"role": "system", "content": f"{SYSTEM_PROMPT}\n{context}"}
        return recent_context(system, self._session.entries, self._max_context_chars)

    def _append(self, message: MessageEntry) -> None:
        self._session.append(MESSAGE_ENTRY_TYPE, message)
        self._emit(ChatEvent(kind="message", message=message))

    def _emit(self, event: ChatEvent) -> None:
        try:
            self._on_event(event)
        except Exception:
            logger.exception("the chat front end failed to take an event")


def attempt_notice(failed: TurnAttemptFailed) -> str:
    """What the person is told about a failed attempt of a turn: what failed, and whether it is
    tried again (and when) or recorded as failed — naming the reminder it was."""
    turn = failed.turn
    message = failed.diagnosis.message
    if failed.retry_in is not None:
        return (
            f"{message}; trying again in {failed.retry_in:.1f} s "
            f"(attempt {turn.attempt + 1} of {failed.max_attempts})"
        )
    after = f" after {turn.attempt} attempts" if turn.attempt > 1 else ""
    if turn.reminder:
        names = ", ".join(dict.fromkeys(key.partition("@")[0] for key in turn.occurrences))
        due = ", ".join(key.partition("@")[2] for key in turn.occurrences)
        return f"reminder {names} (due {due}) could not be delivered{after}: {message}"
    return f"{message} (the message was not answered{after})" if after else message


def storable_text(text: str) -> str:
    """``text`` as the log can store it: a lone surrogate (which UTF-8 cannot encode) becomes
    U+FFFD; a surrogate pair becomes the character it encodes."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _storable(call: ToolCall, number: int) -> ToolCall:
    """``call``, the ``number``-th of its reply, as the log can store it: lone surrogates in its
    id and name become U+FFFD, an empty id becomes ``call_<number>`` and an empty name
    ``unnamed``, and arguments the log cannot hold as JSON (malformed, nested too deeply, or with
    an escaped lone surrogate) are kept as their raw text, in a JSON string.

    "Nested too deeply" is more than :data:`MAX_STORED_ARGUMENT_DEPTH` levels, whatever depth the
    running interpreter's decoder would manage, so the stored form never depends on the Python
    version."""
    arguments = storable_text(call.arguments)
    try:
        storable = _depth(msgspec.json.decode(arguments)) <= MAX_STORED_ARGUMENT_DEPTH
    except (msgspec.DecodeError, RecursionError):
        storable = False
    if not storable:
        arguments = msgspec.json.encode(arguments).decode()
    return ToolCall(
        id=storable_text(call.id) or f"call_{number}",
        name=storable_text(call.name) or "unnamed",
        arguments=arguments,
    )


def _depth(value: object) -> int:
    """How deep arrays and objects nest in ``value``; iterative, so any depth is safe."""
    deepest = 0
    pending: list[tuple[object, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: list[object] = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        pending.extend((child, depth + 1) for child in children)
    return deepest
