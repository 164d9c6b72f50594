"""The web overlay's ASGI app: the page, its JSON API and the live event streams (SPEC §2, §6).

Endpoints (every body JSON, every error ``{"error": "<sentence>"}``):

=======  =====================================  =============================================
GET      ``/``                                  the page
GET      ``/api/info``                          mode (model or offline), model name, tools
GET      ``/api/sessions``                      every stored Session
POST     ``/api/sessions``                      create a Session (empty body or ``{}``)
POST     ``/api/sessions/{id}/fork``            ``{"at": N | null}``: fork after N log entries
GET      ``/api/sessions/{id}``                 header and the newest page of transcript turns
                                                (opens it live)
GET      ``/api/sessions/{id}/turns``           ``?before=P&limit=N``: the turns before log
                                                position P (a page: N at most 100)
POST     ``/api/sessions/{id}/prompts``         ``{"text": ..., "zone": <IANA zone> | null}``
POST     ``/api/sessions/{id}/tools/{name}``    offline mode: the person calls a tool; the
                                                answer is the tool's result, once stored
GET      ``/api/sessions/{id}/schedules``       the ``schedule_list`` view, for the side panel,
                                                and ``standings``: each managed reminder's
                                                standing in words, by id
GET      ``/api/sessions/{id}/history``         every occurrence of its reminders and its
                                                outcome, and ``away``: the reminders answered
                                                since the person's last message
GET      ``/api/sessions/{id}/timeline``        ``?until=T``: its reminders' occurrences from
                                                now until the RFC 3339 instant T (default: a
                                                day on), as ``session-schedule timeline --json``
                                                gives them: overdue ones with what they skip,
                                                too-late ones as the misses the owner records
GET      ``/api/sessions/{id}/events``          ``?from=P``: Server-Sent Events, the turns
                                                from log position P on, then notices and turns
                                                as they happen
GET      ``/api/sessions/{id}/opening``         ``{"live": bool, "handover": <line> | null}``:
                                                whether it is live here, and the line to show
                                                while an open waits for another process (a
                                                host) to hand it over (never waits itself)
GET      ``/api/sessions/{id}/quotas``          the session's quotas and who set each
POST     ``/api/sessions/{id}/quotas``          set some, as the chat does (``web/quotas.py``)
=======  =====================================  =============================================

A transcript turn is known by its position in the Session's log. The newest page of turns (at
most :data:`~session_schedule.web.live.PAGE_TURNS`) comes with ``before``, the position to ask
the earlier turns before (``null``: there are none), and ``next``, the position the event
stream continues from; only the turns asked for are read from the log.

Refusals: 400 malformed, 401 token, 403 refused origin or host, 404 unknown, 405, 408 slow body,
409 a session held elsewhere (``Retry-After``: the page tries again) or corrupt, 413 too large,
415 not JSON, 422 wrong shape, 429 too many creates and forks (``Retry-After``), 503 storage
failure, stopping, every live Session in use, or every event stream in use (``Retry-After``; the
page retries by itself); an unexpected failure is a JSON 500 with the cause in the log.

Event streams have their own limit (:attr:`~session_schedule.web.live.LiveLimits.max_streams`,
counted in :class:`StreamSlots`), below the server's connection limit: however many pages are
open, connections remain for requests.

Each prompt carries the zone the browser reported for it; the agent builds the turn's time
context from the zones of the turn's prompts and gives it to the model for that turn only.
Nothing here stores the zone, and Schedule never sees it. Delivered reminders reach the page only
as ordinary transcript turns on the event stream; the schedules endpoint is a view of state.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from importlib import resources
from typing import Final, TypeVar, final, overload

import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import MAX_INSTANT, MS_PER_DAY, Instant, format_instant
from session_schedule.core.standing import standing
from session_schedule.core.time_input import load_zone, parse_rfc3339
from session_schedule.core.timeline import build_timeline, record_misses
from session_schedule.runtime.clock import Clock
from session_schedule.runtime.live import Settings
from session_schedule.session.errors import (
    PersistenceUncertain,
    SessionBusy,
    SessionClosed,
    SessionError,
    SessionExists,
    SessionNotFound,
    not_a_session_id,
)
from session_schedule.session.history import (
    Away,
    HistoryRow,
    away,
    history_row,
    occurrence_history,
)
from session_schedule.session.ids import SessionId, parse_session_id
from session_schedule.session.port import SessionHeader, SessionStore
from session_schedule.session.provenance import made_by_reminders
from session_schedule.tools.catalog import TOOL_NAMES
from session_schedule.tools.results import ErrorResult, ListResult
from session_schedule.web.bodies import (
    DEFAULT_BODY_SECONDS,
    MAX_PROMPT_CHARS,
    CreateBody,
    ForkBody,
    PromptBody,
    read_json,
)
from session_schedule.web.events import event_stream
from session_schedule.web.limits import Rate, TokenBucket
from session_schedule.web.live import (
    PAGE_TURNS,
    LiveLimits,
    LiveSession,
    LiveSessions,
    ModelFactory,
    ServerStopping,
    TooManyLiveSessions,
    TurnView,
)
from session_schedule.web.problems import HttpProblem, loggable, problem_response, shorten
from session_schedule.web.quotas import QuotasBody, quotas_view, set_quotas
from session_schedule.web.security import AccessPolicy, SecurityMiddleware, access_policy

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_HEARTBEAT_SECONDS: Final = 15.0
DEFAULT_NEW_SESSIONS: Final = Rate(burst=20, refill_seconds=3.0)
"""Creates and forks together: 20 at once, then one every 3 seconds (20 a minute)."""
SWEEP_SECONDS: Final = 60
"""How often idle live Sessions are looked for."""
STATIC: Final = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}


@final
class SessionSummary(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    id: str
    created_at: str
    parent_id: str | None
    seed_length: int
    live: bool
    """Whether the Session is open in this server (its reminders are being delivered)."""


@final
class SessionDetail(msgspec.Struct, frozen=True, kw_only=True):
    session: SessionSummary
    turns: list[TurnView]
    """The newest page of transcript turns, oldest first."""
    before: int | None
    """The ``before`` of ``/turns`` that gives the turns before these (``None``: none)."""
    next: int
    """The log position the event stream continues from (its ``from``)."""


STREAM_RETRY_SECONDS: Final = 15
"""What ``Retry-After`` says when every event stream is in use."""
TIMELINE_LIMIT: Final = 100
"""The most occurrences the timeline lists (the next of each reminder first), as the CLI's
``timeline`` does by default."""
TIMELINE_DEFAULT_MS: Final = MS_PER_DAY
"""The timeline's window when the page names no ``until``: a day, as the CLI's."""
_UTC: Final = load_zone("UTC")
BUSY_RETRY_SECONDS: Final = 1
"""What ``Retry-After`` says when a session is held by another process (a host hands it over
within seconds once asked)."""


@final
class StreamSlots:
    """The event streams open at once, and how many may be (``limit``, which the server may
    lower to fit its connection limit)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0

    def take(self) -> bool:
        """Take a slot for a new stream: ``False`` when every one is in use."""
        if self.open >= self.limit:
            return False
        self.open += 1
        return True

    def release(self) -> None:
        self.open -= 1


@final
class _CountedStream(StreamingResponse):
    """An event stream that gives its slot back when its response ends, however it ends."""

    def __init__(
        self, content: AsyncIterator[bytes], *, slots: StreamSlots, headers: Mapping[str, str]
    ) -> None:
        super().__init__(content, media_type="text/event-stream", headers=headers)
        self._slots = slots

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._slots.release()


@final
class OverlayApp(Starlette):
    """The Starlette app, with the live Sessions it serves (``sessions.close_streams()`` ends
    the event streams before a server stops; the lifespan closes the Sessions), its event
    stream slots and its access policy (whose aggregate logs a stopping server flushes)."""

    sessions: LiveSessions
    streams: StreamSlots
    policy: AccessPolicy


def create_app(
    store: SessionStore,
    *,
    model: ModelFactory | None,
    clock: Clock | None = None,
    settings: Settings | None = None,
    policy: AccessPolicy | None = None,
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS,
    body_seconds: float = DEFAULT_BODY_SECONDS,
    live_limits: LiveLimits | None = None,
    new_sessions: Rate = DEFAULT_NEW_SESSIONS,
    monotonic: Callable[[], float] = time.monotonic,
) -> OverlayApp:
    """The overlay over ``store``.

    ``model`` makes each live Session's model; ``None`` is offline mode (nobody answers, the
    person calls the tools). ``policy`` defaults to a loopback-only server without a token.
    A request body must arrive within ``body_seconds`` (else 408). ``live_limits`` bounds the
    live Sessions (swept for idle ones every :data:`SWEEP_SECONDS`); creates and forks together
    are limited to ``new_sessions`` (else 429), on the ``monotonic`` clock.
    """
    live_limits = live_limits or LiveLimits()
    policy = policy or access_policy("127.0.0.1")
    sessions = LiveSessions(store, model=model, clock=clock, settings=settings, limits=live_limits)
    streams = StreamSlots(live_limits.max_streams)
    api = _Api(
        sessions,
        streams=streams,
        model_name=model().name if model is not None else None,
        heartbeat_seconds=heartbeat_seconds,
        body_seconds=body_seconds,
        new_sessions=TokenBucket(new_sessions, monotonic=monotonic),
    )

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        sweeper = asyncio.create_task(
            _sweep(sessions, min(SWEEP_SECONDS, live_limits.idle_seconds))
        )
        try:
            yield
        finally:
            sweeper.cancel()
            await asyncio.gather(sweeper, return_exceptions=True)
            sessions.close_streams()
            await sessions.close()

    app = OverlayApp(
        routes=api.routes(),
        middleware=[Middleware(SecurityMiddleware, policy=policy)],
        exception_handlers={
            HttpProblem: _problem,
            HTTPException: _http_exception,
            SessionError: _session_error,
            ScheduleError: _schedule_error,
            ServerStopping: _stopping,
            TooManyLiveSessions: _too_many_live,
            OSError: _storage_error,
        },
        lifespan=lifespan,
    )
    app.sessions = sessions
    app.streams = streams
    app.policy = policy
    return app


@final
class _Api:
    def __init__(
        self,
        sessions: LiveSessions,
        *,
        streams: StreamSlots,
        model_name: str | None,
        heartbeat_seconds: float,
        body_seconds: float,
        new_sessions: TokenBucket,
    ) -> None:
        self._sessions = sessions
        self._streams = streams
        self._body_seconds = body_seconds
        self._new_sessions = new_sessions
        self._model_name = model_name
        self._heartbeat = heartbeat_seconds
        static = resources.files("session_schedule.web") / "static"
        self._page = (static / "index.html").read_bytes()
        self._static = {name: (static / name).read_bytes() for name in STATIC}

    def routes(self) -> list[Route]:
        return [
            Route("/", self.page, methods=["GET"]),
            Route("/static/{name}", self.static, methods=["GET"]),
            Route("/api/info", self.info, methods=["GET"]),
            Route("/api/sessions", self.list_sessions, methods=["GET"]),
            Route("/api/sessions", self.create_session, methods=["POST"]),
            Route("/api/sessions/{session_id}", self.get_session, methods=["GET"]),
            Route("/api/sessions/{session_id}/turns", self.turns, methods=["GET"]),
            Route("/api/sessions/{session_id}/fork", self.fork_session, methods=["POST"]),
            Route("/api/sessions/{session_id}/prompts", self.post_prompt, methods=["POST"]),
            Route("/api/sessions/{session_id}/tools/{name}", self.post_tool, methods=["POST"]),
            Route("/api/sessions/{session_id}/schedules", self.schedules, methods=["GET"]),
            Route("/api/sessions/{session_id}/history", self.history, methods=["GET"]),
            Route("/api/sessions/{session_id}/timeline", self.timeline, methods=["GET"]),
            Route("/api/sessions/{session_id}/quotas", self.quotas, methods=["GET", "POST"]),
            Route("/api/sessions/{session_id}/events", self.events, methods=["GET"]),
            Route("/api/sessions/{session_id}/opening", self.opening, methods=["GET"]),
        ]

    async def page(self, _request: Request) -> Response:
        return Response(self._page, media_type="text/html; charset=utf-8")

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in self._static:
            raise HttpProblem(404, f"there is no static file {shorten(name)!r}.")
        return Response(self._static[name], media_type=STATIC[name])

    async def info(self, _request: Request) -> Response:
        return _json(
            {
                "mode": "offline" if self._sessions.offline else "model",
                "model": self._model_name,
                "tools": list(TOOL_NAMES),
                "maxPromptChars": MAX_PROMPT_CHARS,
            }
        )

    async def list_sessions(self, _request: Request) -> Response:
        headers, problems = await self._sessions.scan()
        for problem in problems:
            logger.error("listing sessions: %s", loggable(str(problem)))
        return _json(
            {
                "sessions": [self._summary(header) for header in reversed(headers)],
                # A session whose header cannot be read is named, not hidden (nor fatal).
                "unreadable": [problem.session_id for problem in problems],
            }
        )

    async def create_session(self, request: Request) -> Response:
        await self._body(request, CreateBody, empty=CreateBody())
        self._limit_new_sessions()
        live = await self._sessions.create()
        logger.info("created session %s", live.id)
        return _json(self._detail(live), status=201)

    async def fork_session(self, request: Request) -> Response:
        parent = _session_id(request.path_params["session_id"])
        body = await self._body(request, ForkBody, empty=ForkBody())
        self._limit_new_sessions()
        try:
            live = await self._sessions.fork(parent, body.at)
        except ValueError as error:
            raise HttpProblem(422, _sentence(str(error))) from None
        logger.info("forked session %s from %s at %s", live.id, parent, body.at)
        return _json(self._detail(live), status=201)

    async def get_session(self, request: Request) -> Response:
        live = await self._live(request)
        return _json(self._detail(live))

    async def turns(self, request: Request) -> Response:
        before = _position(request.query_params.get("before"), "before", None)
        limit = _limit(request.query_params.get("limit"))
        live = await self._live(request)
        return _json(live.page(before, limit))

    async def post_prompt(self, request: Request) -> Response:
        session_id = _session_id(request.path_params["session_id"])
        body = await self._body(request, PromptBody)
        if not body.text.strip():
            raise HttpProblem(422, "the prompt is empty; type something to send.")
        live = await self._sessions.get(session_id)
        zone = "none" if body.zone is None else loggable(shorten(body.zone))
        logger.info("prompt for session %s (browser zone %s)", live.id, zone)
        try:
            await live.chat.agent.submit_durably(body.text, zone=body.zone)
        except PersistenceUncertain as error:
            # Maybe stored, maybe not: never acknowledged. The next request reopens the Session.
            logger.warning("a prompt for session %s was not sent: %s", live.id, error.message)
            raise HttpProblem(
                503, f"the prompt was not sent ({error.message}); send it again."
            ) from None
        return _json({"queued": True}, status=202)

    async def post_tool(self, request: Request) -> Response:
        session_id = _session_id(request.path_params["session_id"])
        name = request.path_params["name"]
        if name not in TOOL_NAMES:
            raise HttpProblem(
                404, f"there is no tool {shorten(name)!r}; the tools are {', '.join(TOOL_NAMES)}."
            )
        if not self._sessions.offline:
            raise HttpProblem(
                409, "a model drives the tools in this server; ask it in a prompt instead."
            )
        arguments = await read_json(
            request,
            dict[str, object],
            empty={},
            timeout=self._body_seconds,
            lone_surrogates=True,
        )
        live = await self._sessions.get(session_id)
        logger.info("tool call %s by the person in session %s", name, live.id)
        called = live.chat.agent.submit_tool(name, arguments)
        try:
            # Shielded: a client that goes away does not take the queued call back.
            result = await asyncio.shield(called)
        except asyncio.CancelledError:
            if not called.cancelled():
                raise  # this request was cancelled; the call still runs
            raise HttpProblem(
                503, "the session closed before the tool call ran; call the tool again."
            ) from None
        except PersistenceUncertain as error:
            logger.warning(
                "a tool call in session %s may not be stored: %s", live.id, error.message
            )
            raise HttpProblem(
                503,
                f"the tool call ran but may not be stored ({error.message}); check with "
                "schedule_list once the session is back.",
            ) from None
        if result is None:
            raise HttpProblem(500, "the tool call failed; the session's events say why.")
        return Response(result, media_type="application/json")

    async def schedules(self, request: Request) -> Response:
        live = await self._live(request)
        # The side panel shows every active reminder: the pages a model gets, put together.
        result = await live.chat.tools.call_typed("schedule_list", {})
        while isinstance(result, ListResult) and result.next_cursor is not None:
            following = await live.chat.tools.call_typed(
                "schedule_list", {"cursor": result.next_cursor}
            )
            if not isinstance(following, ListResult):
                result = following
                break
            result = ListResult(
                ok=True,
                now=result.now,
                schedules=[*result.schedules, *following.schedules],
                next_cursor=following.next_cursor,
                total=following.total,
            )
        if isinstance(result, ErrorResult):
            statuses = {"persistence_uncertain": 503, "corrupt_schedule_log": 409}
            status = statuses.get(result.error.code, 500)
            logger.error(
                "schedule_list for the side panel of session %s failed: %s: %s",
                live.id,
                result.error.code,
                loggable(result.error.message),
            )
            raise HttpProblem(status, _sentence(result.error.message))
        if not isinstance(result, ListResult):
            return _json(result)
        # The cards show a reminder's standing in the words the list and the chat use.
        standings = {view.id: text for view in result.schedules if (text := standing(view))}
        return _json({**msgspec.structs.asdict(result), "standings": standings})

    async def history(self, request: Request) -> Response:
        live = await self._live(request)
        header = live.header
        entries = live.session.entries
        runs = occurrence_history(entries, seed_length=header.seed_length, session=header.id)
        made = made_by_reminders(entries, seed_length=header.seed_length)
        return _json(
            HistoryPage(
                occurrences=[
                    history_row(run, set_during=made.get(run.schedule_id)) for run in runs
                ],
                away=away(entries, seed_length=header.seed_length),
            )
        )

    async def timeline(self, request: Request) -> Response:
        """The side panel's timeline: the ``timeline --json`` document of the session's log at
        the session's now, in UTC (the page shows each time in the browser's zone)."""
        live = await self._live(request)
        now = live.chat.schedule.now()
        until = _until(request.query_params.get("until"), now)
        state = live.state()
        # As the owner's next decision will record them (its agent may be busy with a turn,
        # or its quotas holding reminders back), the same core the CLI's timeline reads.
        missed = record_misses(state, now)
        return _json(
            build_timeline(
                state.ordered(),
                now=now,
                until=until,
                zone=_UTC,
                limit=TIMELINE_LIMIT,
                statuses=state.statuses(),
                missed=missed,
            )
        )

    async def quotas(self, request: Request) -> Response:
        """The session's quotas (``web/quotas.py``); a POST sets some, as the chat does."""
        if request.method == "GET":
            live = await self._live(request)
            return _json(quotas_view(live.chat.schedule.quotas()))
        session_id = _session_id(request.path_params["session_id"])
        body = await self._body(request, QuotasBody)
        live = await self._sessions.get(session_id)
        logger.info("quotas set by the person in session %s", live.id)
        return _json(await set_quotas(live.chat.schedule, body))

    async def events(self, request: Request) -> Response:
        if self._sessions.closing:
            raise ServerStopping
        live = await self._live(request)
        start = _position(request.query_params.get("from"), "from", 0)
        last = request.headers.get("last-event-id")
        if last:
            start = max(start, _position(last, "Last-Event-ID", 0) + 1)
        if not self._streams.take():
            raise HttpProblem(
                503,
                f"{self._streams.limit} pages are open on this server, the most it serves at "
                "once; close one, and this page reconnects by itself.",
                {"retry-after": str(STREAM_RETRY_SECONDS)},
            )
        return _CountedStream(
            self._stream(live, start),
            slots=self._streams,
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    async def opening(self, request: Request) -> Response:
        # Answered at once, from memory: the open it reports on may be holding the sessions' lock.
        session_id = _session_id(request.path_params["session_id"])
        return _json(
            {
                "live": self._sessions.is_live(session_id),
                "handover": self._sessions.handover_line(session_id),
            }
        )

    async def _stream(self, live: LiveSession, start: int) -> AsyncIterator[bytes]:
        try:
            async for chunk in event_stream(live, start, heartbeat_seconds=self._heartbeat):
                yield chunk
        finally:
            self._sessions.touch(live)  # its idle time starts when the last page leaves

    def _limit_new_sessions(self) -> None:
        wait = self._new_sessions.take()
        if wait is not None:
            seconds = str(math.ceil(wait))
            raise HttpProblem(
                429,
                f"sessions are being created or forked too fast; wait {seconds} seconds.",
                {"retry-after": seconds},
            )

    async def _body(self, request: Request, shape: type[T], *, empty: T | None = None) -> T:
        return await read_json(request, shape, empty=empty, timeout=self._body_seconds)

    async def _live(self, request: Request) -> LiveSession:
        session_id = _session_id(request.path_params["session_id"])
        return await self._sessions.get(session_id)

    def _summary(self, header: SessionHeader) -> SessionSummary:
        return SessionSummary(
            id=header.id,
            created_at=header.created_at,
            parent_id=header.parent_id,
            seed_length=header.seed_length,
            live=self._sessions.is_live(header.id),
        )

    def _detail(self, live: LiveSession) -> SessionDetail:
        # Read together, with no await between: ``next`` follows the page's last turn.
        end = live.end
        page = live.page(end)
        return SessionDetail(
            session=self._summary(live.header), turns=page.turns, before=page.before, next=end
        )


@final
class HistoryPage(msgspec.Struct, frozen=True, kw_only=True):
    """``GET /api/sessions/{id}/history``: the occurrences, oldest first, and the away count."""

    occurrences: list[HistoryRow]
    away: Away


def _json(value: object, status: int = 200) -> Response:
    return Response(msgspec.json.encode(value), status_code=status, media_type="application/json")


def _session_id(text: str) -> SessionId:
    """The session id ``text`` names; 404 when it is not of the id form (the message repeats
    only the first characters of ``text``: see :func:`~session_schedule.web.problems.shorten`)."""
    session_id = parse_session_id(text)
    if session_id is None:
        raise HttpProblem(404, _sentence(not_a_session_id(shorten(text)).message))
    return session_id


@overload
def _position(text: str | None, name: str, default: int) -> int: ...


@overload
def _position(text: str | None, name: str, default: None) -> int | None: ...


def _position(text: str | None, name: str, default: int | None) -> int | None:
    if text is None:
        return default
    # ASCII digits only: str.isdigit also takes superscripts, which int() refuses, and other
    # scripts' digits, which it reads.
    if not (text.isascii() and text.isdigit()) or len(text) > 12:
        raise HttpProblem(400, f"{name} must be a non-negative integer, not {shorten(text)!r}.")
    return int(text)


def _limit(text: str | None) -> int:
    if text is None:
        return PAGE_TURNS
    if not (text.isascii() and text.isdigit()) or len(text) > 3 or not 1 <= int(text) <= PAGE_TURNS:
        raise HttpProblem(
            400, f"limit must be an integer from 1 to {PAGE_TURNS}, not {shorten(text)!r}."
        )
    return int(text)


def _until(text: str | None, now: Instant) -> Instant:
    """The end of a timeline window: the RFC 3339 instant ``text`` (400 unless after ``now``;
    one past year 9999 is the end of the range, as far as any reminder goes), or a day after
    ``now``."""
    if text is None:
        return Instant(min(now + TIMELINE_DEFAULT_MS, MAX_INSTANT))
    try:
        until = parse_rfc3339(text)  # possibly before year 0001: then in the past, refused below
    except ScheduleError as error:
        if error.code == "time_out_of_range":
            return MAX_INSTANT
        raise HttpProblem(
            400,
            "until must be an RFC 3339 instant with an offset, such as "
            f"'2026-12-01T09:00:00+09:00', not {shorten(text)!r}.",
        ) from None
    if until <= now:
        raise HttpProblem(400, f"until {shorten(text)!r} is not after now ({format_instant(now)}).")
    return Instant(until)


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith(".") else text + "."


def _refused(
    request: Request, status: int, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    path, text = loggable(shorten(request.url.path)), loggable(message)
    logger.warning("refused %s %s: %d %s", request.method, path, status, text)
    return problem_response(status, message, headers)


async def _problem(request: Request, error: Exception) -> Response:
    if not isinstance(error, HttpProblem):
        raise error
    return _refused(request, error.status, error.message, error.headers)


async def _http_exception(request: Request, error: Exception) -> Response:
    if not isinstance(error, HTTPException):
        raise error
    path = shorten(request.url.path)
    messages: Mapping[int, str] = {
        404: f"there is nothing at {path}; see the overlay's page for what exists.",
        405: f"{request.method} is not allowed on {path}.",
    }
    message = messages.get(error.status_code, _sentence(str(error.detail)).lower())
    return _refused(request, error.status_code, message)


async def _session_error(request: Request, error: Exception) -> Response:
    if not isinstance(error, SessionError):
        raise error
    # SessionCorrupt: the stored log conflicts with opening it (409), until someone repairs it;
    # the storage was left untouched for inspection.
    status = 409
    if isinstance(error, SessionNotFound):
        message = error.message
        if parse_session_id(error.session_id) is not None:
            # The store's message names the data directory, which is not the page's business.
            message = f"session {error.session_id} does not exist; check the session id"
        return _refused(request, 404, _sentence(message))
    if isinstance(error, SessionBusy):
        # Held elsewhere: a host hands it over within seconds, so the page tries again.
        headers = {"retry-after": str(BUSY_RETRY_SECONDS)}
        return _refused(request, 409, _sentence(error.message), headers)
    if isinstance(error, SessionExists):
        status = 409
    elif isinstance(error, PersistenceUncertain | SessionClosed):
        status = 503
    if not isinstance(error, SessionBusy | SessionExists):
        _log_storage_failure(request, error)
    return _refused(request, status, _sentence(error.message))


async def _schedule_error(request: Request, error: Exception) -> Response:
    if not isinstance(error, ScheduleError):
        raise error
    statuses = {"persistence_uncertain": 503, "corrupt_schedule_log": 409}
    status = statuses.get(error.code, 500)
    _log_storage_failure(request, error)
    return _refused(request, status, _sentence(f"{error.code}: {error.message}"))


async def _storage_error(request: Request, error: Exception) -> Response:
    if not isinstance(error, OSError):
        raise error
    _log_storage_failure(request, error)
    reason = error.strerror or type(error).__name__
    return _refused(
        request, 503, f"the server's storage failed ({reason}); try again once it is repaired."
    )


def _log_storage_failure(request: Request, error: Exception) -> None:
    """A failure of the storage, logged with its cause (the chain of exceptions behind it)."""
    logger.error(
        "storage failure on %s %s: %s",
        request.method,
        loggable(shorten(request.url.path)),
        loggable(str(error)),
        exc_info=error,
    )


async def _too_many_live(request: Request, error: Exception) -> Response:
    if not isinstance(error, TooManyLiveSessions):
        raise error
    message = (
        f"{error.max_live} sessions are live in this server, each with active reminders, a turn "
        "under way or an open page; close a page of another session or try again later."
    )
    return _refused(request, 503, message, {"retry-after": str(SWEEP_SECONDS)})


async def _sweep(sessions: LiveSessions, every: float) -> None:
    """Close idle live Sessions, every ``every`` seconds, until cancelled."""
    while True:
        await asyncio.sleep(every)
        try:
            await sessions.sweep()
        except Exception:
            logger.exception("closing idle sessions failed")


async def _stopping(request: Request, error: Exception) -> Response:
    if not isinstance(error, ServerStopping):
        raise error
    return _refused(request, 503, "the server is stopping; reconnect once it is back.")
