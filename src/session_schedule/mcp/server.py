"""``session-schedule mcp``: one live Session served over MCP (stdio), with pulled follow-ups.

Theory of operation
-------------------
An MCP server cannot start a turn in its client's conversation: it can only answer requests and
send advisory notifications that a client may drop. So a due reminder is not pushed; it becomes a
**pending follow-up** that the host *takes*:

1. **Due.** The live Schedule's owner finds a reminder due and, as with any agent, waits for the
   agent to be idle. Here the agent is a :class:`~session_schedule.mcp.agent.PullAgent`: it
   announces the follow-up — ``notifications/resources/updated`` for
   ``schedule://followups/pending`` to a client that subscribed to it (on the 2026-07-28
   protocol, to its ``subscriptions/listen`` stream), and a ``notice`` log message — and waits
   for a take.
2. **Preview.** Reading ``schedule://followups/pending`` shows what a take would receive now: the
   occurrence keys and the framed text (its ``decided at`` is re-sampled by the take). Reading
   is free of side effects: clients prefetch, cache and re-read resources, and none of that may
   consume a reminder.
3. **Take.** Calling the tool ``schedule_followups_take`` is the acceptance. In the agent-scoped
   queue, with the barrier discipline, the owner decides, frames the turn, hands the text to the
   waiting take (``followup()``), appends the dispatch change(s) and awaits the barrier; the tool
   result carries the text exactly as framed. A tool is the acceptance because its result lands
   in the model's context — where a follow-up turn's text must arrive — while a resource read
   may be a host's prefetch that no model ever sees.

Guarantees: a follow-up nobody takes is never dispatched; it stays due while the server runs and
after a restart. A take that ends (cancelled, timed out) before the hand-over records nothing.
As everywhere in Schedule, delivery is at-least-once: a crash after the hand-over and before the
dispatch is durable repeats the reminder with the same occurrence key.

The dispatch is recorded at the hand-over, before the take's answer has gone out; so until the
host is known to have it, the follow-up is kept as undelivered in an **outbox** file beside the
session's log (``<session id>.mcp-outbox.json`` in the data directory), written durably — on a
worker thread, as is the dispatch's own ``fsync`` — before the dispatch is appended. The take's
answer counts as gone out once all its bytes have been written to the stdout pipe
(:mod:`session_schedule.mcp.stdout`): from then on a killed server no longer loses them, as the
host reads what the pipe holds. Gone out is not yet kept: a host that cancelled the take
(``notifications/cancelled``) drops its late answer, as the protocol says it must. So a text
leaves the outbox only once its take is **acknowledged** — by the host's next take (its cancel,
if any, was sent before it), or by the host closing the connection — and a cancel that names a
take whose answer went out offers that text again, even after the acknowledgement. A take
cancelled before its answer was sent (the host withdrew the request, the server is shutting down),
a take whose answer could not be built or written, and a server killed before the acknowledgement
therefore lose nothing: the next take — in this process, or after a restart on the same data
directory — returns the undelivered text first, exactly as framed (a repeat with the same
occurrence key, which at-least-once allows). A restarted server drops an outbox text whose
occurrences are still due in the log (it was killed before the dispatch was durable): the
schedule delivers them afresh, once.

Tool results: success is ``structuredContent`` matching the tool's ``outputSchema`` (and the same
JSON as text content); failure is ``isError: true`` with the ``{"ok": false, "error": …}`` JSON as
text content and no structured content, so clients that validate ``outputSchema`` accept both.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import sys
import warnings
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from contextvars import ContextVar
from pathlib import Path
from types import TracebackType
from typing import Final, Literal, Protocol, Self, cast, final, get_args

import msgspec

from session_schedule.extras import require

require("mcp", purpose="the MCP server")  # before anything imports the SDK (or its anyio)

import anyio
from mcp import types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared._stream_protocols import WriteStream
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import SessionMessage
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS

from session_schedule.core.due import Delivery
from session_schedule.core.errors import ErrorCode, ScheduleError
from session_schedule.core.framing import occurrence_keys
from session_schedule.core.visible import frame_escape
from session_schedule.mcp.agent import PullAgent, outbox_directory
from session_schedule.mcp.stdin import ARGUMENTS_TEXT, StdinLines, claimed_stdin, fd_reader
from session_schedule.mcp.stdout import StdoutWire, claimed_stdout, fd_writer
from session_schedule.runtime.clock import Clock, SystemClock
from session_schedule.runtime.live import LiveSchedule, Settings
from session_schedule.runtime.opening import open_when_free
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.session.port import SessionHandle, SessionStore
from session_schedule.tools.adapters import mcp_tools
from session_schedule.tools.handlers import ScheduleTools
from session_schedule.tools.results import DeleteResult, ErrorDetail, ErrorResult, ToolResult
from session_schedule.tools.schemas import inline_schema

logger = logging.getLogger(__name__)

SERVER_NAME: Final = "session-schedule"
TAKE_TOOL: Final = "schedule_followups_take"
PENDING_URI: Final = "schedule://followups/pending"
TAKE_TIMEOUT_SECONDS: Final = 10.0
"""How long a take waits for the owner to hand a due follow-up over."""
OUTBOX_SUFFIX: Final = ".mcp-outbox.json"
"""The outbox of a session's undelivered follow-ups is ``<session id>`` + this, beside its log."""

ACKNOWLEDGED_KEPT: Final = 64
"""How many acknowledged takes are remembered, so that a late cancel of one re-offers its text."""

_LOG_LEVELS: Final[tuple[types.LoggingLevel, ...]] = get_args(types.LoggingLevel)
"""Severity-ascending, as the protocol's LoggingLevel declares them."""


class _Result(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"
):
    pass


@final
class TakeResult(_Result, frozen=True):
    ok: Literal[True]
    followup: str | None
    """The follow-up turn's text exactly as framed, or null when none was handed over."""
    occurrence_keys: list[str]
    """The occurrence keys (``id@scheduledAt``) of the reminders in it, to spot a repeat."""
    more: bool
    """Whether another follow-up is due now: call the tool again."""


@final
class PendingFollowups(_Result, frozen=True):
    """The content of ``schedule://followups/pending``."""

    pending: bool
    occurrence_keys: list[str]
    preview: str | None
    """The framed text a take would receive now; its ``decided at`` line is re-sampled then."""
    take_with: Literal["schedule_followups_take"]
    """Reading this resource delivers nothing: only this tool takes a follow-up."""


_TAKE_DESCRIPTION: Final = (
    "Receive the next reminder that has come due in this conversation, as a follow-up turn: "
    "act on it as if it were a new message. Call it when the host says a follow-up is pending "
    f"({PENDING_URI} changed), and at the start of each of your turns while reminders are set. "
    "Returns followup: the reminder text (null when none is due), occurrenceKeys, and more: "
    "true when another one is due — then call it again. A reminder you do not take stays due."
)
_INSTRUCTIONS: Final = (
    "This server keeps durable reminders for one conversation (session {session}). Set them with "
    "schedule_create, see them with schedule_list, move, change, postpone, snooze or pause them "
    "with schedule_update (never by deleting and re-creating them), remove them with "
    "schedule_delete. A reminder "
    f"that comes due is not pushed to you: call {TAKE_TOOL} to receive it. The server announces "
    f"due reminders through {PENDING_URI} (subscribe to it) and a log message; call {TAKE_TOOL} "
    "when it changes and at the start of each turn while reminders are set."
)


def take_tool() -> dict[str, object]:
    """The MCP definition of ``schedule_followups_take``."""
    return {
        "name": TAKE_TOOL,
        "description": _TAKE_DESCRIPTION,
        "inputSchema": {
            "type": "object",
            "properties": {},
            "required": [],
            "additionalProperties": False,
        },
        "outputSchema": inline_schema(TakeResult),
        "annotations": {
            "title": "Take a due reminder",
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": False,
        },
    }


@final
class ScheduleMcpServer:
    """The MCP face of one live Session: the tools, the pending resource, the announcements."""

    def __init__(self, schedule: LiveSchedule, agent: PullAgent, *, session: str) -> None:
        self._schedule = schedule
        self._agent = agent
        self._tools = ScheduleTools(schedule, also_offered=(TAKE_TOOL,))
        self._session_id = session
        self._peer: ServerSession | None = None
        self._subscribed = False
        self._log_level: types.LoggingLevel = "debug"
        self._bus = InMemorySubscriptionBus()
        self._answering: dict[types.RequestId, str] = {}
        """The follow-up text of each take whose answer has not gone out yet, by request id."""
        self._writing: set[types.RequestId] = set()
        """The takes whose answers are being written."""
        self._withdrawn: set[types.RequestId] = set()
        """Takes cancelled while their answers were being built or written."""
        self._unacknowledged: dict[types.RequestId, str] = {}
        """The follow-up text of each take whose answer went out, until the host's next take."""
        self._acknowledged: OrderedDict[types.RequestId, str] = OrderedDict()
        """The latest acknowledged takes, oldest first: a late cancel of one re-offers it."""
        definitions = [*mcp_tools(self._tools.definitions), take_tool()]
        self._tool_list = [types.Tool.model_validate(tool) for tool in definitions]
        # The logging capability is deprecated by the 2026-07-28 protocol but is how a
        # handshake-era client (such as today's desktop hosts) hears about a due reminder.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            self.server: Server[None] = Server(
                SERVER_NAME,
                version=_version(),
                instructions=_INSTRUCTIONS.format(session=session),
                lifespan=_no_lifespan,
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
                on_list_resources=self._list_resources,
                on_read_resource=self._read_resource,
                on_subscribe_resource=self._subscribe,
                on_unsubscribe_resource=self._unsubscribe,
                on_subscriptions_listen=ListenHandler(self._bus),
                on_set_logging_level=self._set_level,
            )
        self.server.middleware.append(_arguments_as_text)
        self.server.add_notification_handler(
            "notifications/initialized", types.NotificationParams, self._initialized
        )
        self.server.add_notification_handler(
            "notifications/cancelled", types.CancelledNotificationParams, self._on_cancelled
        )

    async def announce(self) -> None:
        """Tell the client that a follow-up is pending (best-effort: notifications are advisory)."""
        await self._bus.publish(ResourceUpdated(uri=PENDING_URI))
        peer = self._peer
        if peer is None:
            return  # not initialized yet: announced once it is
        if self._subscribed:
            await peer.send_resource_updated(PENDING_URI)
        if peer.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS and _LOG_LEVELS.index(
            "notice"
        ) >= _LOG_LEVELS.index(self._log_level):
            await peer.send_notification(
                types.LoggingMessageNotification(
                    params=types.LoggingMessageNotificationParams(
                        level="notice",
                        logger=SERVER_NAME,
                        data={
                            "message": f"a reminder is due: call {TAKE_TOOL} to receive it",
                            "session": self._session_id,
                            "resource": PENDING_URI,
                        },
                    )
                )
            )

    # -- handlers ----------------------------------------------------------------------------

    async def _initialized(
        self, ctx: ServerRequestContext[None, object], _params: types.NotificationParams
    ) -> None:
        self._peer = ctx.session
        await self._announce_if_pending()

    async def _list_tools(
        self, ctx: ServerRequestContext[None, object], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._remember(ctx)
        return types.ListToolsResult(tools=self._tool_list)

    async def _call_tool(
        self, ctx: ServerRequestContext[None, object], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        self._remember(ctx)
        result: ToolResult | TakeResult
        text_arguments = _ARGUMENTS_TEXT.get()
        arguments = params.arguments if text_arguments is None else text_arguments
        if params.name == TAKE_TOOL:
            await self.acknowledge()
            result = await self._take(arguments)
            if isinstance(result, TakeResult) and result.followup is not None:
                if ctx.request_id is None:  # a request always has one
                    self._agent.requeue(result.followup)
                else:
                    self._answering[ctx.request_id] = result.followup
            if isinstance(result, ErrorResult):
                self._schedule.events.refused(
                    self._schedule.now(),
                    tool=TAKE_TOOL,
                    code=result.error.code,
                    message=result.error.message,
                )
        else:
            result = await self._tools.call_typed(params.name, arguments)
            if isinstance(result, DeleteResult) and result.deleted:
                await self._after_delete()
        # Hidden characters as JSON escapes, as in every tool result a model reads as text.
        text = frame_escape(msgspec.json.encode(result).decode())
        if isinstance(result, ErrorResult):
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)], is_error=True
            )
        structured: dict[str, object] = msgspec.to_builtins(result)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=structured,
            is_error=False,
        )

    async def _list_resources(
        self, ctx: ServerRequestContext[None, object], _params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        self._remember(ctx)
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=PENDING_URI,
                    name="pending-followups",
                    title="Pending reminder follow-ups",
                    description=(
                        "The reminder follow-up that is due now, if any: its occurrence keys "
                        f"and framed text. Reading it delivers nothing; {TAKE_TOOL} does."
                    ),
                    mime_type="application/json",
                )
            ]
        )

    async def _read_resource(
        self, ctx: ServerRequestContext[None, object], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        self._remember(ctx)
        if params.uri != PENDING_URI:
            raise MCPError(types.INVALID_PARAMS, f"no resource {params.uri!r}")
        try:
            delivery = await self._schedule.pending()
        except ScheduleError as error:
            raise MCPError(types.INTERNAL_ERROR, f"{error.code}: {error.message}") from None
        content = PendingFollowups(
            pending=delivery is not None,
            occurrence_keys=_keys(delivery),
            preview=None if delivery is None else self._schedule.frame(delivery),
            take_with="schedule_followups_take",
        )
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=PENDING_URI,
                    mime_type="application/json",
                    text=msgspec.json.encode(content).decode(),
                )
            ]
        )

    async def _subscribe(
        self, ctx: ServerRequestContext[None, object], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        self._remember(ctx)
        if params.uri == PENDING_URI:
            self._subscribed = True
            await self._announce_if_pending()
        return types.EmptyResult()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[None, object], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self._remember(ctx)
        if params.uri == PENDING_URI:
            self._subscribed = False
        return types.EmptyResult()

    async def _set_level(
        self, ctx: ServerRequestContext[None, object], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        self._remember(ctx)
        self._log_level = params.level
        return types.EmptyResult()

    # -- taking ------------------------------------------------------------------------------

    async def _take(self, arguments: Mapping[str, object] | str | None) -> TakeResult | ErrorResult:
        if isinstance(arguments, str):  # what the SDK would not have given (see _arguments_as_text)
            return _error(
                "invalid_selector",
                f"{TAKE_TOOL} takes no arguments; call it with {{}}.",
            )
        if arguments:
            given = ", ".join(f"`{key}`" for key in sorted(arguments))
            return _error(
                "invalid_selector",
                f"{TAKE_TOOL} takes no arguments, got {given}; call it with {{}}.",
            )
        if self._schedule.failure is not None:
            return _error(
                "internal_error",
                "reminder delivery has stopped in this server; tell the user that reminders "
                "may not be working.",
            )
        text: str | None = None
        try:
            if self._agent.unclaimed or await self._schedule.pending() is not None:
                text = await self._agent.take(timeout=TAKE_TIMEOUT_SECONDS)
            more = await self._schedule.pending() is not None
        except BaseException as error:
            if text is not None:
                self._agent.requeue(text)  # handed over, and this take cannot answer with it
            if isinstance(error, ScheduleError):
                return _error(error.code, error.message)
            raise
        keys = [] if text is None else _frame_keys(text)
        return TakeResult(ok=True, followup=text, occurrence_keys=keys, more=more)

    def outgoing(
        self, stream: WriteStream[SessionMessage], wire: StdoutWire
    ) -> WriteStream[SessionMessage]:
        """``stream``, the transport's outgoing messages, watched for the takes' answers: once
        ``wire`` (the stdout the transport writes to) has written one, its follow-up waits for
        the host's acknowledgement (:meth:`acknowledge`); if sending or writing it fails, it is
        offered again."""
        return _Outgoing(stream, wire, self._sending, self._settle)

    async def acknowledge(self) -> None:
        """Take the answers that went out as kept by the host: their texts leave the outbox.

        Called at each take (a host that cancelled an earlier take sent the cancel before it)
        and once the host has closed the connection (every cancel it sent has been read)."""
        answered, self._unacknowledged = self._unacknowledged, {}
        for request_id, text in answered.items():
            self._acknowledged[request_id] = text
        while len(self._acknowledged) > ACKNOWLEDGED_KEPT:
            self._acknowledged.popitem(last=False)
        await self._agent.delivered(*answered.values())

    async def cancelled(self, request_id: types.RequestId) -> None:
        """The host cancelled request ``request_id``: if it is a take whose answer went out, is
        going out or may still go out, the host drops that answer, so its follow-up is offered
        again."""
        if request_id in self._writing:
            self._withdrawn.add(request_id)  # the write's outcome re-offers it
            return
        # An answer not yet sent may be sent or not (the SDK sends none once it has read the
        # cancel in time): offered again either way, and its sending is then left alone.
        text = self._answering.pop(request_id, None) or self._unacknowledged.pop(request_id, None)
        if text is not None:
            self._agent.requeue(text)
        elif (text := self._acknowledged.pop(request_id, None)) is not None:
            await self._agent.reoffer(text)

    async def drop_redelivered(self) -> None:
        """Stop offering the outbox texts whose occurrences are all still due in the log: the
        server was killed before their dispatch was durable, and the schedule delivers them
        afresh — offering both would hand the same occurrence over twice in a row."""
        _, views = await self._schedule.active()
        due = {f"{view.id}@{view.scheduled_at}" for view in views}
        for text in self._agent.undelivered:
            keys = _frame_keys(text)
            if keys and all(key in due for key in keys):
                logger.warning(
                    "the outbox offered %s, whose dispatch was never recorded; "
                    "it is delivered afresh instead",
                    ", ".join(keys),
                )
                await self._agent.discard(text)

    def _sending(self, message: SessionMessage) -> tuple[types.RequestId, str] | None:
        answer = message.message
        if isinstance(answer, types.JSONRPCResponse | types.JSONRPCError) and answer.id is not None:
            text = self._answering.pop(answer.id, None)
            if text is None:
                return None
            self._writing.add(answer.id)
            return answer.id, text
        return None

    def _settle(self, request_id: types.RequestId, text: str, *, went_out: bool) -> None:
        """The answer to take ``request_id`` was written (``went_out``), or could not be."""
        self._writing.discard(request_id)
        withdrawn = request_id in self._withdrawn
        self._withdrawn.discard(request_id)
        if went_out and not withdrawn:
            self._unacknowledged[request_id] = text
        else:
            self._agent.requeue(text)

    async def _on_cancelled(
        self,
        _ctx: ServerRequestContext[None, object],
        params: types.CancelledNotificationParams,
    ) -> None:
        if params.request_id is not None:
            await self.cancelled(params.request_id)

    async def _after_delete(self) -> None:
        """A delete may have removed what the owner waits to hand over: let it look again."""
        try:
            if await self._schedule.pending() is None:
                self._agent.recheck()
        except ScheduleError:
            pass  # the owner stops on the same failure; the tool result already reported it

    async def _announce_if_pending(self) -> None:
        try:
            pending = await self._schedule.pending()
        except ScheduleError:
            return
        if pending is not None:
            await self.announce()

    def _remember(self, ctx: ServerRequestContext[None, object]) -> None:
        self._peer = ctx.session


class _Settle(Protocol):
    def __call__(self, request_id: types.RequestId, text: str, /, *, went_out: bool) -> None: ...


@final
class _Outgoing:
    """A transport's outgoing stream that says when a take's answer has gone out: not when
    the transport's writer has received it, but when the wire has written it."""

    def __init__(
        self,
        stream: WriteStream[SessionMessage],
        wire: StdoutWire,
        sending: Callable[[SessionMessage], tuple[types.RequestId, str] | None],
        settle: _Settle,
    ) -> None:
        self._stream = stream
        self._wire = wire
        self._sending = sending
        self._settle = settle

    async def send(self, item: SessionMessage, /) -> None:
        answer = self._sending(item)
        if answer is None:
            await self._stream.send(item)
            return
        request_id, text = answer
        written = self._wire.written(request_id)
        try:
            await self._stream.send(item)
        except BaseException:
            # Not taken by the writer (or, rarely, taken and then this send interrupted: the
            # text may then go out twice, which at-least-once allows).
            self._wire.forget(request_id, written)
            self._settle(request_id, text, went_out=False)
            raise
        try:
            went_out = await asyncio.shield(written)
        except asyncio.CancelledError:
            # The writer has the answer: its write, still to come, says whether it went out.
            written.add_done_callback(
                lambda done: self._settle(request_id, text, went_out=done.result())
            )
            raise
        self._settle(request_id, text, went_out=went_out)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> Self:
        await self._stream.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        return await self._stream.__aexit__(exc_type, exc_val, exc_tb)


async def serve_stdio(
    store: SessionStore | str | os.PathLike[str],
    session_id: str | None,
    *,
    outbox_dir: Path | None = None,
    place: str | None = None,
    clock: Clock | None = None,
    settings: Settings | None = None,
) -> None:
    """Open (or, without ``session_id``, create) a session of ``store`` and serve it on
    stdin/stdout.

    ``store`` is a store, or a directory of JSONL sessions. ``outbox_dir`` holds the file of
    follow-ups taken but not yet answered (default: the JSONL directory; required for another
    store); a missing one is created ``0700``, parents too, before the session is opened, and
    one that cannot be raises :class:`~session_schedule.mcp.agent.OutboxDirectoryError`
    (no session created or opened). ``place`` names the store in the line written to stderr
    (default: the directory). While serving, fd 0 reads as empty and fd 1 writes to stderr
    (:func:`~session_schedule.mcp.stdin.claimed_stdin` and
    :func:`~session_schedule.mcp.stdout.claimed_stdout` serve the wire from private duplicates),
    so stray output never corrupts the protocol; both are restored on return. Every line read is
    bounded and screened (:mod:`session_schedule.mcp.stdin`): one that does not decode is
    answered with its JSON-RPC error."""
    clock = clock or SystemClock()
    if isinstance(store, str | os.PathLike):
        directory = Path(store)
        # Every flush on the session's thread: the event loop keeps reading the host's requests
        # (its cancels among them) while a dispatch is made durable.
        store = JsonlSessionStore(directory, flush_on_loop=False)
        place = str(directory) if place is None else place
        if outbox_dir is None:
            outbox_dir = directory  # the store makes it, with the session's file
        else:
            await asyncio.to_thread(outbox_directory, outbox_dir)
    elif outbox_dir is None:
        raise ValueError("serve_stdio needs outbox_dir for a store that is not a directory")
    else:
        # No store makes this one: the first hand-over would fail, and every take after it.
        await asyncio.to_thread(outbox_directory, outbox_dir)
    if session_id is None:
        session: SessionHandle = await store.create(now=clock.now())
        opened = "new session"
    else:
        session = await open_when_free(store, session_id, clock=clock, note=_note_on_stderr)
        opened = "resumed session"
    # stdout carries the protocol.
    sys.stderr.write(
        f"session-schedule mcp: {opened} {session.id} in {place or 'the store'}; "
        f"pass {session.id} as SESSION to resume it\n"
    )
    sys.stderr.flush()
    async with session:
        mcp_server: ScheduleMcpServer | None = None

        async def announce() -> None:
            if mcp_server is not None:
                await mcp_server.announce()

        agent = PullAgent(announce, clock=clock, outbox=outbox_dir / f"{session.id}{OUTBOX_SUFFIX}")
        async with LiveSchedule(session, agent, clock=clock, settings=settings) as schedule:
            mcp_server = ScheduleMcpServer(schedule, agent, session=session.id)
            await mcp_server.drop_redelivered()
            with claimed_stdout() as wire_fd, claimed_stdin() as stdin_fd:
                wire = StdoutWire(fd_writer(wire_fd))
                # The SDK's writer only calls ``write`` and ``flush`` on the stdout it is given,
                # and its reader only iterates over the lines of the stdin.
                stdout = cast("anyio.AsyncFile[str]", wire)
                lines = StdinLines(fd_reader(stdin_fd), wire.write_unwatched)
                stdin = cast("anyio.AsyncFile[str]", lines)
                async with stdio_server(stdin=stdin, stdout=stdout) as (
                    read_stream,
                    write_stream,
                ):
                    await mcp_server.server.run(
                        read_stream,
                        mcp_server.outgoing(write_stream, wire),
                        mcp_server.server.create_initialization_options(),
                    )
                # The host closed the connection: every cancel it sent has been read.
                await mcp_server.acknowledge()
        await session.barrier()


def _note_on_stderr(text: str) -> None:
    sys.stderr.write(f"session-schedule mcp: {text}\n")
    sys.stderr.flush()


def _keys(delivery: Delivery | None) -> list[str]:
    return [] if delivery is None else [occurrence.key for occurrence in delivery.occurrences]


def _frame_keys(text: str) -> list[str]:
    """The occurrence keys of a framed follow-up. The outbox keeps follow-ups as the text the
    host reads, so a text taken from it (after a restart too) has its keys read back from the
    frame, where no prompt can forge one (a prompt is embedded on its own escaped line)."""
    return list(occurrence_keys(text))


_ARGUMENTS_TEXT: ContextVar[str | None] = ContextVar("_ARGUMENTS_TEXT", default=None)
"""The arguments of the ``tools/call`` being handled as JSON text, when the SDK could not have
given them to the handler (see :func:`_arguments_as_text`)."""


async def _arguments_as_text(
    ctx: ServerRequestContext[None, object], call_next: CallNext
) -> HandlerResult:
    """Server middleware: a ``tools/call`` whose arguments the SDK would refuse before the
    handler runs — not a JSON object (the SDK answers ``-32602`` "Invalid request parameters"),
    or moved to :data:`~session_schedule.mcp.stdin.ARGUMENTS_TEXT` by the stdin reader (a lone
    surrogate or a number out of range in them, which do not decode) — reaches the handler
    without them, and the handler gives the tool their JSON text instead: the model gets the
    tool's error (``isError: true``), as for any other mistake in its arguments."""
    params = ctx.params
    if ctx.method != "tools/call" or not isinstance(params, Mapping):
        return await call_next(ctx)
    text = params.get(ARGUMENTS_TEXT)
    arguments = params.get("arguments")
    if not isinstance(text, str):
        if arguments is None or isinstance(arguments, Mapping):
            return await call_next(ctx)
        text = msgspec.json.encode(arguments).decode()  # the SDK decoded it: it encodes
    rest = {key: item for key, item in params.items() if key not in {"arguments", ARGUMENTS_TEXT}}
    token = _ARGUMENTS_TEXT.set(text)
    try:
        return await call_next(dataclasses.replace(ctx, params=rest))
    finally:
        _ARGUMENTS_TEXT.reset(token)


def _error(code: ErrorCode, message: str) -> ErrorResult:
    return ErrorResult(ok=False, error=ErrorDetail(code=code, message=message))


@contextlib.asynccontextmanager
async def _no_lifespan(_server: Server[None]) -> AsyncIterator[None]:
    yield


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("session-schedule")
    except PackageNotFoundError:
        return ""
