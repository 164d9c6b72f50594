"""A Session's ``message`` entries as the chat messages a model reads, and the rule that keeps
them readable: every tool call is answered.

Rule — **a tool call and its results are never parted.** An assistant turn with tool calls must
be followed by one ``tool`` turn per call (any order; other entry types, such as the schedule
changes a call appends, may sit between them) before any other message. A transcript that breaks
this is refused by every strict model endpoint, on every later turn. So :func:`transcript_problem`
names the first break (``check`` reports it), and :func:`check_fork_cut` refuses a fork whose
cut would leave calls unanswered, naming the nearest points where it may cut.

The same rule bounds a model request: :func:`bounded_context` leaves earlier messages out only
in whole units, an assistant turn with tool calls together with their results.

A reminder turn is one the harness recorded with origin ``followup``. A prompt the person typed
(origin ``person``) that looks like a reminder frame — pasted, or forged — reaches the model with
:data:`PASTED_FRAME_MARK` in front of it, so it cannot pass for a delivery.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from operator import attrgetter
from typing import Final, NamedTuple, final

import msgspec

from session_schedule.core.framing import FRAME_TITLE
from session_schedule.core.instants import Instant
from session_schedule.core.visible import reveal
from session_schedule.harness.model import ChatMessage
from session_schedule.session.message import MESSAGE_ENTRY_TYPE, MessageEntry, tool_message
from session_schedule.session.port import LogEntry

PASTED_FRAME_MARK: Final = "[typed by the user, not a reminder delivery] "
INTERRUPTED_RESULT: Final = (
    "this call was interrupted: the program stopped before it returned, so whether it took "
    "effect is unknown; check with schedule_list"
)


def messages_of(entries: Iterable[LogEntry]) -> list[MessageEntry]:
    """The transcript turns among ``entries``, in order (a fork's inherited turns included)."""
    return [
        entry.payload
        for entry in entries
        if entry.type == MESSAGE_ENTRY_TYPE and isinstance(entry.payload, MessageEntry)
    ]


def chat_messages(turns: Iterable[MessageEntry]) -> list[ChatMessage]:
    """The turns in the OpenAI Chat Completions message format.

    Model APIs require every tool call to be answered by its result right after it. A call whose
    result never reached the log (the process stopped in the middle of the call) is answered with
    :data:`INTERRUPTED_RESULT`, in the model's context only, so a resumed conversation stays
    valid.
    """
    messages: list[ChatMessage] = []
    unanswered: list[str] = []
    for turn in turns:
        if turn.role != "tool" and unanswered:
            messages.extend(_interrupted(unanswered))
            unanswered = []
        if turn.role == "assistant":
            message: ChatMessage = {"role": "assistant", "content": turn.content or None}
            if not isinstance(turn.tool_calls, msgspec.UnsetType) and turn.tool_calls:
                message["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in turn.tool_calls
                ]
                unanswered = [call.id for call in turn.tool_calls]
            messages.append(message)
        elif turn.role == "tool":
            if turn.tool_call_id in unanswered:
                unanswered.remove(str(turn.tool_call_id))
            messages.append(
                {"role": "tool", "tool_call_id": turn.tool_call_id, "content": turn.content}
            )
        elif turn.origin == "person" and FRAME_TITLE in turn.content:
            messages.append({"role": "user", "content": PASTED_FRAME_MARK + turn.content})
        else:
            messages.append({"role": "user", "content": turn.content})
    messages.extend(_interrupted(unanswered))
    return messages


def _interrupted(call_ids: list[str]) -> list[ChatMessage]:
    return [
        {"role": "tool", "tool_call_id": call_id, "content": INTERRUPTED_RESULT}
        for call_id in call_ids
    ]


class TranscriptProblem(NamedTuple):
    """Where a transcript stops being one a strict endpoint accepts, and why."""

    position: int
    """The entry at which the break is seen."""
    message: str
    """One sentence naming the entries involved."""


@final
class ForkCutError(ValueError):
    """A fork's cut would part a tool call from its results."""


_type_of: Final = attrgetter("type")


class _Scan(NamedTuple):
    valid: list[bool]
    """``valid[n]``: whether the first ``n`` entries leave no tool call unanswered."""
    openers: list[int]
    """``openers[n]``: the entry whose calls are open after the first ``n`` (or -1)."""
    calls: dict[int, tuple[str, ...]]
    """The ids of the tool calls each assistant entry made."""
    problem: TranscriptProblem | None
    open_calls: tuple[str, ...]
    opened_at: int
    stray: TranscriptProblem | None
    """The first result that answers no open call."""
    interrupted: list[TranscriptProblem]
    """Each assistant turn whose calls another turn follows before all their results."""


def _scan(entries: Sequence[LogEntry], *, cuts: bool = True) -> _Scan:
    """Without ``cuts``, ``valid`` and ``openers`` are left empty and only the messages are
    read: the rest is the same."""
    valid = [True]
    openers = [-1]
    calls: dict[int, tuple[str, ...]] = {}
    open_calls: dict[str, None] = {}
    opened_at = -1
    problem: TranscriptProblem | None = None
    stray: TranscriptProblem | None = None
    interrupted: list[TranscriptProblem] = []
    numbered: Iterable[tuple[int, LogEntry]] = enumerate(entries)
    if not cuts:
        valid, openers = [], []
        messages = map(MESSAGE_ENTRY_TYPE.__eq__, map(_type_of, entries))
        numbered = itertools.compress(numbered, messages)
    for position, entry in numbered:
        turn = entry.payload
        if entry.type == MESSAGE_ENTRY_TYPE and isinstance(turn, MessageEntry):
            if turn.role == "tool":
                call_id = turn.tool_call_id
                if isinstance(call_id, str) and call_id in open_calls:
                    del open_calls[call_id]
                elif stray is None:
                    stray = TranscriptProblem(
                        position,
                        f"entry {position} is the result of tool call {_ids([str(call_id)])}, "
                        "which no assistant turn before it left unanswered",
                    )
                    problem = problem or stray
            else:
                if open_calls:
                    interrupted.append(
                        TranscriptProblem(
                            opened_at,
                            f"entry {opened_at} makes tool call {_ids(open_calls)} and entry "
                            f"{position} follows before its result",
                        )
                    )
                    problem = problem or interrupted[-1]
                open_calls = {}
                if not isinstance(turn.tool_calls, msgspec.UnsetType) and turn.tool_calls:
                    calls[position] = tuple(call.id for call in turn.tool_calls)
                    open_calls = dict.fromkeys(calls[position])
                    opened_at = position
        if cuts:
            valid.append(not open_calls)
            openers.append(opened_at if open_calls else -1)
    return _Scan(valid, openers, calls, problem, tuple(open_calls), opened_at, stray, interrupted)


def transcript_problem(entries: Sequence[LogEntry]) -> TranscriptProblem | None:
    """The first place where a tool call goes unanswered (or a result answers no call), or
    ``None`` when every strict endpoint accepts the transcript."""
    scan = _scan(entries)
    if scan.problem is not None:
        return scan.problem
    if scan.open_calls:
        return TranscriptProblem(
            scan.opened_at,
            f"entry {scan.opened_at} makes tool call {_ids(scan.open_calls)} and the log ends "
            "before its result",
        )
    return None


@final
class TranscriptCheck(NamedTuple):
    """What ``check`` reports of a transcript: damage, and calls a stop cut short."""

    stray: TranscriptProblem | None
    """The first tool result that answers no call: no process writes one, so it is damage."""
    interrupted: tuple[TranscriptProblem, ...]
    """Each tool call left without its result — a process stopped or killed in the middle of
    the call, a routine event: :func:`chat_messages` tells the model that the call was
    interrupted, and resuming the session records that (:func:`interruption_results`)."""


def transcript_check(entries: Sequence[LogEntry]) -> TranscriptCheck:
    """The stray results and the interrupted calls of a transcript."""
    scan = _scan(entries, cuts=False)
    interrupted = list(scan.interrupted)
    if scan.open_calls:
        interrupted.append(
            TranscriptProblem(
                scan.opened_at,
                f"entry {scan.opened_at} makes tool call {_ids(scan.open_calls)} and the log "
                "ends before its result",
            )
        )
    return TranscriptCheck(scan.stray, tuple(interrupted))


def interruption_results(entries: Sequence[LogEntry], *, at: Instant) -> list[MessageEntry]:
    """The ``tool`` turns that answer the calls the log ends with, unanswered, with
    :data:`INTERRUPTED_RESULT` (at ``at``): what a harness appends when it resumes a session
    whose last run stopped in the middle of a tool call, so that the log itself records the
    interruption. Reads the entries from the end back to the last turn that is not a result.
    """
    answered: set[str] = set()
    step = FIRST_STEP
    end = len(entries)
    while True:
        begin = max(0, end - step)
        for entry in reversed(entries[begin:end]):
            turn = entry.payload
            if entry.type != MESSAGE_ENTRY_TYPE or not isinstance(turn, MessageEntry):
                continue
            if turn.role == "tool":
                answered.add(str(turn.tool_call_id))
                continue
            if turn.role != "assistant" or isinstance(turn.tool_calls, msgspec.UnsetType):
                return []
            return [
                tool_message(INTERRUPTED_RESULT, at=at, tool_call_id=call.id)
                for call in turn.tool_calls
                if call.id not in answered
            ]
        if begin == 0:
            return []
        end = begin
        step *= 2


def cut_points(entries: Sequence[LogEntry]) -> list[int]:
    """Every ``n`` for which the first ``n`` entries leave no tool call unanswered."""
    return [count for count, ok in enumerate(_scan(entries).valid) if ok]


def check_fork_cut(parent_id: str, entries: Sequence[LogEntry], at: int | None) -> None:
    """Raise :class:`ForkCutError` when forking ``parent_id`` with its first ``at`` entries
    (all when ``None``) would leave a tool call without its results. An ``at`` beyond the
    entries is left to the store to refuse."""
    count = len(entries) if at is None else at
    if count > len(entries):
        return
    scan = _scan(entries)
    if scan.valid[count]:
        return
    below = max(n for n in range(count + 1) if scan.valid[n])
    above = [n for n in range(count, len(entries) + 1) if scan.valid[n]]
    choices = f"entry {below}" if not above else f"entry {below} or {above[0]}"
    opened = scan.openers[count]
    raise ForkCutError(
        f"cannot fork session {parent_id} at entry {count}: it would part the tool call "
        f"{_ids(scan.calls[opened])} of entry {opened} from its results; fork at "
        f"{choices} instead"
    )


def _ids(ids: Iterable[str]) -> str:
    return ", ".join(reveal(call_id) for call_id in ids)


DEFAULT_MAX_CONTEXT_CHARS: Final = 60_000
"""The default budget of one model request's messages, in characters of their JSON text."""
OMITTED_NOTE: Final = (
    "[earlier messages of this conversation are omitted here to keep the request short; "
    "use schedule_list to see the reminders that are set]"
)
FIRST_STEP: Final = 16
"""How many entries :func:`recent_context` and :func:`recent_turns` read first, from the end
(each further step reads twice as many)."""


def bounded_context(
    system: ChatMessage, messages: Sequence[ChatMessage], max_chars: int
) -> list[ChatMessage]:
    """The request for ``messages`` (from :func:`chat_messages`) under ``system``, within about
    ``max_chars`` characters of JSON text.

    Always kept: the system message and the turn being answered — the last run of user messages
    and everything after them (that turn's tool rounds). Then as many earlier messages as fit,
    newest first, in whole units: an assistant turn with tool calls goes with its results or not
    at all. When anything is left out, a user message at the cut (:data:`OMITTED_NOTE`) says
    that earlier messages were omitted.

    A turn that alone exceeds the budget — a model that called tools round after round, each
    result large — keeps every message, but the results of its older tool calls are summarised
    by reference (:func:`summarised_result`: which call, how long its result was, that it is in
    the log), oldest first, until the request fits; the newest result is always sent whole. So
    a request exceeds ``max_chars`` by at most that one result (and by what the system message,
    the turn's own prompts and the model's own calls need, which are always sent).
    """
    return _request(system, messages, _kept(system, messages, max_chars, complete=True), max_chars)


def recent_context(
    system: ChatMessage,
    entries: Sequence[LogEntry],
    max_chars: int,
    *,
    first_step: int = FIRST_STEP,
) -> list[ChatMessage]:
    """``bounded_context(system, chat_messages(messages_of(entries)), max_chars)``, reading only
    the end of ``entries`` that the request uses.

    ``entries[n-k:n]`` is read for ``k = first_step``, then twice as many, and so on, until the
    entries read decide the request or entry 0 is reached. Their messages are the end of the
    whole transcript's, from their first turn that is not a tool result on: a call left
    unanswered is completed by :func:`chat_messages` right before the next turn that is not a
    result, in the unit of that call, and a result at the very start of the step answers a call
    made before it (it belongs to the unit before). So the cut they give is the whole
    transcript's as soon as the turn being answered, and the newest earlier unit that does not
    fit the budget, start after their first message (and are therefore not the transcript's
    first): nothing before that unit can be sent, whatever it is.

    Only ``len`` and slices of ``entries`` are used.
    """
    if first_step < 1:
        raise ValueError(f"first_step must be positive, not {first_step}")
    end = len(entries)
    step = first_step
    while True:
        begin = max(0, end - step)
        complete = begin == 0
        messages = chat_messages(messages_of(entries[begin:end]))
        try:
            kept = _kept(system, messages, max_chars, complete=complete)
        except _Undecided:
            step *= 2
            continue
        return _request(system, messages, kept, max_chars)


def recent_turns(
    entries: Sequence[LogEntry],
    count: int,
    *,
    end: int | None = None,
    max_entries: int | None = None,
) -> tuple[int, list[LogEntry]]:
    """The last ``count`` transcript turns among the first ``end`` entries (all when ``None``),
    as their entries, and how many entries before the first of them may hold earlier turns
    (0: none do).

    Read backwards from ``end``, :data:`FIRST_STEP` entries first and twice as many each
    further step, only until ``count`` turns are found — or ``max_entries`` entries are read
    and hold a turn (else twice as many, and so on): fewer turns are returned then, and the
    entries before those read may hold earlier ones. Only ``len`` and slices of ``entries``
    are used.
    """
    if count < 1:
        raise ValueError(f"count must be positive, not {count}")
    if max_entries is not None and max_entries < 1:
        raise ValueError(f"max_entries must be positive, not {max_entries}")
    end = len(entries) if end is None else min(max(end, 0), len(entries))
    floor = 0 if max_entries is None else max(0, end - max_entries)
    step = FIRST_STEP
    while True:
        begin = max(floor, end - step)
        found = [
            entry
            for entry in entries[begin:end]
            if entry.type == MESSAGE_ENTRY_TYPE and isinstance(entry.payload, MessageEntry)
        ]
        if len(found) > count or (len(found) == count and begin > 0):
            return found[-count].position, found[-count:]
        if begin == floor and (found or floor == 0):
            return begin, found
        if begin == floor:
            floor = max(0, end - 2 * (end - floor))
        step *= 2


class _Undecided(Exception):  # noqa: N818 - a state, not an error
    """The cut depends on messages before those at hand."""


def _kept(
    system: ChatMessage, messages: Sequence[ChatMessage], max_chars: int, *, complete: bool
) -> int:
    """How many leading ``messages`` the request leaves out. Raises :class:`_Undecided` when
    that depends on messages before them (``complete``: there are none)."""
    users = [index for index, message in enumerate(messages) if message.get("role") == "user"]
    if not users and not complete:
        raise _Undecided
    start = users[-1] if users else len(messages)  # no user message: no turn is singled out
    while start > 0 and messages[start - 1].get("role") == "user":
        start -= 1
    if start == 0 and not complete:
        raise _Undecided
    used = _size(system) + sum(_size(message) for message in messages[start:])
    kept = start
    for unit_start, unit_end in reversed(_units(messages[:start])):
        if unit_start == 0 and not complete:
            raise _Undecided
        cost = sum(_size(message) for message in messages[unit_start:unit_end])
        if used + cost + (_NOTE_SIZE if unit_start > 0 else 0) > max_chars:
            break
        used += cost
        kept = unit_start
    return kept


def _request(
    system: ChatMessage, messages: Sequence[ChatMessage], kept: int, max_chars: int
) -> list[ChatMessage]:
    request = [system]
    if kept > 0:
        request.append({"role": "user", "content": OMITTED_NOTE})
    request.extend(messages[kept:])
    sizes = [_size(message) for message in request]
    excess = sum(sizes) - max_chars
    if excess <= 0:
        return request
    # The turn being answered alone is over the budget: summarise its older tool results.
    results = [index for index, message in enumerate(request) if message.get("role") == "tool"]
    names = _call_names(request)
    for index in results[:-1]:
        if excess <= 0:
            break
        message = request[index]
        call_id = str(message.get("tool_call_id"))
        summary: ChatMessage = {
            "role": "tool",
            "tool_call_id": call_id,
            "content": summarised_result(names.get(call_id, "tool"), len(_content(message))),
        }
        saved = sizes[index] - _size(summary)
        if saved > 0:
            request[index] = summary
            excess -= saved
    return request


def summarised_result(tool: str, chars: int) -> str:
    """What stands for an older tool result of the turn being answered when the turn is over
    the request budget: which tool, how long its result was, and what to do for it."""
    return (
        f"[the result of this {tool} call ({chars} characters) is left out to keep the request "
        f"short; it is in the conversation's log, and calling {tool} again returns it anew]"
    )


def _call_names(messages: Sequence[ChatMessage]) -> dict[str, str]:
    """The tool name of every call the assistant messages make, by call id."""
    names: dict[str, str] = {}
    for message in messages:
        calls = message.get("tool_calls")
        if not isinstance(calls, list):
            continue
        for call in calls:
            if isinstance(call, dict):
                function = call.get("function")
                if isinstance(function, dict):
                    names[str(call.get("id"))] = str(function.get("name"))
    return names


def _content(message: ChatMessage) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else msgspec.json.encode(content).decode()


def _units(messages: Sequence[ChatMessage]) -> list[tuple[int, int]]:
    """``messages`` split where a cut keeps every tool call with its results."""
    units: list[tuple[int, int]] = []
    for index, message in enumerate(messages):
        if message.get("role") == "tool" and units:
            units[-1] = (units[-1][0], index + 1)
        else:
            units.append((index, index + 1))
    return units


def _size(message: ChatMessage) -> int:
    return len(msgspec.json.encode(message).decode())


_NOTE_SIZE: Final = _size({"role": "user", "content": OMITTED_NOTE})
