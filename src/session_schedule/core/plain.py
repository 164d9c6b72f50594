"""Read-only JSON-ready values: the plain form of a view, built once and handed out many times.

``schedule_list`` returns the same view objects call after call, so a caller that changed one
would change every later result. :class:`ReadOnlyDict` and :class:`ReadOnlyList` are ``dict`` and
``list`` subclasses whose mutating methods raise ``TypeError``: they compare equal to plain dicts
and lists, and ``json.dumps``, ``msgspec`` and anything else that reads a ``dict`` or a ``list``
serialise them exactly as those. ``copy.copy``, ``copy.deepcopy`` and ``pickle`` give plain
(mutable) ``dict`` and ``list`` values back, and so do ``dict(view)`` and ``view.copy()``.
"""

from __future__ import annotations

import copy
from typing import Final, NoReturn, final

import msgspec

_READ_ONLY: Final = (
    "a view returned by schedule_list is read-only (it is shared with later results); "
    "copy it first, e.g. with dict(view) or copy.deepcopy(result)"
)


def _refuse(*_arguments: object, **_keywords: object) -> NoReturn:
    raise TypeError(_READ_ONLY)


@final
class ReadOnlyDict(dict[str, object]):
    """A ``dict`` that refuses every change (see the module docstring)."""

    __slots__ = ()

    __setitem__ = _refuse
    __delitem__ = _refuse
    __ior__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse

    def __copy__(self) -> dict[str, object]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, object]) -> dict[str, object]:
        return {key: copy.deepcopy(value, memo) for key, value in self.items()}

    def __reduce__(self) -> tuple[type[dict[str, object]], tuple[dict[str, object]]]:
        return dict, (dict(self),)


@final
class ReadOnlyList(list[object]):
    """A ``list`` that refuses every change (see the module docstring)."""

    __slots__ = ()

    __setitem__ = _refuse
    __delitem__ = _refuse
    __iadd__ = _refuse
    __imul__ = _refuse
    append = _refuse
    extend = _refuse
    insert = _refuse
    pop = _refuse
    remove = _refuse
    clear = _refuse
    sort = _refuse
    reverse = _refuse

    def __copy__(self) -> list[object]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, object]) -> list[object]:
        return [copy.deepcopy(value, memo) for value in self]

    def __reduce__(self) -> tuple[type[list[object]], tuple[list[object]]]:
        return list, (list(self),)


def read_only(value: object) -> object:
    """``value`` (JSON-ready builtins) with every dict and list in it made read-only."""
    if isinstance(value, dict):
        return ReadOnlyDict({key: read_only(item) for key, item in value.items()})
    if isinstance(value, list):
        return ReadOnlyList(read_only(item) for item in value)
    return value


def plain(struct: msgspec.Struct) -> ReadOnlyDict:
    """The JSON-ready form of ``struct`` (as ``msgspec.to_builtins`` gives it), read-only."""
    built = read_only(msgspec.to_builtins(struct))
    if not isinstance(built, ReadOnlyDict):
        raise TypeError(f"a {type(struct).__name__} is not an object")
    return built
