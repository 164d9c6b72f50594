"""The one error type of Schedule, and its closed vocabulary of stable codes (SPEC §5).

Everything a model can cause is reported as a :class:`ScheduleError` whose ``code`` is one of
:data:`ErrorCode` and whose ``message`` is one lower-case sentence saying what to do next. The log
decoder and the fold report damaged storage as ``corrupt_schedule_log``; the shell reports a failed
persistence barrier as ``persistence_uncertain``. Anything else that escapes is a bug.
"""

from __future__ import annotations

from typing import Final, Literal, final, get_args

ErrorCode = Literal[
    "invalid_prompt",
    "invalid_selector",
    "invalid_rule",
    "invalid_time_zone",
    "not_future",
    "time_out_of_range",
    "frequency_too_high",
    "corrupt_schedule_log",
    "persistence_uncertain",
    "internal_error",
]

ERROR_CODES: Final[tuple[ErrorCode, ...]] = get_args(ErrorCode)

MAX_MESSAGE_CHARS: Final = 1_200
"""The longest message: one quoting what was sent (a megabyte of `at`, a key, a tool name)
keeps its beginning and its advice at the end, and says how much of the middle it leaves out,
so that neither the model's context nor the log takes the echo whole."""
_HEAD_CHARS: Final = 800
_TAIL_CHARS: Final = 300


def bounded_message(message: str) -> str:
    """``message`` within :data:`MAX_MESSAGE_CHARS`: its middle left out, and counted, when it
    is longer."""
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    left_out = len(message) - _HEAD_CHARS - _TAIL_CHARS
    return f"{message[:_HEAD_CHARS]}… [{left_out:,} characters left out] …{message[-_TAIL_CHARS:]}"


@final
class ScheduleError(Exception):
    """A failure with a stable code and a message a model (or an operator) can act on."""

    code: ErrorCode
    message: str

    def __init__(self, code: ErrorCode, message: str) -> None:
        message = bounded_message(message)
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"ScheduleError({self.code!r}, {self.message!r})"
