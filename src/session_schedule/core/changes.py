"""The ``schedule/change`` event, versions 1 to 3 (SPEC §4, §10, §11, §12): wire shapes and the
strict codec.

Version 2 exists for one change only: the create of a ``daily`` record. A version-1 create holds
an ``after``, ``at`` or ``every`` record and a version-2 create a ``daily`` one; deletes and
dispatches are version 1 (a ``daily`` dispatch carries ``acceptedAt``, as an Every dispatch does).
Version 3 (SPEC §11) is the create of a record that carries ``ends`` or ``maxLatenessSeconds``,
the create of every ``calendar`` record (SPEC §12: its rule in canonical order, checked here),
and the five operations that manage a record in place: ``update`` (the id and the complete new
record), ``pause``, ``resume`` (with its decision time), ``snooze`` (with the snooze instant) and
``miss`` (a late occurrence recorded instead of delivered). Which version a create takes is
:func:`create_version`'s one decision, the place a further record kind joins.

The codec is the durable format's gatekeeper. :func:`decode_change` accepts exactly what a create,
delete or dispatch decision writes: the shapes below — no unknown versions, no extra or missing
fields, no coercion (only JSON integers are integers), only canonical instants and well-formed
ids — in their one canonical byte form (so no repeated key, see
:mod:`session_schedule.core.canonical`), with a prompt that passes the prompt rule of
:mod:`session_schedule.core.prompts` and is stored trimmed. :func:`encode_change` writes that
canonical byte form. The promise: decoding raises nothing but a
``corrupt_schedule_log`` :class:`ScheduleError`, whatever the bytes; anything else is a bug.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Final, Literal, TypeAlias, final

import msgspec

from session_schedule.core.calendar import canonical_rule, is_canonical_start_date
from session_schedule.core.canonical import NESTED_TOO_DEEPLY, why_not_canonical_json
from session_schedule.core.catalog import CATALOG
from session_schedule.core.errors import ScheduleError
from session_schedule.core.ids import SCHEDULE_ID, ScheduleId
from session_schedule.core.instants import (
    Instant,
    all_canonical,
    canonical_instant,
    format_instant,
    why_not_canonical,
)
from session_schedule.core.prompts import describe_fault, is_trimmed, prompt_fault
from session_schedule.core.records import (
    DAILY_TIME_PATTERN,
    WEEKDAYS,
    AfterScheduleRecord,
    AtScheduleRecord,
    CalendarScheduleRecord,
    DailyScheduleRecord,
    EveryScheduleRecord,
    RecordIdField,
    RecordInstantField,
    ScheduleRecord,
    is_managed,
    record_ends,
    record_kind,
)
from session_schedule.core.time_input import is_supported_zone

CHANGE_VERSION: Final = 1
DAILY_CREATE_VERSION: Final = 2
MANAGE_VERSION: Final = 3
CHANGE_VERSIONS: Final = (CHANGE_VERSION, DAILY_CREATE_VERSION, MANAGE_VERSION)
CHANGE_EVENT_TYPE: Final = "schedule/change"


class _Change(
    msgspec.Struct,
    frozen=True,
    forbid_unknown_fields=True,
    rename="camel",
    tag_field="operation",
    gc=False,
):
    pass


@final
class ScheduleCreateChange(_Change, tag="create", frozen=True):
    """A new active record, stored whole, with the version :func:`create_version` gives it."""

    version: Literal[1, 2, 3]
    schedule: ScheduleRecord


@final
class ScheduleDeleteChange(_Change, tag="delete", frozen=True):
    """The terminal removal of an active record."""

    version: Literal[1]
    id: RecordIdField


@final
class ScheduleDispatchChange(_Change, tag="dispatch", frozen=True):
    """A follow-up was synchronously queued for the record.

    A one-shot dispatch carries only the id and ends the record. An Every dispatch carries
    ``acceptedAt``, the wall-clock decision time that selected the latest due occurrence, and
    advances the record (or ends it when the next target would leave the representable range).
    """

    version: Literal[1]
    id: RecordIdField
    accepted_at: RecordInstantField | msgspec.UnsetType = msgspec.UNSET


@final
class ScheduleUpdateChange(_Change, tag="update", frozen=True):
    """An active record replaced whole, under the same id (SPEC §11): the record as the update
    decided it, so a replay never re-derives it. Its ``scheduledAt`` is the rule's next target,
    never a snooze instant."""

    version: Literal[3]
    id: RecordIdField
    schedule: ScheduleRecord


@final
class SchedulePauseChange(_Change, tag="pause", frozen=True):
    """An active record stops being due until resumed (it stays active and listed)."""

    version: Literal[3]
    id: RecordIdField


@final
class ScheduleResumeChange(_Change, tag="resume", frozen=True):
    """A paused record is due again; ``acceptedAt`` is the decision time of the resume."""

    version: Literal[3]
    id: RecordIdField
    accepted_at: RecordInstantField


@final
class ScheduleSnoozeChange(_Change, tag="snooze", frozen=True):
    """Only the record's next delivery moves, to ``until``."""

    version: Literal[3]
    id: RecordIdField
    until: RecordInstantField


@final
class ScheduleMissChange(_Change, tag="miss", frozen=True):
    """An occurrence decided too late (after ``maxLatenessSeconds``) is recorded, not delivered:
    ``scheduledAt`` names the occurrence, ``acceptedAt`` the decision time."""

    version: Literal[3]
    id: RecordIdField
    scheduled_at: RecordInstantField
    accepted_at: RecordInstantField


ScheduleChange: TypeAlias = (
    ScheduleCreateChange
    | ScheduleDeleteChange
    | ScheduleDispatchChange
    | ScheduleUpdateChange
    | SchedulePauseChange
    | ScheduleResumeChange
    | ScheduleSnoozeChange
    | ScheduleMissChange
)
SCHEDULE_CHANGE_ENTRY: Final = CATALOG.register(
    CHANGE_EVENT_TYPE,
    versions=CHANGE_VERSIONS,
    declaration=ScheduleChange,
    decode=lambda data, where: decode_change(data, where=where),
    decode_many=lambda payloads: decoded_changes(payloads),  # noqa: PLW0108 - defined below
)
CHANGE_CLASSES: Final = (
    ScheduleCreateChange,
    ScheduleDeleteChange,
    ScheduleDispatchChange,
    ScheduleUpdateChange,
    SchedulePauseChange,
    ScheduleResumeChange,
    ScheduleSnoozeChange,
    ScheduleMissChange,
)
"""The classes of :data:`ScheduleChange`, for ``isinstance`` (far cheaper than the union)."""
ManageChange: TypeAlias = (
    ScheduleUpdateChange
    | SchedulePauseChange
    | ScheduleResumeChange
    | ScheduleSnoozeChange
    | ScheduleMissChange
)
MANAGE_CLASSES: Final = CHANGE_CLASSES[3:]
"""The classes of the version-3 operations that manage a record in place (SPEC §11)."""


def operation_of(change: ScheduleChange) -> str:
    """The change's ``operation`` as written on the wire."""
    return str(type(change).__struct_config__.tag)


def create_version(record: ScheduleRecord) -> Literal[1, 2, 3]:
    """The one version a create of ``record`` is written with: 3 for a ``calendar`` record and
    for a record that carries a SPEC §11 field, 2 for a ``daily`` record, 1 otherwise."""
    if is_managed(record) or isinstance(record, CalendarScheduleRecord):
        return MANAGE_VERSION
    if isinstance(record, DailyScheduleRecord):
        return DAILY_CREATE_VERSION
    return CHANGE_VERSION


def create_change(record: ScheduleRecord) -> ScheduleCreateChange:
    return ScheduleCreateChange(version=create_version(record), schedule=record)


def update_change(record: ScheduleRecord) -> ScheduleUpdateChange:
    """Replace the active record of ``record.id`` by ``record``."""
    return ScheduleUpdateChange(version=MANAGE_VERSION, id=record.id, schedule=record)


def pause_change(schedule_id: ScheduleId) -> SchedulePauseChange:
    return SchedulePauseChange(version=MANAGE_VERSION, id=schedule_id)


def resume_change(schedule_id: ScheduleId, accepted_at: Instant) -> ScheduleResumeChange:
    return ScheduleResumeChange(
        version=MANAGE_VERSION, id=schedule_id, accepted_at=format_instant(accepted_at)
    )


def snooze_change(schedule_id: ScheduleId, until: Instant) -> ScheduleSnoozeChange:
    return ScheduleSnoozeChange(version=MANAGE_VERSION, id=schedule_id, until=format_instant(until))


def miss_change(
    schedule_id: ScheduleId, scheduled_at: Instant, accepted_at: Instant
) -> ScheduleMissChange:
    return ScheduleMissChange(
        version=MANAGE_VERSION,
        id=schedule_id,
        scheduled_at=format_instant(scheduled_at),
        accepted_at=format_instant(accepted_at),
    )


def delete_change(schedule_id: ScheduleId) -> ScheduleDeleteChange:
    return ScheduleDeleteChange(version=CHANGE_VERSION, id=schedule_id)


def dispatch_change(
    schedule_id: ScheduleId, accepted_at: Instant | None = None
) -> ScheduleDispatchChange:
    """A one-shot dispatch (no ``accepted_at``) or an Every dispatch decided at ``accepted_at``."""
    if accepted_at is None:
        return ScheduleDispatchChange(version=CHANGE_VERSION, id=schedule_id)
    return ScheduleDispatchChange(
        version=CHANGE_VERSION, id=schedule_id, accepted_at=format_instant(accepted_at)
    )


_ENCODER: Final = msgspec.json.Encoder()
_DAILY_TIME: Final = re.compile(DAILY_TIME_PATTERN.removeprefix("^").removesuffix("\\Z"))
_DECODER: Final[msgspec.json.Decoder[ScheduleChange]] = msgspec.json.Decoder(ScheduleChange)


def encode_change(change: ScheduleChange) -> bytes:
    """The canonical JSON bytes of ``change`` (same change, same bytes)."""
    return _ENCODER.encode(change)


def corrupt(where: str, problem: str) -> ScheduleError:
    """The ``corrupt_schedule_log`` error for ``problem`` found in the event ``where`` names."""
    subject = f"{CHANGE_EVENT_TYPE} {where}" if where else CHANGE_EVENT_TYPE
    return ScheduleError("corrupt_schedule_log", f"{subject} is corrupt: {problem}")


def decode_change(data: bytes | str, *, where: str = "") -> ScheduleChange:
    """Strictly decode one ``schedule/change`` payload.

    ``where`` names the event in error messages (for example ``"at entry 17"``). Raises
    ``ScheduleError("corrupt_schedule_log", ...)`` — and nothing else — on any deviation.

    The changes written most (a create of an ``at``, ``after`` or ``every`` record without a
    SPEC §11 field, a delete, a dispatch) are first checked at once: decoded, re-encoded and
    compared, then their few rules checked in one expression (:func:`_passes_at_once`). Any
    other payload, and one that does not pass cleanly, is decoded again and checked one rule at
    a time, which says what is wrong.
    """
    if isinstance(data, bytes):
        try:
            change = _DECODER.decode(data)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            pass
        else:
            if _passes_at_once(change, data) and _ENCODER.encode(change) == data:
                return change
    return _decode_change_slowly(data, where)


_AT_ONCE_RECORDS: Final = (AtScheduleRecord, AfterScheduleRecord, EveryScheduleRecord)


def _passes_at_once(change: ScheduleChange, data: bytes) -> bool:
    """Whether ``change``, strictly decoded from ``data``, keeps every rule
    :func:`_decode_change_slowly` checks but the canonical form — for a create of an ``at``,
    ``after`` or ``every`` record without a SPEC §11 field, a delete or a dispatch. ``False``
    for any other change, and at the first doubt (then it is checked one rule at a time)."""
    if isinstance(change, ScheduleCreateChange):
        record = change.schedule
        if (
            type(record) not in _AT_ONCE_RECORDS
            or change.version != CHANGE_VERSION
            or is_managed(record)
        ):
            return False
        prompt = record.prompt
        # As :func:`_check_record`'s shortcut: printable (or plain bytes) and trimmed.
        return (
            (record.id in _KNOWN_IDS or _remember(record.id))
            and canonical_instant(record.scheduled_at) is not None
            and (prompt.isprintable() or _is_plain(data))
            and prompt.strip() == prompt
        )
    if isinstance(change, ScheduleDeleteChange):
        return change.id in _KNOWN_IDS or _remember(change.id)
    if isinstance(change, ScheduleDispatchChange):
        accepted_at = change.accepted_at
        return (change.id in _KNOWN_IDS or _remember(change.id)) and (
            not isinstance(accepted_at, str) or canonical_instant(accepted_at) is not None
        )
    return False


def _decode_change_slowly(data: bytes | str, where: str) -> ScheduleChange:
    """:func:`decode_change` one rule at a time, raising the error for the first that fails."""
    try:
        change = _DECODER.decode(data)
    except msgspec.ValidationError as error:
        raise corrupt(where, _explain(str(error), lambda: msgspec.json.decode(data))) from None
    except msgspec.DecodeError as error:
        raise corrupt(where, f"malformed JSON ({error})") from None
    except UnicodeDecodeError as error:
        raise corrupt(where, f"invalid UTF-8 in a string ({error.reason})") from None
    except RecursionError:
        raise corrupt(where, NESTED_TOO_DEEPLY) from None
    _check_forms(change, where)
    raw = data if isinstance(data, bytes) else data.encode()
    if _ENCODER.encode(change) != raw:
        raise corrupt(where, why_not_canonical_json(raw))
    return _checked(change, where, plain=_is_plain(raw))


def decode_changes(
    payloads: Sequence[bytes], *, where: Callable[[int], str] | None = None
) -> list[ScheduleChange]:
    """Strictly decode many ``schedule/change`` payloads: the changes :func:`decode_change`
    returns for each, or the error it raises for the first bad one (``where(index)`` names the
    payload at ``index``)."""
    changes: list[ScheduleChange] = []
    for chunk in iter_changes(payloads, where=where):
        changes += chunk
    return changes


def iter_changes(
    payloads: Sequence[bytes], *, where: Callable[[int], str] | None = None
) -> Iterator[list[ScheduleChange]]:
    """:func:`decode_changes`, a chunk at a time: the changes of the payloads in order, in
    lists of up to :data:`DECODE_CHUNK`, each decoded once the one before was taken. A replay
    that folds each chunk as it comes never holds a long log's changes all at once.

    Each chunk is decoded, re-encoded and compared as one buffer, then its id, instant, prompt
    and version rules are checked by one pass over its changes: a long log pays little Python
    work per change. When any of that does not pass cleanly, each payload of the chunk is
    decoded on its own and the first error is raised exactly as :func:`decode_change` raises it.
    """
    if where is None:
        where = _nowhere
    for start in range(0, len(payloads), DECODE_CHUNK):
        chunk = payloads[start : start + DECODE_CHUNK]
        changes = decoded_changes(chunk)
        if changes is None:
            changes = [
                decode_change(payload, where=where(start + index))
                for index, payload in enumerate(chunk)
            ]
        yield changes


def decoded_changes(payloads: Sequence[bytes]) -> list[ScheduleChange] | None:
    """The changes :func:`decode_change` returns for each of ``payloads``, decoded and checked as
    one buffer (see :func:`iter_changes`), or ``None`` when any of that does not pass cleanly
    (then each payload is to be decoded on its own, which says what is wrong). Never raises for
    bad bytes: the persistence catalog's batch decoder of ``schedule/change``."""
    joined = b"\n".join(payloads)
    changes = _decode_joined(joined, len(payloads))
    if changes is None or not _forms_hold(changes, plain=_is_plain(joined)):
        return None
    return changes


DECODE_CHUNK: Final = 1024
"""How many payloads :func:`iter_changes` decodes and checks as one buffer: with payloads of a
hundred-odd bytes, a chunk stays in the processor's cache from the decode to the last check."""


def _nowhere(index: int) -> str:
    del index
    return ""


def _decode_joined(joined: bytes, count: int) -> list[ScheduleChange] | None:
    """The changes of ``count`` newline-separated payloads when they decode and are in their
    canonical form; ``None`` otherwise (then each is decoded on its own)."""
    try:
        changes = _DECODER.decode_lines(joined)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    if len(changes) != count or _ENCODER.encode_lines(changes) != joined + b"\n":
        return None
    return changes


def _is_plain(canonical: bytes) -> bool:
    """Whether canonical bytes hold only printable ASCII in their strings.

    In canonical bytes that are ASCII, a control character or a lone surrogate in a string can
    only appear escaped, and DEL is the one ASCII control character JSON leaves unescaped. A
    quote mark or backslash in a string is escaped too, so a string of plain bytes is printable
    ASCII whose only whitespace is the space.
    """
    return canonical.isascii() and b"\\" not in canonical and b"\x7f" not in canonical


def _forms_hold(changes: list[ScheduleChange], *, plain: bool) -> bool:
    """Whether every rule no type states holds for each of ``changes`` (decoded from canonical
    bytes, ``plain`` when :func:`_is_plain`): ids and instants in their one accepted form, a
    create's version matching its kind, its prompt what a create stores, a ``daily`` record's
    time, zone and weekdays. ``False`` at the first doubt; the caller then finds the error."""
    known = _KNOWN_IDS
    # The instants are checked together once the loop is done (all_canonical).
    instants: list[str] = []
    for change in changes:
        if type(change) is ScheduleDispatchChange:
            schedule_id = change.id
            if schedule_id not in known and not _remember(schedule_id):
                return False
            accepted_at = change.accepted_at
            if accepted_at is not msgspec.UNSET:
                instants.append(accepted_at)
        elif type(change) is ScheduleDeleteChange:
            schedule_id = change.id
            if schedule_id not in known and not _remember(schedule_id):
                return False
        elif type(change) is not ScheduleCreateChange:
            return False  # a version-3 operation: checked one by one
        else:
            record = change.schedule
            if record.id not in known and not _remember(record.id):
                return False
            instants.append(record.scheduled_at)
            if plain and type(record) not in (DailyScheduleRecord, CalendarScheduleRecord):
                prompt = record.prompt
                if (
                    prompt[0] == " "
                    or prompt[-1] == " "
                    or change.version != CHANGE_VERSION
                    or is_managed(record)  # then version 3 is the one accepted
                ):
                    return False
                continue
            if (
                type(record) is DailyScheduleRecord or type(record) is CalendarScheduleRecord
            ) and _DAILY_TIME.fullmatch(record.local_time) is None:
                return False
            try:
                _checked(change, "", plain=plain)
            except ScheduleError:
                return False
    return all_canonical(instants)


def convert_change(value: object, *, where: str = "") -> ScheduleChange:
    """Strictly convert an already-parsed JSON value (dicts, lists, str, int …) to a change.

    The same rules and the same errors as :func:`decode_change`.
    """
    try:
        change: ScheduleChange = msgspec.convert(value, ScheduleChange, strict=True)
    except msgspec.ValidationError as error:
        raise corrupt(where, _explain(str(error), lambda: value)) from None
    except RecursionError:
        raise corrupt(where, NESTED_TOO_DEEPLY) from None
    _check_forms(change, where)
    return _checked(change, where, plain=False)


# Ids known to be of the id form: the ids a delete or dispatch names are, nearly always, ids a
# create named before, so most changes need one set look-up instead of an expression. Bounded:
# it is forgotten whenever it fills.
_KNOWN_IDS: Final[set[str]] = set()
_IDS_REMEMBERED: Final = 1 << 16


def _check_forms(change: ScheduleChange, where: str) -> None:
    """The id, instant and time fields are in their one accepted form (in field order, with the
    message and path of a pattern failure)."""
    if isinstance(change, ScheduleCreateChange):
        _check_record_forms(change.schedule, where)
        return
    _check_id(change.id, where, "$.id")
    if isinstance(change, ScheduleDispatchChange):
        accepted_at = change.accepted_at
        if isinstance(accepted_at, str):
            _check_instant(accepted_at, where, "$.acceptedAt")
    elif isinstance(change, ScheduleUpdateChange):
        _check_record_forms(change.schedule, where)
    elif isinstance(change, ScheduleResumeChange):
        _check_instant(change.accepted_at, where, "$.acceptedAt")
    elif isinstance(change, ScheduleSnoozeChange):
        _check_instant(change.until, where, "$.until")
    elif isinstance(change, ScheduleMissChange):
        _check_instant(change.scheduled_at, where, "$.scheduledAt")
        _check_instant(change.accepted_at, where, "$.acceptedAt")


def _check_record_forms(record: ScheduleRecord, where: str) -> None:
    _check_id(record.id, where, "$.schedule.id")
    if (
        isinstance(record, DailyScheduleRecord | CalendarScheduleRecord)
        and _DAILY_TIME.fullmatch(record.local_time) is None
    ):
        raise corrupt(
            where,
            "expected a wall-clock time of the form HH:MM:SS.sss, got "
            f"{record.local_time!r} - at `$.schedule.time`",
        )
    _check_instant(record.scheduled_at, where, "$.schedule.scheduledAt")
    ends = record_ends(record)
    if ends is not None and ends.until is not None:
        _check_instant(ends.until, where, "$.schedule.ends.until")


def _check_instant(text: str, where: str, path: str) -> None:
    if canonical_instant(text) is None:
        raise corrupt(where, f"{why_not_canonical(text)} - at `{path}`")


def _check_id(text: str, where: str, path: str) -> None:
    if text not in _KNOWN_IDS and not _remember(text):
        raise corrupt(where, f"expected a schedule id like `sch_1`, got {text!r} - at `{path}`")


def _remember(text: str) -> bool:
    """Whether ``text`` is of the id form (then it is remembered as such)."""
    if SCHEDULE_ID.fullmatch(text) is None:
        return False
    if len(_KNOWN_IDS) >= _IDS_REMEMBERED:
        _KNOWN_IDS.clear()
    _KNOWN_IDS.add(text)
    return True


def _checked(change: ScheduleChange, where: str, *, plain: bool) -> ScheduleChange:
    """``change``, once the rules no type states hold: a create's prompt is what a create stores,
    its version matches its kind, and a ``daily`` record names a supported zone and lists its
    weekdays distinct, in week order.

    ``plain``: the change was decoded from canonical ASCII bytes without escapes, so its strings
    hold no control character and no lone surrogate.
    """
    if isinstance(change, ScheduleUpdateChange):
        if change.schedule.id != change.id:
            raise corrupt(
                where,
                f"an update of {change.id} must hold a record with the same id, not "
                f"{change.schedule.id} - at `$.schedule.id`",
            )
        _check_record(change.schedule, where, plain=plain)
        return change
    if not isinstance(change, ScheduleCreateChange):
        return change
    record = change.schedule
    expected = create_version(record)
    if change.version != expected:
        if is_managed(record):
            kind = "a schedule with `ends` or `maxLatenessSeconds`"
        elif isinstance(record, DailyScheduleRecord | CalendarScheduleRecord):
            kind = f"a `{record_kind(record)}` schedule"
        else:
            kind = f"an `{record_kind(record)}` schedule"
        raise corrupt(
            where,
            f"{kind} must be created with version {expected}, not {change.version} "
            "- at `$.version`",
        )
    _check_record(record, where, plain=plain)
    return change


def _check_record(record: ScheduleRecord, where: str, *, plain: bool) -> None:
    """The rules no type states for a record a create or update writes."""
    prompt = record.prompt
    # A shortcut: a prompt without control characters (nor newline or tab) and lone surrogates
    # is valid once it is also trimmed. Anything else goes through the prompt rule. (For such a
    # prompt ``str.strip`` trims exactly the prompt rule's white space: the characters beyond it
    # that it strips, U+001C to U+001F, are control characters.)
    if not (plain or prompt.isprintable()) or prompt.strip() != prompt:
        _check_prompt(prompt, where)
    ends = record_ends(record)
    if ends is not None:
        if ends.until is None and ends.max_runs is None:
            raise corrupt(
                where,
                "`ends` must set `until` or `maxRuns`; a schedule without an end has no `ends` "
                "- at `$.schedule.ends`",
            )
        if ends.until is not None and ends.until < record.scheduled_at:
            raise corrupt(
                where,
                f"the target {record.scheduled_at} is after `ends.until` {ends.until} "
                "- at `$.schedule.scheduledAt`",
            )
    if isinstance(record, CalendarScheduleRecord):
        _check_calendar(record, where)
    if isinstance(record, DailyScheduleRecord):
        if not is_supported_zone(record.time_zone):
            raise corrupt(
                where,
                f"{record.time_zone!r} is not a supported time zone - at `$.schedule.timeZone`",
            )
        if list(record.weekdays) != sorted(set(record.weekdays), key=WEEKDAYS.index):
            raise corrupt(
                where,
                "weekdays must be distinct and in week order, Monday first "
                "- at `$.schedule.weekdays`",
            )


def _check_calendar(record: CalendarScheduleRecord, where: str) -> None:
    """A ``calendar`` record names a supported zone, a real start date and a canonical rule."""
    if not is_supported_zone(record.time_zone):
        raise corrupt(
            where, f"{record.time_zone!r} is not a supported time zone - at `$.schedule.timeZone`"
        )
    if not is_canonical_start_date(record.start_date):
        raise corrupt(
            where,
            f"expected a calendar date of the form YYYY-MM-DD, got {record.start_date!r} "
            "- at `$.schedule.startDate`",
        )
    try:
        canonical = canonical_rule(record.rule)
    except ScheduleError as error:
        raise corrupt(
            where,
            f"the rule {record.rule!r} is not valid: {error.message} - at `$.schedule.rule`",
        ) from None
    if canonical != record.rule:
        raise corrupt(
            where,
            f"expected the rule in canonical form {canonical!r}, got {record.rule!r} "
            "- at `$.schedule.rule`",
        )


def _check_prompt(prompt: str, where: str) -> None:
    """A stored prompt is what a create writes: trimmed, and valid by the prompt rule."""
    if not is_trimmed(prompt):
        raise corrupt(
            where,
            "the prompt has leading or trailing whitespace; a create stores it trimmed - at "
            "`$.schedule.prompt`",
        )
    fault = prompt_fault(prompt, max_chars=None)
    if fault is not None:
        raise corrupt(where, f"{describe_fault(fault)} - at `$.schedule.prompt`")


_PATTERN_FAILURE: Final = re.compile(r"Expected `str` matching regex '.*' - at `(\$[^`]*)`")


def _explain(message: str, document: Callable[[], object]) -> str:
    """msgspec's message, with a failed id, instant or time pattern said in words."""
    failure = _PATTERN_FAILURE.fullmatch(message)
    if failure is None:
        return message[:1].lower() + message[1:]
    path = failure.group(1)
    try:
        value = document()
    except (msgspec.DecodeError, RecursionError):
        return message[:1].lower() + message[1:]
    for key in path.split(".")[1:]:
        value = value[key] if isinstance(value, dict) else None
    text = str(value)
    if path.endswith(("scheduledAt", "acceptedAt")):
        return f"{why_not_canonical(text)} - at `{path}`"
    if path.endswith(".time"):
        return f"expected a wall-clock time of the form HH:MM:SS.sss, got {text!r} - at `{path}`"
    return f"expected a schedule id like `sch_1`, got {text!r} - at `{path}`"
