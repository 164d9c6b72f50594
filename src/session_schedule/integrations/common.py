"""What every framework adapter shares: strict tool specifications, a synchronous bridge onto
the Schedule's event loop, the conversation base that runs each queued turn, the tool loop of
the adapters that talk to a model API directly (Anthropic, OpenAI), and the durable history of
the adapters that keep their conversation in the Session's log (:func:`stored_messages`,
:func:`store_messages`: ``framework/messages`` entries).

Construction is a straight line in every adapter — the tools need the Schedule, the Schedule
needs the agent port, the framework's agent needs the tools — so the :class:`TurnQueue` comes
first and the conversation last::

    turns = TurnQueue(session)
    schedule = LiveSchedule(session, turns)
    tools = ScheduleTools(schedule)
    agent = <the framework's agent, given the adapter's tools built from ``tools``>
    conversation = <the adapter's Conversation>(turns, agent)  # binds its run_turn

Every turn — the host's prompts and the reminders Schedule delivers — is a new run of the
framework on the same conversation, one at a time, with the history kept. Each run carries the
turn's occurrence keys, its idempotency key (:attr:`Turn.occurrences`), in the form its
framework uses for run metadata (:func:`turn_metadata`): LangGraph's ``config["metadata"]``,
the Agents SDK's ``RunConfig.trace_metadata``, PydanticAI's ``metadata`` (``ctx.metadata`` in
a tool). The adapters that talk to a model API directly (Anthropic, OpenAI) have no run to
attach it to: their :attr:`Conversation.current_turn` is the turn being answered.

A turn can run more than once — the queue retries a failed attempt, and a turn a crash cut short
runs again after a restart — and an attempt's messages are dropped while its tool calls took
effect. So :meth:`Conversation.run_turn` reads, as each attempt starts, the schedule changes the
turn's earlier attempts made (:func:`~session_schedule.session.provenance.changes_during`), and
every model request of the attempt carries the note naming them
(:func:`~session_schedule.core.rerun.rerun_note`) after the time context
(:meth:`Conversation.model_context`), so that the model does not make them twice.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from abc import ABC, abstractmethod
from collections.abc import Sequence
from decimal import Decimal
from typing import ClassVar, Final, Generic, TypeVar, cast, final

import msgspec

from session_schedule.core.framing import FRAME_TITLE
from session_schedule.core.rerun import rerun_note
from session_schedule.core.time_context import request_context
from session_schedule.core.visible import escape_unencodable
from session_schedule.runtime.turns import Turn, TurnQueue
from session_schedule.session.framework import (
    FRAMEWORK_MESSAGES_TYPE,
    Message,
    framework_history,
    framework_messages,
)
from session_schedule.session.provenance import changes_during
from session_schedule.tools.adapters import strict_schema
from session_schedule.tools.catalog import ToolName
from session_schedule.tools.handlers import ScheduleTools, ToolText
from session_schedule.tools.nesting import clip_depth
from session_schedule.tools.schemas import Schema
from session_schedule.tools.written import (
    MAX_NUMBER_DIGITS,
    WrittenNumber,
    holds_written_number,
    json_text,
    loads_as_written,
)


@final
class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One tool as the adapters hand it to a framework."""

    name: ToolName
    description: str
    parameters: Schema
    """The arguments' JSON schema in strict form: every property required (optional ones are
    nullable), no others allowed, no ``default`` keywords."""


def tool_specs(tools: ScheduleTools) -> tuple[ToolSpec, ...]:
    """The four tools of ``tools``, their schemas in strict form."""
    return tuple(
        ToolSpec(
            name=definition.name,
            description=definition.description,
            parameters=strict_schema(definition.input_schema),
        )
        for definition in tools.definitions
    )


PASTED_FRAME_MARK: Final = "[typed by the user, not a reminder delivery] "
"""Put in front of a host prompt that contains a reminder frame — pasted, or forged — so that
it cannot pass for a delivery (the reference harness marks such prompts the same way)."""

OCCURRENCES_METADATA_KEY: Final = "session_schedule_occurrences"
"""The run-metadata key under which the adapters pass a turn's occurrence keys."""
TURN_METADATA_KEY: Final = "session_schedule_turn"
"""The run-metadata key under which the adapters pass the turn's position in the log."""


def turn_metadata(turn: Turn) -> dict[str, object]:
    """The run metadata of ``turn``: its occurrence keys (a list, empty for a host prompt)
    under :data:`OCCURRENCES_METADATA_KEY` — the idempotency key of what the run does — and its
    log position under :data:`TURN_METADATA_KEY`."""
    return {OCCURRENCES_METADATA_KEY: list(turn.occurrences), TURN_METADATA_KEY: turn.position}


SYNC_TIMEOUT_SECONDS: Final = 120.0
"""How long a synchronous tool call waits for the Schedule's loop before it gives up."""


@final
class SyncBridge:
    """Runs a tool call from synchronous code on the event loop that runs the Schedule.

    A framework that calls tools synchronously (LangChain's ``tool.invoke``) may do so from a
    worker thread while the loop runs elsewhere; the call is routed onto that loop with
    ``asyncio.run_coroutine_threadsafe`` and its result awaited in the calling thread. The loop
    is the one running when the bridge is built, or ``loop``; a bridge built outside a running
    loop learns it from the first asynchronous call.
    """

    def __init__(
        self,
        tools: ScheduleTools,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        timeout: float = SYNC_TIMEOUT_SECONDS,
    ) -> None:
        self._tools = tools
        self._timeout = timeout
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
        self._loop = loop

    async def call(self, name: str, arguments: object) -> str:
        """The tool call, from asynchronous code on the Schedule's loop: its JSON text."""
        return (await self.call_text(name, arguments)).text

    def call_sync(self, name: str, arguments: object) -> str:
        """The tool call, from synchronous code in any thread but the loop's own: its JSON text
        (see :meth:`call_text_sync`)."""
        return self.call_text_sync(name, arguments).text

    async def call_text(self, name: str, arguments: object) -> ToolText:
        """:meth:`call`, and whether the result is an error (:class:`ToolText`)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return await self._tools.call_text(name, arguments)

    def call_text_sync(self, name: str, arguments: object) -> ToolText:
        """The tool call, from synchronous code in any thread but the loop's own, and whether
        its result is an error (:class:`ToolText`).

        Raises ``RuntimeError`` when called on the loop's thread (the loop would wait on itself:
        use the asynchronous call there), when the loop is unknown or not running, and when the
        call does not finish within the timeout.
        """
        loop = self._loop
        if loop is None:
            raise RuntimeError(
                f"{name} was called synchronously before the event loop that runs the Schedule "
                "was known: build the tools inside that loop, or pass loop="
            )
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise RuntimeError(
                f"{name} was called synchronously on the thread of the event loop that runs "
                "the Schedule, which would wait on itself; call it asynchronously there "
                "(await tool.ainvoke(...)) or from another thread"
            )
        if loop.is_closed() or not loop.is_running():
            raise RuntimeError(
                f"{name} was called synchronously, but the event loop that runs the Schedule "
                "is not running"
            )
        future = asyncio.run_coroutine_threadsafe(self._tools.call_text(name, arguments), loop)
        try:
            return future.result(self._timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise RuntimeError(
                f"{name} did not finish within {self._timeout:g} s on the Schedule's event loop"
            ) from None


@final
class Answer(msgspec.Struct, frozen=True, kw_only=True):
    """What the model answered to one turn."""

    turn: Turn
    """The turn: a host prompt, or a reminder Schedule delivered (``turn.reminder``)."""
    text: str
    """The model's final text for the turn."""


class Conversation(ABC):
    """One framework conversation fed by a :class:`TurnQueue`: each queued turn — the host's
    prompt or a reminder — is a new run on the same conversation, the history kept.

    Building it binds its :meth:`run_turn` to the queue. A reminder reaches the framework as
    Schedule framed it; a host prompt that contains a reminder frame reaches it with
    :data:`PASTED_FRAME_MARK` in front. :attr:`answers` lists the model's final text for every
    turn that completed, in order.

    Every model request also carries :meth:`model_context`: the :meth:`time_context` — the
    current time, from the queue's clock, and the person's ``time_zone`` when the host knows it
    — as the reference harness's system message does, so the model can resolve "tomorrow at 9"
    (reminder turns included); then, in an attempt that runs a turn again (a retry, or a turn a
    crash cut short) after earlier attempts changed the schedule, :attr:`rerun_note`.
    """

    def __init__(self, turns: TurnQueue, *, time_zone: str | None = None) -> None:
        self._turns = turns
        self._time_zone = time_zone
        self._rerun_note: str | None = None
        self._answers: list[Answer] = []
        self._answered = asyncio.Condition()
        turns.bind(self.run_turn)

    @property
    def turns(self) -> TurnQueue:
        return self._turns

    @property
    def time_zone(self) -> str | None:
        """The person's zone, as the host gave it (``None``: not known)."""
        return self._time_zone

    def time_context(self) -> str:
        """What the next model request says about time (:func:`request_context` now)."""
        zones = None if self._time_zone is None else [self._time_zone]
        return request_context(self._turns.clock.now(), zones=zones)

    @property
    def rerun_note(self) -> str | None:
        """What the earlier attempts of the turn being answered changed in the schedule
        (:func:`~session_schedule.core.rerun.rerun_note`), read from the log when this attempt
        started; ``None`` for a first attempt, for one whose earlier attempts changed nothing,
        and between turns."""
        return self._rerun_note

    def model_context(self) -> str:
        """What the next model request carries besides the conversation: the
        :meth:`time_context`, then the :attr:`rerun_note` when there is one."""
        context = self.time_context()
        note = self._rerun_note
        return context if note is None else f"{context}\n\n{note}"

    @property
    def answers(self) -> tuple[Answer, ...]:
        return tuple(self._answers)

    @property
    def current_turn(self) -> Turn | None:
        """The turn being answered (its occurrence keys are its idempotency key), or ``None``
        between turns."""
        return self._turns.current

    def submit(self, text: str) -> Turn:
        """Queue the host's own prompt as a turn (see :meth:`TurnQueue.submit`)."""
        return self._turns.submit(text)

    async def wait_answers(self, count: int) -> tuple[Answer, ...]:
        """Return the answers once there are at least ``count`` of them."""
        async with self._answered:
            await self._answered.wait_for(lambda: len(self._answers) >= count)
        return self.answers

    async def run_turn(self, text: str) -> None:
        """One attempt of a turn: a new run of the framework on this conversation (the queue
        calls it), with the :attr:`rerun_note` of a retried or restored turn read first."""
        turn = self._turns.current
        if turn is None or turn.text != text:
            raise RuntimeError("run_turn runs the turn its TurnQueue is running, and no other")
        if not turn.reminder and FRAME_TITLE in text:
            text = PASTED_FRAME_MARK + text
        # Read once, as the attempt starts: the changes this attempt makes are not "earlier".
        self._rerun_note = (
            rerun_note(changes_during(self._turns.session.entries, turn.position))
            if turn.attempt > 1 or turn.restored
            else None
        )
        try:
            answer = await self.run(text)
        finally:
            self._rerun_note = None
        async with self._answered:
            self._answers.append(Answer(turn=turn, text=answer))
            self._answered.notify_all()

    @abstractmethod
    async def run(self, text: str) -> str:
        """Run the framework on ``text`` as the next user turn of this conversation, keeping
        the history; return the model's final text."""


def stored_messages(turns: TurnQueue, framework: str) -> list[Message]:
    """The conversation ``framework``'s adapter kept in the log of ``turns``' Session (see
    :func:`~session_schedule.session.framework.framework_history`): empty for a new session."""
    session = turns.session
    return framework_history(session.id, session.entries, framework)


def queued_turn(turns: TurnQueue) -> Turn:
    """The turn ``turns`` is running; ``RuntimeError`` between turns (a durable conversation
    records each turn's messages under the turn, so it runs queued turns only)."""
    turn = turns.current
    if turn is None:
        raise RuntimeError(
            "a durable conversation records the messages of a queued turn: submit the text to "
            "its TurnQueue instead of calling run()"
        )
    return turn


def store_messages(turns: TurnQueue, framework: str, messages: Sequence[object]) -> None:
    """Append the ``messages`` the current turn added (JSON objects) to the log of ``turns``'
    Session as a ``framework/messages`` entry; the queue's ``turn/finished`` follows it.

    Lone surrogates in their strings are written as ``\\uXXXX`` (:func:`sendable`), so that they
    encode. Raises ``RuntimeError`` outside a queued turn, ``TypeError`` for a message that is
    not a JSON object, ``ValueError`` for one that does not encode, and
    ``PersistenceUncertain`` when the append fails.
    """
    turn = queued_turn(turns)
    if not messages:
        return
    stored: list[Message] = []
    for message in messages:
        value = sendable(message)
        if not isinstance(value, dict):
            raise TypeError(f"a {framework} message is a JSON object, not {type(value).__name__}")
        stored.append(value)
    entry = framework_messages(framework, turn=turn.position, at=turns.clock.now(), messages=stored)
    turns.session.append(FRAMEWORK_MESSAGES_TYPE, entry)


MAX_TOOL_ROUNDS: Final = 16
"""The most model requests one turn makes before it gives up (each answers tool calls)."""

MessageT = TypeVar("MessageT")
"""A provider's message type (the request's ``messages`` items)."""


@final
class ToolUse(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call the model asked for, as a provider's reply carries it."""

    id: str
    """The provider's id of the call, which its result refers to."""
    name: str
    arguments: object
    """The arguments as the provider gives them: a JSON text or an already decoded object
    (:meth:`ScheduleTools.call_json` takes either)."""


@final
class Reply(msgspec.Struct, Generic[MessageT], frozen=True, kw_only=True):
    """One model response, mapped by a provider: the assistant message to keep, the tool calls
    it asks for, and its text."""

    message: MessageT
    """The response as a message of the conversation."""
    tool_uses: tuple[ToolUse, ...]
    """The tool calls, in order; none ends the turn."""
    text: str
    """The response's text: the turn's answer when it calls no tool."""


@final
class ToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """The result of one :class:`ToolUse`: the JSON text of ``ScheduleTools.call_json``."""

    use: ToolUse
    content: str
    failed: bool = False
    """Whether the result is an error (``{"ok": false, ...}``): a provider that flags failed
    tool calls (Anthropic's ``is_error``) says so beside the same text."""


class ToolLoopConversation(Conversation, Generic[MessageT]):
    """A conversation over a model API: each turn is a user message on one ``messages`` list,
    then requests to the model until it stops calling tools (each call runs through ``tools``;
    its results go back as the provider's result messages), at most ``max_tool_rounds``
    requests.

    A provider supplies the mapping only: :meth:`_user_message`, :meth:`_request` (one request on
    the conversation so far, its response as a :class:`Reply`) and :meth:`_result_messages`, and
    names itself in :attr:`framework`. ``messages`` continues an earlier conversation;
    :attr:`messages` is the conversation so far. A turn that fails (the API refuses a request,
    say) or is cancelled leaves no trace in it, so the next turn starts from a valid
    conversation.

    ``durable=True`` keeps the conversation in the Session's log: the messages each completed
    turn added are appended as a ``framework/messages`` entry (:func:`store_messages`) right
    before the queue records the turn finished, and building the conversation reads them back
    (:func:`stored_messages`), after ``messages`` — the conversation's start the program gives
    on every run (a system message, say), which is not stored.
    """

    framework: ClassVar[str]
    """The adapter's name in the ``framework/messages`` entries it writes."""

    def __init__(
        self,
        turns: TurnQueue,
        tools: ScheduleTools,
        *,
        messages: Sequence[MessageT],
        max_tool_rounds: int,
        time_zone: str | None = None,
        durable: bool = False,
    ) -> None:
        super().__init__(turns, time_zone=time_zone)
        self._tools = tools
        self._messages: list[MessageT] = list(messages)
        self._durable = durable
        if durable:
            stored = stored_messages(turns, self.framework)
            self._messages.extend(cast("list[MessageT]", stored))
        self._max_tool_rounds = max_tool_rounds

    @property
    def durable(self) -> bool:
        """Whether the conversation is kept in the Session's log."""
        return self._durable

    @property
    def messages(self) -> list[MessageT]:
        return list(self._messages)

    async def run(self, text: str) -> str:
        if self._durable:
            queued_turn(self._turns)
        start = len(self._messages)
        try:
            answer = await self._run(text)
            if self._durable:
                store_messages(self._turns, self.framework, self._messages[start:])
        except BaseException:
            del self._messages[start:]
            raise
        return answer

    async def _run(self, text: str) -> str:
        self._messages.append(self._user_message(text))
        for _ in range(self._max_tool_rounds):
            reply = await self._request(self._messages)
            # What the model wrote goes back to it in the next request, and a lone surrogate in
            # it (an id, a tool call's arguments text) would fail that request after the tools
            # ran: the copy kept is :func:`sendable`, the tools get the model's own values.
            self._messages.append(cast("MessageT", sendable(reply.message)))
            if not reply.tool_uses:
                return reply.text
            results: list[ToolResult] = []
            for use in reply.tool_uses:
                answer = await self._tools.call_text(use.name, use.arguments)
                results.append(ToolResult(use=use, content=answer.text, failed=answer.failed))
            self._messages.extend(
                cast("MessageT", sendable(message)) for message in self._result_messages(results)
            )
        raise RuntimeError(
            f"the model was still calling tools after {self._max_tool_rounds} requests"
        )

    @abstractmethod
    def _user_message(self, text: str) -> MessageT:
        """``text`` as the provider's user message."""

    @abstractmethod
    async def _request(self, messages: list[MessageT]) -> Reply[MessageT]:
        """One request to the model on ``messages``; its response mapped to a :class:`Reply`."""

    @abstractmethod
    def _result_messages(self, results: Sequence[ToolResult]) -> list[MessageT]:
        """The messages that carry ``results`` back to the model, in order."""


MAX_MODEL_JSON_DEPTH: Final = 64
"""How deep a model API response may nest before deeper values are replaced (a tool's own
arguments nest far less: deeper input gets the tool's ``too deep`` error either way)."""
NESTED_TOO_DEEP: Final = "[nested too deep to read]"
"""What stands for values nested deeper than :data:`MAX_MODEL_JSON_DEPTH` in a copy that is
kept or sent."""
_TOO_DEEP: Final = b'"[nested too deep to read]"'
_SHOWN_NUMBER_CHARS: Final = 24
"""How much of a :class:`~session_schedule.tools.written.WrittenNumber` the copy sent back to
the model shows."""


def model_json(body: bytes) -> object:
    """A model API response body as JSON values, whatever the model put in it: values nested
    more than :data:`MAX_MODEL_JSON_DEPTH` deep are replaced by a string saying so
    (:func:`~session_schedule.tools.nesting.clip_depth`, before any recursive reader), and a
    number that no Python number holds as written (``1e400``, ``NaN``, more than
    :data:`~session_schedule.tools.written.MAX_NUMBER_DIGITS` digits) is a
    :class:`~session_schedule.tools.written.WrittenNumber`: a tool gets it back in JSON text
    (:func:`tool_arguments`), and the copy sent back to the model holds it as a string
    (:func:`sendable`), as no request can carry it as a number. Lone surrogates stay (the tools
    refuse them with their stable error; :func:`sendable` escapes them for the copy that is sent
    back). Raises ``ValueError`` for a body that is not JSON."""
    return loads_as_written(clip_depth(body, MAX_MODEL_JSON_DEPTH, _TOO_DEEP), constants=True)


def tool_arguments(value: object) -> object:
    """The arguments of a tool call read by :func:`model_json`, as the tool gets them: the
    values themselves, or, when they hold a
    :class:`~session_schedule.tools.written.WrittenNumber`, JSON text with each number as the
    model wrote it — so that the tool answers exactly as ``ScheduleTools.call`` does for that
    text (``invalid_selector``: a number too large, or not JSON), instead of the turn failing on
    a value that no request can carry."""
    if not holds_written_number(value):
        return value
    return json_text(value)


def _shown(number: WrittenNumber) -> str:
    text = number.text
    if len(text) <= _SHOWN_NUMBER_CHARS:
        return text
    return f"{text[:12]}… (a number written in {len(text)} characters)"


def sendable(value: object) -> object:
    """``value`` (JSON values) with every lone surrogate in its strings, keys too, written as
    ``\\uXXXX``, so that it encodes as UTF-8 in the next request, every
    :class:`WrittenNumber` — and every integer of more than
    :data:`~session_schedule.tools.written.MAX_NUMBER_DIGITS` digits — as a string showing it
    (a request carries no such number, the log writes none), and every array or object nested
    more than :data:`MAX_MODEL_JSON_DEPTH` deep as :data:`NESTED_TOO_DEEP` (a message a
    framework decoded itself, such as a tool call's arguments, can hold both: the log's encoder
    would refuse them); iterative."""
    if not isinstance(value, dict | list):
        return _sendable_scalar(value)
    root: list[object] = [value]
    pending: list[tuple[object, list[object] | dict[str, object], object, int]] = [
        (value, root, 0, 1)
    ]
    while pending:
        item, parent, slot, depth = pending.pop()
        if isinstance(item, dict | list) and depth > MAX_MODEL_JSON_DEPTH:
            _put(parent, slot, NESTED_TOO_DEEP)
        elif isinstance(item, dict):
            copy: dict[str, object] = {}
            _put(parent, slot, copy)
            for key, child in item.items():
                name = escape_unencodable(key)
                copy[name] = None
                pending.append((child, copy, name, depth + 1))
        elif isinstance(item, list):
            items: list[object] = [None] * len(item)
            _put(parent, slot, items)
            pending.extend((child, items, index, depth + 1) for index, child in enumerate(item))
        else:
            _put(parent, slot, _sendable_scalar(item))
    return root[0]


_LONG_INTEGER_BITS: Final = int(MAX_NUMBER_DIGITS * 3.32)
"""Fewer bits than any integer of more than :data:`MAX_NUMBER_DIGITS` digits has."""


def _sendable_scalar(value: object) -> object:
    if isinstance(value, str):
        return escape_unencodable(value)
    if isinstance(value, WrittenNumber):
        return _shown(value)
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and value.bit_length() > _LONG_INTEGER_BITS
    ):
        text = str(Decimal(value))  # exact, however long: str(value) stops at 4,300 digits
        if len(text.lstrip("-")) > MAX_NUMBER_DIGITS:
            return _shown(WrittenNumber(text))
    return value


def _put(parent: list[object] | dict[str, object], slot: object, value: object) -> None:
    if isinstance(parent, list):
        parent[cast("int", slot)] = value
    else:
        parent[cast("str", slot)] = value
