from __future__ import annotations

import importlib
import inspect

import msgspec
import pytest

from session_schedule.core.catalog import (
    CATALOG,
    BatchInstantField,
    PersistenceCatalog,
    strict_twin,
)
from session_schedule.core.changes import ScheduleChange
from session_schedule.core.instants import CANONICAL_INSTANT_PATTERN
from session_schedule.core.records import InstantField
from session_schedule.core.schema import json_schema


def test_schedule_change_is_indexed_with_its_derived_location() -> None:
    entry = CATALOG.entry("schedule/change")
    assert entry is not None
    assert entry.versions == (1, 2, 3)
    assert entry.declaration == "session_schedule.core.changes.ScheduleChange"
    module = importlib.import_module(entry.module)
    source = inspect.getsource(module).splitlines()
    # The declaration (which may span lines) ends on the line above the registration.
    start = entry.line - 2
    while source[start].startswith((" ", ")")):
        start -= 1
    assert source[start].startswith("ScheduleChange: TypeAlias = ")
    assert source[entry.line - 2] in {")", source[start]}
    assert "CATALOG.register(" in source[entry.line - 1]
    assert entry.schema == json_schema(ScheduleChange)
    patterns = [value for key, value in _walk(entry.schema) if key == "pattern"]
    assert patterns
    assert all(isinstance(p, str) and p.endswith("$") and "\\Z" not in p for p in patterns)


def _walk(node: object) -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            found.append((key, value))
            found.extend(_walk(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(_walk(item))
    return found


def test_catalog_decodes_by_type_and_knows_unknown_types() -> None:
    decode = CATALOG.decoder("schedule/change")
    assert decode is not None
    assert decode(b'{"operation":"delete","version":1,"id":"sch_2"}', "at entry 0") is not None
    assert CATALOG.decoder("no/such-type") is None
    assert "schedule/change" in CATALOG
    assert "no/such-type" not in CATALOG


def test_catalog_json_lists_entries_by_name() -> None:
    listed = msgspec.json.decode(CATALOG.to_json())
    assert isinstance(listed, list)
    names = [item["name"] for item in listed]
    assert names == sorted(names)
    assert "schedule/change" in names


Local = int
LOCAL_ENTRY = None


def test_register_refuses_duplicates_and_anonymous_declarations() -> None:
    catalog = PersistenceCatalog()
    entry = catalog.register("test/local", versions=(3,), declaration=Local, decode=lambda d, w: d)
    assert entry.declaration == f"{__name__}.Local"
    assert entry.module == __name__
    assert [item.name for item in catalog] == ["test/local"]
    with pytest.raises(ValueError, match="'test/local' is registered already"):
        catalog.register("test/local", versions=(3,), declaration=Local, decode=lambda d, w: d)
    with pytest.raises(ValueError, match="must be a module-level name"):
        catalog.register(
            "test/other", versions=(1,), declaration=list[bytes], decode=lambda d, w: d
        )


class Stamp(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    rename="camel",
    omit_defaults=True,
):
    label: str
    at: BatchInstantField
    seen_at: BatchInstantField | None = None
    notes: list[str] = msgspec.field(default_factory=list)


def test_a_strict_twin_decodes_as_the_declaration_with_the_patterns() -> None:
    twin = strict_twin(Stamp, {"at": InstantField})
    assert [
        (field.name, field.encode_name, field.default, field.default_factory)
        for field in msgspec.structs.fields(twin)
    ] == [
        (field.name, field.encode_name, field.default, field.default_factory)
        for field in msgspec.structs.fields(Stamp)
    ]
    good = b'{"label":"x","at":"2026-05-01T09:00:00.000Z","seenAt":"2026-05-01T09:00:00Z"}'
    assert msgspec.json.encode(msgspec.json.decode(good, type=twin)) == good
    assert msgspec.json.encode(msgspec.json.decode(good, type=Stamp)) == good
    bad = good.replace(b"09:00:00.000Z", b"09:00:00Z")
    assert msgspec.json.decode(bad, type=Stamp).at == "2026-05-01T09:00:00Z"
    with pytest.raises(msgspec.ValidationError) as raised:
        msgspec.json.decode(bad, type=twin)
    assert str(raised.value) == (
        f"Expected `str` matching regex {CANONICAL_INSTANT_PATTERN!r} - at `$.at`"
    )
    with pytest.raises(msgspec.ValidationError) as unknown:
        msgspec.json.decode(good[:-1] + b',"extra":1}', type=twin)
    assert str(unknown.value) == "Object contains unknown field `extra`"
    with pytest.raises(ValueError) as refused:
        strict_twin(Stamp, {"when": InstantField})
    assert str(refused.value) == "Stamp has no fields ['when']"


def test_the_batch_instant_field_has_the_instant_field_schema() -> None:
    assert msgspec.json.schema(BatchInstantField) == msgspec.json.schema(InstantField)
