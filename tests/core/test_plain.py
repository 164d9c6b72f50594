"""Read-only JSON-ready values: equal to and serialised as plain ones, refusing every change."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable

import msgspec
import pytest

from session_schedule.core.plain import ReadOnlyDict, ReadOnlyList, plain, read_only
from session_schedule.core.records import view_in_state
from tests.core.test_records import DAILY

_READ_ONLY = (
    "a view returned by schedule_list is read-only (it is shared with later results); "
    "copy it first, e.g. with dict(view) or copy.deepcopy(result)"
)
VALUE = {"a": 1, "b": ["x", {"c": [2]}], "d": None}


def test_a_read_only_value_equals_and_serialises_as_the_plain_one() -> None:
    frozen = read_only(VALUE)
    assert isinstance(frozen, ReadOnlyDict)
    assert isinstance(frozen["b"], ReadOnlyList)
    assert frozen == VALUE
    assert json.dumps(frozen) == json.dumps(VALUE)
    assert msgspec.json.encode(frozen) == msgspec.json.encode(VALUE)
    assert type(msgspec.to_builtins(frozen)) is dict


def test_the_plain_form_of_a_view_is_to_builtins_of_it() -> None:
    view = view_in_state(DAILY, "overdue")
    built = plain(view)
    assert built == msgspec.to_builtins(view)
    assert isinstance(built["weekdays"], ReadOnlyList)


def _changes(frozen: ReadOnlyDict, inner: ReadOnlyList) -> tuple[Callable[[], object], ...]:
    return (
        lambda: frozen.__setitem__("a", 2),
        lambda: frozen.__delitem__("a"),
        lambda: frozen.__ior__({"a": 2}),
        frozen.clear,
        lambda: frozen.pop("a"),
        frozen.popitem,
        lambda: frozen.setdefault("e", 1),
        lambda: frozen.update(a=2),
        lambda: inner.__setitem__(0, "y"),
        lambda: inner.__delitem__(0),
        lambda: inner.__iadd__(["y"]),
        lambda: inner.__imul__(2),
        lambda: inner.append("y"),
        lambda: inner.extend(["y"]),
        lambda: inner.insert(0, "y"),
        inner.pop,
        lambda: inner.remove("x"),
        inner.clear,
        inner.sort,
        inner.reverse,
    )


def test_every_change_is_refused() -> None:
    frozen = read_only(VALUE)
    assert isinstance(frozen, ReadOnlyDict)
    inner = frozen["b"]
    assert isinstance(inner, ReadOnlyList)
    for change in _changes(frozen, inner):
        with pytest.raises(TypeError) as refused:
            change()
        assert str(refused.value) == _READ_ONLY
    assert frozen == VALUE


@pytest.mark.parametrize(
    "duplicate",
    [copy.copy, copy.deepcopy, lambda value: pickle.loads(pickle.dumps(value))],  # noqa: S301
)
def test_copies_are_plain_and_mutable(duplicate: Callable[[object], object]) -> None:
    frozen = read_only(VALUE)
    copied = duplicate(frozen)
    assert type(copied) is dict
    assert copied == VALUE
    assert isinstance(copied, dict)
    copied["a"] = 2
    assert frozen == VALUE
    deep = copy.deepcopy(frozen)
    assert type(deep["b"]) is list
    assert type(deep["b"][1]["c"]) is list
