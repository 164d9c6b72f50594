"""The ``chat`` command: a terminal chat whose agent sets reminders that come back as follow-up
turns while the person sits at the prompt.

The chat is a thin front end over the reference harness (:func:`~session_schedule.harness.chat.
live_chat`): it opens or creates a JSONL session, starts the agent and its live Schedule, feeds
them what the person types and prints what the harness reports.

- **Online** (``--model`` or ``$SESSION_SCHEDULE_MODEL``): the agent answers through the official
  ``openai`` SDK against any OpenAI-compatible Chat Completions endpoint (``--base-url`` or
  ``$OPENAI_BASE_URL``; the key from ``$OPENAI_API_KEY``). Endpoint errors are shown as one line
  and the session goes on.
- **Offline** (no model): the person is the model. Plain lines are recorded as user turns, slash
  commands (:mod:`session_schedule.cli.slash`) call the tools with the exact arguments shown, and
  follow-up turns are printed exactly as a model would receive them.

On a terminal the prompt is prompt_toolkit's, with ``patch_stdout`` so that turns arriving while
the person types print above the input line; text is coloured with ``rich`` and never read as
markup. Otherwise — a pipe, a file, a test — lines are read from stdin without a terminal and
every turn is printed plainly, one greppable line each (``you>``, ``assistant>``, ``tool call>``,
``tool result>``, ``error>``; a follow-up turn's framing follows a ``follow-up>`` line as it is);
each line is handled to the end (the agent idle again) before the next is read, and end of input
leaves once the agent is idle.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, assert_never, final

import msgspec

from session_schedule.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    HelpFormatter,
    add_quotas,
    add_session_argument,
    at_least_one,
    fail,
    non_negative_seconds,
    schedule_settings,
    store_location,
    store_words,
)
from session_schedule.cli.model import (
    API_KEY_PLACEHOLDER,
    MODEL_VARIABLE,
    Connection,
    ModelConfig,
    add_model_options,
    connect,
    model_config,
)
from session_schedule.cli.slash import (
    HELP,
    CallTool,
    Local,
    QuotaValue,
    Say,
    SetQuota,
    Usage,
    parse_line,
)
from session_schedule.core.errors import ScheduleError
from session_schedule.core.quiet import describe
from session_schedule.core.records import ScheduleView
from session_schedule.core.standing import standing
from session_schedule.core.time_input import is_supported_zone, load_zone
from session_schedule.core.visible import reveal
from session_schedule.extras import require
from session_schedule.harness.agent import ChatEvent
from session_schedule.harness.chat import LiveChat, live_chat
from session_schedule.harness.transcript import DEFAULT_MAX_CONTEXT_CHARS, recent_turns
from session_schedule.runtime.clock import SystemClock
from session_schedule.runtime.events import EVENT_LOGGER
from session_schedule.runtime.live import SessionQuotas, Settings
from session_schedule.runtime.opening import WAIT_SECONDS, open_when_free
from session_schedule.session.errors import (
    PersistenceUncertain,
    SessionBusy,
    SessionError,
    lease_seconds_left,
)
from session_schedule.session.history import away
from session_schedule.session.ids import SessionId
from session_schedule.session.location import StoreLocation, opened_store, store_url
from session_schedule.session.message import MessageEntry
from session_schedule.session.port import SessionHandle, SessionStore

if TYPE_CHECKING:
    from rich.console import Console

logger = logging.getLogger(__name__)

BUSY_WAIT_SECONDS: Final = WAIT_SECONDS
"""How long the chat waits for a session another process holds (a host hands it over within
seconds once asked; another front end keeps it until it closes)."""
REOPEN_INITIAL_SECONDS: Final = 1.0
REOPEN_MAX_SECONDS: Final = 30.0
"""After a storage failure the session is reopened after 1 s, then 2 s, 4 s … up to this."""
HISTORY_TURNS: Final = 8
"""How many of the last transcript turns a resumed chat shows (read from the end of the log:
the entries before them are not read)."""
MAX_LINE_BYTES: Final = 1 << 20

OFFLINE_BANNER: Final = (
    "offline mode — you drive the tools with /create, /list, /delete; "
    "set --model (and --base-url / OPENAI_API_KEY) to chat with a model"
)
OFFLINE_NOTE: Final = "recorded as a user turn; no model is connected to answer (offline mode)"
NOT_SENT_REOPENING: Final = (
    "not sent: the session is being reopened from storage; send it again in a moment"
)

DESCRIPTION: Final = f"""\
Chat with an agent that can set reminders; each reminder comes back into the conversation as a
follow-up turn while you sit at the prompt.

With a model (--model, else ${MODEL_VARIABLE}) the agent answers through any OpenAI-compatible
Chat Completions endpoint: --base-url, else $OPENAI_BASE_URL, else OpenAI's; the key is
$OPENAI_API_KEY (an endpoint given without one is sent the placeholder "{API_KEY_PLACEHOLDER}").
Without a model the chat is in offline mode: you are the model, calling the tools yourself with
/create, /list and /delete, and follow-up turns are shown exactly as a model would receive them.

Every turn is stored in the session, which can be resumed later (chat SESSION); reminders that
came due while it was closed are delivered then. Ctrl-D, Ctrl-C or /quit leaves."""

EPILOG: Final = f"""\
example: session-schedule chat --model llama3.2 \\
           --base-url http://localhost:11434/v1 --time-zone Europe/Paris
more examples:
  session-schedule chat                        offline mode, in a new session
  session-schedule chat --model gpt-4o-mini    OpenAI, with $OPENAI_API_KEY
  session-schedule chat s_7k2m4q9x3v5b         resume a session
  session-schedule s_7k2m4q9x3v5b              the same (chat is the default)

{HELP}"""

_LABEL_STYLES: Final = {
    "you": "bold green",
    "assistant": "bold cyan",
    "tool call": "magenta",
    "tool result": "dim",
    "follow-up": "bold yellow",
    "follow-up while you were away": "bold yellow",
    "error": "bold red",
    "usage": "yellow",
    "note": "dim",
    "reminder": "yellow",
}
# C0 controls other than tab and newline, DEL and C1 controls: a terminal would act on them.


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``chat`` to the program's subcommands."""
    parser = commands.add_parser(
        "chat",
        help="chat with an agent that sets reminders (offline without a model; the default)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    add_session_argument(
        parser,
        "the id of a session to resume (default: start a new session)",
        optional=True,
    )
    add_model_options(
        parser,
        model=f"the model to chat with (default: ${MODEL_VARIABLE}; without one: offline mode)",
        base_url="an OpenAI-compatible endpoint, such as http://localhost:11434/v1 "
        "(default: $OPENAI_BASE_URL, else OpenAI's)",
    )
    parser.add_argument(
        "--time-zone",
        metavar="ZONE",
        help="your time zone, UTC or an IANA name such as Asia/Tokyo: the model reads times you "
        "give without a zone in it (without it, the model asks which zone you mean)",
    )
    parser.add_argument(
        "--max-context-chars",
        metavar="N",
        type=at_least_one,
        default=DEFAULT_MAX_CONTEXT_CHARS,
        help="the most characters of conversation sent to the model per request; earlier turns "
        f"are left out (default: {DEFAULT_MAX_CONTEXT_CHARS})",
    )
    parser.add_argument(
        "--busy-wait",
        metavar="SECONDS",
        type=non_negative_seconds,
        default=BUSY_WAIT_SECONDS,
        help="how long to wait for a session another process holds, such as a host delivering "
        f"a reminder, before giving up with exit 4 (default: {BUSY_WAIT_SECONDS:g})",
    )
    add_quotas(parser)
    parser.set_defaults(handler=run)


def _shown_in_the_chat(record: logging.LogRecord) -> bool:
    """Whether an operator event's log record is left to the log: not a failed turn, which the
    chat shows itself."""
    return getattr(record, "event", None) not in ("turn-retry", "turn-failed")


def run(arguments: argparse.Namespace) -> int:
    """The ``chat`` command. Session errors escape for ``main`` to report (3 not found, 4 busy)."""
    zone: str | None = arguments.time_zone
    if zone is not None and not is_supported_zone(zone):
        try:
            load_zone(zone)
        except ScheduleError as error:
            return fail(f"--time-zone: {error.message}", EXIT_USAGE)
    config = model_config(arguments.model, arguments.base_url, os.environ)
    if isinstance(config, str):
        return fail(config, EXIT_USAGE)
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    if interactive:
        require("cli", purpose="the chat on a terminal")
    if config is not None:
        require("openai", purpose="chatting with a model")
    options = _Options(
        location=store_location(arguments),
        store_words=store_words(arguments),
        session=arguments.session,
        model=config,
        time_zone=zone,
        interactive=interactive,
        max_context_chars=arguments.max_context_chars,
        busy_wait=arguments.busy_wait,
        settings=schedule_settings(arguments),
    )
    # A failed turn is shown as an error> line; its operator event need not repeat it (for as
    # long as the chat runs: the logger is the process's).
    events = logging.getLogger(EVENT_LOGGER)
    events.addFilter(_shown_in_the_chat)
    try:
        # Ctrl-C is one of the ways to leave the chat, as Ctrl-D and /quit are: not an
        # interruption.
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_chat(options))
    finally:
        events.removeFilter(_shown_in_the_chat)
    return EXIT_OK


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class _Options:
    location: StoreLocation
    store_words: str
    """What a printed command adds to name the store (see ``store_words``)."""
    session: str | None
    model: ModelConfig | None
    time_zone: str | None
    interactive: bool
    max_context_chars: int
    busy_wait: float
    settings: Settings


async def _chat(options: _Options) -> None:
    async with opened_store(options.location) as store:
        await _chat_on(store, options)


async def _chat_on(store: SessionStore, options: _Options) -> None:
    clock = SystemClock()
    if options.session is None:
        session = await store.create(now=clock.now())
    else:
        try:
            session = await open_when_free(
                store,
                options.session,
                clock=clock,
                wait_seconds=options.busy_wait,
                note=_note_on_stderr,
            )
        except SessionBusy as busy:
            raise _busy_with_a_lease(busy) from None
    session_id = session.id
    async with connect(options.model) as connection:
        display = Display(
            styled_writer(_console()) if options.interactive else plain_writer,
            echo_person=not options.interactive,
            offline=connection.model is None,
        )
        display.banner(
            _banner(
                options,
                session_id,
                endpoint=connection.endpoint,
                resumed=options.session is not None,
                entries=len(session.entries),
            )
        )
        # Reminders a host (or another process) answered since the person's last message.
        meanwhile = away(session.entries, seed_length=session.header.seed_length)
        show_history(
            display,
            session,
            show=_show_command(options, session_id),
            since=meanwhile.since if meanwhile.answered else None,
        )
        answered = meanwhile.line()
        if answered is not None:
            display.note(answered)
        front = _Front(display)
        reading = asyncio.create_task(
            front.interactive() if options.interactive else front.piped(), name="chat input"
        )
        try:
            while True:
                failure = await _live(session, connection, clock, options, display, front, reading)
                if failure is None:
                    break
                logger.error("session %s stopped delivering: %s", session_id, failure)
                display.error(
                    f"storage failed ({failure}); reminders are paused while session "
                    f"{session_id} is reopened from storage"
                )
                session = await _reopen(store, session_id, display)
                display.note(f"session {session_id} reopened from storage; reminders resume")
        finally:
            if not reading.done():
                reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)
        display.banner([_resume_hint(options, session_id)])


def _busy_with_a_lease(busy: SessionBusy) -> SessionBusy:
    """``busy`` as the chat reports it (exit 4): where the holder's lease is what keeps the
    session (PostgreSQL), a process that is gone cannot be closed, so the message says when the
    lease lapses and what works then."""
    left = lease_seconds_left(busy)
    if left is None:
        return busy
    return SessionBusy(
        busy.session_id,
        f"session {busy.session_id} is held by another process whose lease lapses within "
        f"{left} s if that process is gone; try again after that (or with a --busy-wait longer "
        f"than {left} s), or close the session where it is open",
        lease_left=busy.lease_left,
    )


def _note_on_stderr(text: str) -> None:
    print(f"session-schedule chat: {text}", file=sys.stderr, flush=True)


def show_history(
    display: Display, session: SessionHandle, *, show: str | None, since: int | None = None
) -> None:
    """Print the last :data:`HISTORY_TURNS` turns of ``session``, read from the end of its log
    (the entries before them are not read); ``show`` is the command that prints them all.
    Follow-up turns from log position ``since`` on are marked as answered while the person was
    away."""
    earlier, shown = recent_turns(session.entries, HISTORY_TURNS)
    turns = [entry.payload for entry in shown if isinstance(entry.payload, MessageEntry)]
    away = frozenset(
        index
        for index, entry in enumerate(e for e in shown if isinstance(e.payload, MessageEntry))
        if since is not None and entry.position >= since
    )
    display.history(turns, earlier=earlier, show=show, away=away)


async def _live(
    session: SessionHandle,
    connection: Connection,
    clock: SystemClock,
    options: _Options,
    display: Display,
    front: _Front,
    reading: asyncio.Task[None],
) -> BaseException | None:
    """Run the chat on ``session`` until the input ends (``None``) or storage fails (the
    failure). The handle is closed on return."""
    async with session:
        async with live_chat(
            session,
            model=connection.model,
            clock=clock,
            time_zone=options.time_zone,
            on_event=display.event,
            max_context_chars=options.max_context_chars,
            settings=options.settings,
        ) as live:
            front.attach(live)
            try:
                failure = await _first_of(reading, live, front)
            finally:
                front.detach()
        if failure is None:
            with contextlib.suppress(PersistenceUncertain):
                await session.barrier()
        return failure


async def _first_of(
    reading: asyncio.Task[None], live: LiveChat, front: _Front
) -> BaseException | None:
    """``None`` when the input has ended; the failure when the live chat stopped for one or a
    prompt could not be stored."""
    failed = asyncio.ensure_future(live.wait_failure())
    refused = asyncio.ensure_future(front.refused.wait())
    try:
        await asyncio.wait({reading, failed, refused}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        failed.cancel()
        refused.cancel()
    if reading.done():
        reading.result()  # an error of the input loop is a bug: let it show
        return None
    front.refused.clear()
    return live.failure or front.refusal or RuntimeError("the chat stopped")


async def _reopen(store: SessionStore, session_id: SessionId, display: Display) -> SessionHandle:
    """``session_id`` opened again from storage, retrying with a doubling back-off."""
    delay = REOPEN_INITIAL_SECONDS
    while True:
        await asyncio.sleep(delay)
        try:
            return await store.open(session_id)
        except (SessionError, ScheduleError, OSError) as error:
            logger.error("reopening session %s failed: %s", session_id, error)  # noqa: TRY400
            display.error(
                f"reopening session {session_id} failed ({error}); retrying in {delay * 2:g} s"
            )
            delay = min(delay * 2, REOPEN_MAX_SECONDS)


def _banner(
    options: _Options, session_id: str, *, endpoint: str, resumed: bool, entries: int
) -> list[str]:
    opened = (
        f"resumed session {session_id} ({entries} log entries)"
        if resumed
        else f"new session {session_id}"
    )
    lines = [f"session-schedule chat: {opened}"]
    model = options.model
    if model is None:
        lines.append(OFFLINE_BANNER)
    else:
        lines.append(f"model: {model.name} at {endpoint}")
        lines.append(
            f"time zone: {options.time_zone} (from --time-zone)"
            if options.time_zone
            else "time zone: not declared; the model asks which zone you mean "
            "(set --time-zone to declare yours)"
        )
    lines.append(f"store: {store_url(options.location)}")
    lines.append("/help lists the commands; Ctrl-D or /quit leaves (the session can be resumed)")
    return lines


def _resume_hint(options: _Options, session_id: str) -> str:
    return f"session {session_id} closed; resume it with: {_command(options, 'chat', session_id)}"


def _show_command(options: _Options, session_id: str) -> str:
    """The command that prints the whole transcript."""
    return _command(options, "show", session_id)


def _command(options: _Options, name: str, session_id: str) -> str:
    return f"session-schedule{options.store_words} {name} {session_id}"


# -- the person's side -------------------------------------------------------------------------


@final
class _Front:
    """What the person types, handed to the live chat of the moment (none while the session is
    being reopened: a prompt typed then is reported as not sent)."""

    def __init__(self, display: Display) -> None:
        self._display = display
        self._live: LiveChat | None = None
        self._changed = asyncio.Event()
        self.refused = asyncio.Event()
        """Set when a prompt could not be stored: the session needs reopening."""
        self.refusal: PersistenceUncertain | None = None

    def attach(self, live: LiveChat) -> None:
        self._live = live
        self._changed.set()

    def detach(self) -> None:
        self._live = None
        self._changed.set()

    async def handle(self, line: str) -> bool:
        """Act on one line; ``False`` when the person asked to leave."""
        command = parse_line(line)
        match command:
            case Say(text=""):
                pass
            case Say(text=text):
                await self._send(lambda live: live.agent.submit_durably(text))
            case CallTool(name=name, arguments=arguments):
                self._display.tool_request(name, arguments)
                await self._send(lambda live: _call_tool(live, name, arguments))
            case Local(command="quit"):
                return False
            case Local(command="quotas"):
                await self._send(self._quotas)
            case Local():
                self._display.help()
            case SetQuota(name=quota, value=value):
                await self._send(lambda live: self._quotas(live, quota, value))
            case Usage():
                self._display.usage(command)
            case _:
                assert_never(command)
        return True

    async def _quotas(
        self,
        live: LiveChat,
        name: Literal["turns_per_day", "quiet_hours", "max_active"] | None = None,
        value: QuotaValue = "default",
    ) -> None:
        """Show the session's quotas, after setting ``name`` to ``value`` if given."""
        if name is None:
            quotas = live.schedule.quotas()
        else:
            try:
                quotas = await live.schedule.set_quota(
                    name, msgspec.UNSET if value == "default" else value
                )
            except ValueError as error:
                self._display.error(str(error))
                return
            except ScheduleError as error:
                self._display.error(f"not set: {error.message}")
                return
        for line in quota_lines(quotas):
            self._display.note(line)

    async def _send(self, send: Callable[[LiveChat], Awaitable[object]]) -> None:
        live = self._live
        if live is None:
            self._display.error(NOT_SENT_REOPENING)
            return
        try:
            await send(live)
        except PersistenceUncertain as error:
            self._display.error(f"not sent: {error}")
            self.refusal = error
            self.refused.set()
        except RuntimeError:
            self._display.error(NOT_SENT_REOPENING)

    async def idle(self) -> None:
        """Return once the live chat of the moment is idle (waiting out a reopening)."""
        while True:
            self._changed.clear()
            live = self._live
            changed = asyncio.ensure_future(self._changed.wait())
            if live is None:
                await changed
                continue
            idle = asyncio.ensure_future(live.agent.wait_idle())
            try:
                await asyncio.wait({idle, changed}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
                idle.cancel()
            if idle.done() and not idle.cancelled():
                return

    async def interactive(self) -> None:
        """Read lines at a prompt_toolkit prompt until Ctrl-D, Ctrl-C or ``/quit``."""
        from prompt_toolkit import PromptSession  # noqa: PLC0415 - only a terminal needs it
        from prompt_toolkit.formatted_text import FormattedText  # noqa: PLC0415
        from prompt_toolkit.patch_stdout import patch_stdout  # noqa: PLC0415

        prompt: PromptSession[str] = PromptSession()
        with patch_stdout(raw=True):
            while True:
                try:
                    line = await prompt.prompt_async(FormattedText([("bold ansigreen", "you> ")]))
                except (EOFError, KeyboardInterrupt):
                    return
                if not await self.handle(line):
                    return

    async def piped(self) -> None:
        """Read stdin line by line, each handled to the end; at end of input, wait until idle."""
        async with _LineReader.open() as reader:
            while True:
                try:
                    line = await reader.readline()
                except ValueError:
                    self._display.error(f"a line longer than {MAX_LINE_BYTES} bytes was ignored")
                    continue
                if line is None or not await self.handle(line):
                    break
                await self.idle()
        await self.idle()


def quota_lines(quotas: SessionQuotas) -> list[str]:
    """The chat's lines for ``quotas``: each quota, and who set it."""

    def by(set_by: str) -> str:
        return "set for this session" if set_by == "session" else "the program's setting"

    turns = "no limit" if quotas.turns_per_day is None else f"{quotas.turns_per_day}"
    quiet = "none" if quotas.quiet_hours is None else describe(quotas.quiet_hours)
    return [
        f"reminder turns per day: {turns} ({by(quotas.turns_per_day_set_by)})",
        f"quiet hours: {quiet} ({by(quotas.quiet_hours_set_by)})",
        (
            f"active reminders: at most {quotas.max_active} ({by(quotas.max_active_set_by)}; "
            f"the program allows {quotas.program_max_active})"
        ),
    ]


async def _call_tool(live: LiveChat, name: str, arguments: Mapping[str, object]) -> None:
    live.agent.submit_tool(name, arguments)


@final
class _LineReader:
    """Lines of stdin without blocking the event loop.

    A pipe, socket or terminal is read through the loop (``connect_read_pipe`` on a duplicate of
    the descriptor, so closing it leaves ``sys.stdin`` open); anything else — a regular file,
    ``/dev/null``, a stream with no descriptor — cannot block for long and is read in a worker
    thread.
    """

    def __init__(
        self, stream: asyncio.StreamReader | None, close: Callable[[], None] | None
    ) -> None:
        self._stream = stream
        self._close = close

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls) -> AsyncIterator[_LineReader]:
        reader = await cls._through_loop()
        try:
            yield reader or cls(None, None)
        finally:
            if reader is not None and reader._close is not None:
                reader._close()
                await asyncio.sleep(0)  # let the transport release its descriptor

    @classmethod
    async def _through_loop(cls) -> _LineReader | None:
        try:
            fd = sys.stdin.fileno()
            mode = os.fstat(fd).st_mode
        except (AttributeError, ValueError, OSError):
            return None
        # The loop cannot watch other character devices (/dev/null) or regular files.
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)):
            return None
        was_blocking = os.get_blocking(fd)
        pipe = os.fdopen(os.dup(fd), "rb", buffering=0)
        stream = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        loop = asyncio.get_running_loop()
        try:
            transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(stream), pipe
            )
        except (OSError, ValueError):
            pipe.close()
            os.set_blocking(fd, was_blocking)
            return None

        def close() -> None:
            transport.close()
            # The duplicate shares the open file's flags; give the original its mode back.
            with contextlib.suppress(OSError):
                os.set_blocking(fd, was_blocking)

        return cls(stream, close)

    async def readline(self) -> str | None:
        """The next line, ``None`` at end of input; ``ValueError`` for a line over the limit
        (it is dropped)."""
        if self._stream is None:
            line = await asyncio.to_thread(sys.stdin.readline)
        else:
            line = (await self._stream.readline()).decode(errors="replace")
        return line or None


# -- the transcript on screen ------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Line:
    """One thing to show: ``label> text``, or ``text`` alone when there is no label."""

    label: str | None
    text: str
    block: bool = False
    """The text goes below the label, as it is (a follow-up turn's framing)."""


Writer = Callable[[Line], None]


@final
class Display:
    """Turns harness events and chat notes into :class:`Line` values for a writer.

    A tool call the person made is shown when it is sent (the exact JSON arguments); the same
    call coming back from the harness as a transcript turn is not shown twice. In offline mode the
    first message the person sends is followed by a note that no model will answer.
    """

    def __init__(self, write: Writer, *, echo_person: bool, offline: bool) -> None:
        self._write = write
        self._echo_person = echo_person
        self._offline_note = offline
        self._sent: deque[tuple[str, str]] = deque()

    def banner(self, lines: list[str]) -> None:
        for text in lines:
            self._write(Line(label=None, text=text))

    def history(
        self,
        turns: list[MessageEntry],
        *,
        earlier: int,
        show: str | None,
        away: frozenset[int] = frozenset(),
    ) -> None:
        """The last few ``turns`` of a resumed session, for context; the earlier turns are in
        its first ``earlier`` log entries (0: there are none), which ``show`` (a command, if
        there is one) prints. The follow-up turns at the indices in ``away`` are marked as
        answered while the person was away."""
        if not turns:
            return
        if not earlier:
            heading = f"--- the {len(turns)} turns so far ---"
        else:
            where = "the first log entry" if earlier == 1 else f"the first {earlier} log entries"
            see = f"; see them with: {show}" if show is not None else ""
            heading = (
                f"--- the last {len(turns)} turns; the earlier ones, in {where}, are not "
                f"shown{see} ---"
            )
        self._write(Line(label=None, text=heading))
        for index, turn in enumerate(turns):
            self.turn(turn, live=False, away=index in away)
        self._write(Line(label=None, text="---"))

    def event(self, event: ChatEvent) -> None:
        """The harness's ``on_event`` callback."""
        if event.kind == "error":
            self.error(event.text)
        elif event.message is not None:
            self.turn(event.message, live=True)

    def turn(self, message: MessageEntry, *, live: bool, away: bool = False) -> None:
        if message.role == "user":
            if message.origin == "followup":
                label = "follow-up while you were away" if away else "follow-up"
                self._write(Line(label=label, text=message.content, block=True))
            else:
                if self._echo_person or not live:
                    self._write(Line(label="you", text=message.content))
                if live and self._offline_note:
                    self._offline_note = False
                    self.note(OFFLINE_NOTE)
        elif message.role == "tool":
            self._write(Line(label="tool result", text=message.content))
            for schedule_id, words in standings(message.content):
                self._write(Line(label="reminder", text=f"{schedule_id}: {words}"))
        else:
            calls = () if isinstance(message.tool_calls, msgspec.UnsetType) else message.tool_calls
            if message.content or not calls:
                self._write(Line(label="assistant", text=message.content))
            for call in calls:
                if (
                    live
                    and not message.content
                    and self._sent
                    and self._sent[0]
                    == (
                        call.name,
                        call.arguments,
                    )
                ):
                    self._sent.popleft()
                    continue
                self._write(Line(label="tool call", text=f"{call.name} {call.arguments}"))

    def tool_request(self, name: str, arguments: Mapping[str, object]) -> None:
        """Show a tool call the person sends, with the exact JSON arguments."""
        text = msgspec.json.encode(arguments).decode()
        self._sent.append((name, text))
        self._write(Line(label="tool call", text=f"{name} {text}"))

    def error(self, text: str) -> None:
        self._write(Line(label="error", text=text))

    def usage(self, usage: Usage) -> None:
        self._write(Line(label="error", text=usage.message))
        self._write(Line(label="usage", text=usage.usage))

    def note(self, text: str) -> None:
        self._write(Line(label="note", text=text))

    def help(self) -> None:
        self._write(Line(label=None, text=HELP))


def standings(content: str) -> list[tuple[str, str]]:
    """``(id, standing)`` of each reminder a tool result shows that has a standing (SPEC §11:
    paused, snoozed, bounded, lateness-limited), in the words the list and the page use."""
    try:
        result = msgspec.json.decode(content)
    except msgspec.DecodeError:
        return []
    if not isinstance(result, dict) or result.get("ok") is not True:
        return []
    shown = result.get("schedules", [result.get("schedule")])
    found: list[tuple[str, str]] = []
    for item in shown if isinstance(shown, list) else []:
        try:
            view = msgspec.convert(item, ScheduleView)
        except msgspec.ValidationError:
            continue
        if words := standing(view):
            found.append((view.id, words))
    return found


def visible(text: str) -> str:
    """``text`` with the control characters a terminal would act on written as ``\\xNN``, and
    the other hidden characters as ``\\uXXXX`` (:func:`~session_schedule.core.visible.reveal`)."""
    return reveal(text)


def plain_text(line: Line) -> str:
    """``line`` as plain text: ``label> text``, or the label alone above a block."""
    text = visible(line.text)
    if line.label is None:
        return text
    return f"{line.label}>\n{text}" if line.block else f"{line.label}> {text}"


def plain_writer(line: Line) -> None:
    """Print ``line`` as plain text, flushed at once: stdout may be a pipe someone is reading."""
    print(plain_text(line), flush=True)


def _console() -> Console:
    from rich.console import Console  # noqa: PLC0415 - only a terminal needs it

    # No markup, emoji codes or highlighting: every text shown is untrusted and printed as is.
    return Console(force_terminal=True, markup=False, emoji=False, highlight=False, soft_wrap=True)


def styled_writer(console: Console) -> Writer:
    """A writer printing through ``console`` with a coloured label; the text itself is never
    read as markup."""
    from rich.text import Text  # noqa: PLC0415

    def write(line: Line) -> None:
        text = visible(line.text)
        if line.label is None:
            console.print(Text(text, style="dim"))
            return
        label = Text(f"{line.label}>", style=_LABEL_STYLES.get(line.label, ""))
        console.print(Text.assemble(label, "\n" if line.block else " ", text))

    return write
