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


@final
class ScheduleError(Exception):
    """A failure with a stable code and a message a model (or an operator) can act on."""

    code: ErrorCode
    message: str

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"ScheduleError({self.code!r}, {self.message!r})"
