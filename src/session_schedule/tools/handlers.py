"""The one entry point a harness calls for the model's tool calls: :meth:`ScheduleTools.call`.

It never raises for anything a model can cause. An unknown tool, arguments that are not a JSON
object, text that is not UTF-8, nesting deeper than any argument needs, lone surrogates, wrong
types, bad values: each comes back as ``{"ok": false, "error": {...}}`` with a stable code, and
every result encodes as JSON (text a model sent that cannot be encoded is echoed escaped). Only a
bug becomes ``internal_error`` — and is logged with its traceback.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Final, TypeVar, final

import msgspec

from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import format_instant
from session_schedule.core.visible import escape_unencodable, frame_escape
from session_schedule.runtime.live import LiveSchedule, ScheduleClosedError
from session_schedule.tools.adapters import (
    OpenAIShape,
    anthropic_tools,
    mcp_tools,
    openai_tools,
)
from session_schedule.tools.catalog import TOOL_NAMES, ToolDefinition, tool_definitions
from session_schedule.tools.paging import Key, list_arguments, page, schedule_key
from session_schedule.tools.results import (
    CreateResult,
    DeleteResult,
    ErrorDetail,
    ErrorResult,
    ListResult,
    ToolResult,
    UpdateResult,
)
from session_schedule.tools.written import refuse_constant

logger = logging.getLogger(__name__)
_Result = TypeVar("_Result")

MAX_ARGUMENT_DEPTH: Final = 8
"""Deepest nesting of arrays and objects accepted in arguments (the deepest legitimate one is 2)."""

_INTERNAL_ERROR = (
    "the schedule tool failed unexpectedly; tell the user that reminders may not be working "
    "and do not retry this call now."
)
_CLOSED = (
    "this session is closed, so its reminders cannot be managed here; tell the user that the "
    "session must be opened again."
)


@final
class ToolText(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call's result as the JSON text a model reads (:meth:`ScheduleTools.call_text`)."""

    text: str
    failed: bool
    """Whether the result is an error, ``{"ok": false, "error": {...}}``: the call was refused
    (or failed) and changed nothing."""


@final
class ScheduleTools:
    """The Schedule tools of one live Session, ready for a model's tool calls."""

    def __init__(self, schedule: LiveSchedule, *, also_offered: tuple[str, ...] = ()) -> None:
        """``also_offered``: the names of the other tools the host offers next to these (the
        MCP server's ``schedule_followups_take``), listed with them when a call names a tool
        that is none of them."""
        self._schedule = schedule
        self._described: tuple[ToolDefinition, ...] | None = None
        self._offered = ", ".join((*TOOL_NAMES, *also_offered))

    @property
    def definitions(self) -> tuple[ToolDefinition, ...]:
        """The four tools, described for the Schedule's limits (made when first asked for: a
        host's agent that never sends them to a model does not pay for them)."""
        if self._described is None:
            self._described = tool_definitions(self._schedule.settings.limits)
        return self._described

    def openai(self, *, shape: OpenAIShape = "chat") -> list[dict[str, object]]:
        """The tools as OpenAI strict function tools (``shape``: ``chat`` or ``responses``)."""
        return openai_tools(self.definitions, shape=shape)

    def anthropic(self, *, strict: bool = False) -> list[dict[str, object]]:
        """The tools for the Anthropic Messages API (``strict``: with ``strict: true``)."""
        return anthropic_tools(self.definitions, strict=strict)

    def mcp(self) -> list[dict[str, object]]:
        return mcp_tools(self.definitions)

    async def call(self, name: str, arguments: object = None) -> dict[str, object]:
        """Run tool ``name`` with ``arguments`` — a mapping, a JSON text (``str`` or ``bytes``),
        or ``None`` for none — and return the JSON-ready result object.

        A ``schedule_list`` result holds each reminder as a read-only ``dict`` shared with later
        results (:class:`~session_schedule.core.plain.ReadOnlyDict`: it compares and serialises
        as a plain ``dict``; copy it to change it), so that listing many reminders builds none.
        A ``name`` that is not a string (a fuzzer's ``None``, a number, bytes) is answered
        ``invalid_selector`` like an unknown tool.
        """
        if name == "schedule_create":
            created = await self._guarded(name, arguments, self._create_plain)
            if isinstance(created, dict):
                return created
            result: ToolResult = created
        elif name == "schedule_update":
            updated = await self._guarded(name, arguments, self._update_plain)
            if isinstance(updated, dict):
                return updated
            result = updated
        elif name == "schedule_list":
            listed = await self._guarded(name, arguments, self._list_plain)
            if isinstance(listed, dict):
                return listed
            result = listed
        else:
            result = await self._guarded(name, arguments, self._dispatch)
        return msgspec.to_builtins(result)  # type: ignore[no-any-return]

    async def call_json(self, name: str, arguments: object = None) -> str:
        """:meth:`call`, with the result as JSON text (for APIs that want text content).

        Hidden characters in it (a prompt's tag characters or bidi controls, say) are written as
        JSON escapes (:func:`~session_schedule.core.visible.frame_escape`), as the follow-up
        frame writes them: the text decodes to the same result, and the model reads every
        character a person would not see.

        Never raises: every result a model can cause encodes; one that does not is a bug,
        logged and answered as ``internal_error``.
        """
        return (await self.call_text(name, arguments)).text

    async def call_text(self, name: str, arguments: object = None) -> ToolText:
        """:meth:`call_json`, and whether the result is an error (``{"ok": false, ...}``), for
        APIs that flag a failed tool call beside its text (Anthropic's ``is_error``, LangChain's
        ``status="error"``, MCP's ``isError``). Never raises."""
        result = await self.call_typed(name, arguments)
        try:
            text = frame_escape(msgspec.json.encode(result).decode())
        except (UnicodeEncodeError, msgspec.EncodeError):
            logger.exception("schedule tool %r returned a result that does not encode", name)
            failure = _failure(ScheduleError("internal_error", _INTERNAL_ERROR))
            return ToolText(text=msgspec.json.encode(failure).decode(), failed=True)
        return ToolText(text=text, failed=isinstance(result, ErrorResult))

    async def call_typed(self, name: str, arguments: object = None) -> ToolResult:
        """:meth:`call`, with the result as a typed value."""
        return await self._guarded(name, arguments, self._dispatch)

    async def _guarded(
        self,
        name: str,
        arguments: object,
        run: Callable[[str, Mapping[str, object]], Awaitable[_Result]],
    ) -> _Result | ErrorResult:
        """``run(name, arguments)``, with every failure turned into its result."""
        try:
            return await run(_tool_name(name, self._offered), _arguments(arguments, name))
        except ScheduleError as error:
            return self._refuse(name, arguments, error)
        except ScheduleClosedError as closed:
            # Not a bug of the tool: the host kept offering it after closing the schedule.
            logger.warning(
                "schedule tool %r called after session %s was closed; it must be opened again",
                name,
                closed.session_id,
            )
            return self._refuse(name, arguments, ScheduleError("internal_error", _CLOSED))
        except Exception:
            logger.exception("schedule tool %r failed", name)
            return self._refuse(name, arguments, ScheduleError("internal_error", _INTERNAL_ERROR))

    def _refuse(self, name: str, arguments: object, error: ScheduleError) -> ErrorResult:
        """The failure result, reported as a ``refusal`` event first."""
        try:
            schedule_id = _arguments(arguments, name).get("id")
        except ScheduleError:
            schedule_id = None  # arguments that are not an object name no reminder
        shown_id = escape_unencodable(schedule_id) if isinstance(schedule_id, str) else None
        try:
            self._schedule.events.refused(
                self._schedule.now(),
                tool=escape_unencodable(name) if isinstance(name, str) else f"<{_kind(name)}>",
                code=error.code,
                message=escape_unencodable(error.message),
                schedule_id=shown_id,
            )
        except Exception:
            # Observing never breaks the answer (a clock read past year 9999, say).
            logger.exception("the refusal of schedule tool %r could not be traced", name)
        return _failure(error)

    async def _dispatch(self, name: str, arguments: Mapping[str, object]) -> ToolResult:
        if name == "schedule_create":
            return CreateResult(ok=True, schedule=await self._schedule.create(arguments))
        if name == "schedule_list":
            after, limit = list_arguments(arguments)
            now, views = await self._schedule.active()
            chosen, cursor = page(
                views,
                after=after,
                limit=limit,
                key=lambda view: schedule_key(view.scheduled_at, view.id),
                size=lambda view: len(_encoder.encode(view)),
            )
            return ListResult(
                ok=True,
                now=format_instant(now),
                schedules=chosen,
                next_cursor=cursor,
                total=len(views),
            )
        if name == "schedule_delete":
            schedule_id, deleted = await self._schedule.delete(arguments)
            return DeleteResult(ok=True, id=schedule_id, deleted=deleted)
        if name == "schedule_update":
            return UpdateResult(ok=True, schedule=await self._schedule.update(arguments))
        raise ScheduleError(
            "invalid_selector",
            f"there is no tool {name!r}; the schedule tools are {self._offered}.",
        )

    async def _create_plain(self, _name: str, arguments: Mapping[str, object]) -> dict[str, object]:
        """``schedule_create``'s result, JSON-ready: the view converted before the barrier."""
        return {"ok": True, "schedule": await self._schedule.create_plain(arguments)}

    async def _update_plain(self, _name: str, arguments: Mapping[str, object]) -> dict[str, object]:
        """``schedule_update``'s result, JSON-ready: the view converted before the barrier."""
        return {"ok": True, "schedule": await self._schedule.update_plain(arguments)}

    async def _list_plain(self, _name: str, arguments: Mapping[str, object]) -> dict[str, object]:
        """``schedule_list``'s result, JSON-ready, from the reminders' ready-made plain views."""
        after, limit = list_arguments(arguments)
        now, views = await self._schedule.active_plain()
        chosen, cursor = page(
            views,
            after=after,
            limit=limit,
            key=_plain_key,
            size=lambda view: len(_encoder.encode(view)),
        )
        return {
            "ok": True,
            "now": format_instant(now),
            "schedules": chosen,
            "next_cursor": cursor,
            "total": len(views),
        }


def _tool_name(name: object, offered: str) -> str:
    """``name``, checked to be text: callers typed ``str`` can still pass anything at run time
    (``offered``: the names of the tools, for the message)."""
    if not isinstance(name, str):
        raise ScheduleError(
            "invalid_selector",
            f"the tool name must be a string, not {_kind(name)}; the schedule tools are {offered}.",
        )
    return name


def _plain_key(view: Mapping[str, object]) -> Key:
    return schedule_key(str(view["scheduledAt"]), str(view["id"]))


_encoder: Final = msgspec.json.Encoder()


_EXAMPLES: Final = {
    "schedule_create": '{"prompt": "...", "after_seconds": 600}',
    "schedule_list": '{"cursor": null, "limit": null}',
    "schedule_delete": '{"id": "sch_1"}',
    "schedule_update": '{"id": "sch_1", "paused": true}',
}
"""What each tool's arguments look like, for the messages about arguments that are no object."""


def _arguments(arguments: object, tool: object = "schedule_create") -> Mapping[str, object]:
    """The arguments of ``tool`` as a mapping; JSON text is decoded, empty text and ``None``
    mean none."""
    value = arguments
    example = _EXAMPLES.get(tool, _EXAMPLES["schedule_create"]) if isinstance(tool, str) else ""
    if isinstance(arguments, str | bytes | bytearray):
        if not arguments.strip():
            return {}
        value = _decode(arguments, example)
    if type(value) is dict and _flat_object(value):
        return value  # the common case, which every check below passes
    if value is None:
        return {}
    # Depth first: whether a deep array decodes at all (or hits the recursion limit, reported
    # the same way) differs between Python versions, and the message must not.
    if _too_deeply_nested(value):
        raise _too_deep(example)
    if not isinstance(value, Mapping):
        raise ScheduleError(
            "invalid_selector",
            f"the arguments must be a JSON object, not {_kind(value)}.",
        )
    for key in value:
        if not isinstance(key, str):
            raise ScheduleError(
                "invalid_selector",
                f"the arguments must be a JSON object, whose keys are strings, not "
                f"{_kind(key)}; send one such as {example}.",
            )
    return _plain_object(value)


def _plain_object(value: Mapping[str, object]) -> dict[str, object]:
    """``value`` with what JSON types it by subclass made of the type itself (see
    :func:`_plain`)."""
    return {str.__str__(key): _plain(item) for key, item in value.items()}


def _plain(value: object) -> object:
    """``value`` with what JSON types it by subclass made of the type itself: a ``str``,
    ``int`` or ``float`` subclass (``numpy.str_``, an ``IntEnum``), a mapping other than a
    ``dict``, a tuple. A subclass would otherwise reach the log's records, whose encoding
    refuses it — after a change of the same call was appended. Called on arguments no deeper
    than :data:`MAX_ARGUMENT_DEPTH`; anything else stays as it is, for the checks to name."""
    if type(value) in _SCALARS:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        if all(isinstance(key, str) for key in value):
            return _plain_object(value)
        return value
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


_SURROGATE_TEXT: Final = re.compile(r"[\ud800-\udfff]|\\u[dD][89a-fA-F]")
"""A lone surrogate, raw or as a JSON escape: the strict decoder refuses both."""


def _not_json(example: str) -> ScheduleError:
    return ScheduleError(
        "invalid_selector",
        f"the arguments are not valid JSON; send a JSON object such as {example}.",
    )


def _not_utf8(example: str) -> ScheduleError:
    return ScheduleError(
        "invalid_selector",
        f"the arguments are not valid UTF-8 text; send a JSON object such as {example}.",
    )


def _decode(text: str | bytes | bytearray, example: str) -> object:
    try:
        value = msgspec.json.decode(text)
    except UnicodeDecodeError:  # msgspec before 0.23 lets Python's error through
        raise _not_utf8(example) from None
    except RecursionError:
        raise _too_deep(example) from None
    except msgspec.ValidationError:
        raise ScheduleError(
            "invalid_selector",
            f"a number in the arguments is too large to represent; send numbers such as "
            f"{_EXAMPLES['schedule_create']}.",
        ) from None
    except (UnicodeEncodeError, msgspec.DecodeError):
        if not isinstance(text, str):
            raw = text
            try:
                # Valid UTF-8 may still hold a lone surrogate's escape, read leniently below.
                text = bytes(raw).decode()
            except UnicodeDecodeError:
                # msgspec 0.23 and later report invalid UTF-8 in a string as malformed JSON.
                raise (
                    _not_utf8(example) if _json_but_for_utf8(raw) else _not_json(example)
                ) from None
        if not _SURROGATE_TEXT.search(text):
            raise _not_json(example) from None
    else:
        if isinstance(value, dict) and _may_repeat_a_key(text, len(value)):
            _refuse_repeated_keys(text)
        return value
    # JSON text holding a lone surrogate (raw, or the escape a model wrote as "\ud83d"): read it
    # leniently so that the checks can say which value holds it (a prompt: invalid_prompt).
    try:
        return json.loads(text, parse_constant=refuse_constant, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise _too_deep(example) from None
    except ValueError:
        raise _not_json(example) from None


def _may_repeat_a_key(text: str | bytes | bytearray, keys: int) -> bool:
    """Whether the JSON text of an object with ``keys`` keys (at its top level) may hold a key
    twice: it does not when it has no more name separators than that, nothing being nested."""
    colons = text.count(":") if isinstance(text, str) else text.count(b":")
    return colons > keys


def _refuse_repeated_keys(text: str | bytes | bytearray) -> None:
    """Refuse JSON text that names a key twice in one object: a decoder keeps one of the two
    silently (RFC 8259 leaves it open), so what the model meant is unknown. The text has
    decoded already, so only a repeated key can fail here."""
    try:
        json.loads(text, object_pairs_hook=_unique_keys)
    except RecursionError:
        return  # nesting that deep is refused by the depth check that follows


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    found: dict[str, object] = {}
    for key, value in pairs:
        if key in found:
            raise ScheduleError(
                "invalid_selector",
                f"the arguments name {_show_key(key)} twice in one object; give each argument "
                "once.",
            )
        found[key] = value
    return found


def _show_key(key: str) -> str:
    shown = escape_unencodable(key)
    return f"`{shown}`" if len(shown) <= 40 else f"`{shown[:39]}…`"


def _json_but_for_utf8(data: bytes | bytearray) -> bool:
    """Whether ``data`` is JSON once its bytes that are not UTF-8 are replaced: then they are
    the one problem, and the message says so (as msgspec before 0.23 made it say)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        try:
            msgspec.json.decode(data.decode("utf-8", errors="replace"))
        except (msgspec.DecodeError, RecursionError):
            return False
        return True
    return False


_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def _flat_object(value: dict[object, object]) -> bool:
    """Whether ``value`` is an object of scalars under text keys: nothing nested."""
    for key, item in value.items():
        if type(key) is not str or type(item) not in _SCALARS:
            return False
    return True


def _too_deeply_nested(value: object) -> bool:
    """Whether arrays and objects nest more than :data:`MAX_ARGUMENT_DEPTH` levels in ``value``.

    Iterative, so that no nesting — however deep — can exhaust the interpreter's stack here.
    """
    if type(value) is dict and all(type(item) in _SCALARS for item in value.values()):
        return False  # the common case: a flat object (one level)
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, Mapping):
            children: list[object] = list(item.values())
        elif isinstance(item, list | tuple):
            children = list(item)
        else:
            continue
        if depth > MAX_ARGUMENT_DEPTH:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


def _too_deep(example: str) -> ScheduleError:
    return ScheduleError(
        "invalid_selector",
        f"the arguments nest arrays or objects more than {MAX_ARGUMENT_DEPTH} levels deep; send "
        f"a flat JSON object such as {example}.",
    )


def _failure(error: ScheduleError) -> ErrorResult:
    message = escape_unencodable(error.message)
    return ErrorResult(ok=False, error=ErrorDetail(code=error.code, message=message))


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if value is None:
        return "null"
    if isinstance(value, bytes | bytearray):
        return "bytes"
    return f"a {type(value).__name__}"
