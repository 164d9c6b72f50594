"""The persistence catalog: every durable event type the project writes, in one registry.

Each durable type registers itself once, at import, right under its declaration, with its name,
versions and strict decoder. The catalog derives the rest — the declaration's qualified name, the
module and line of the registration (which stands directly under the declaration), and the JSON
schema — so none of it is written by hand and none of it can drift. Storage uses the catalog to
decode entries by type and to refuse types it does not know.

A type may also register a *batch* decoder (``decode_many``), which decodes many payloads at once
for a long log: it returns what the strict decoder returns for each payload, or ``None`` at the
first doubt — it never raises for bad bytes — and the caller then decodes each payload with the
strict decoder, which says what is wrong. A batch decoder is a shortcut, never a second rule.

A check msgspec runs as it decodes — a field's pattern — costs about half a microsecond a value,
more than the rest of a small payload's decode, where a batch decoder checks a chunk's values of
that field at once for a fraction of it. Such a type declares the field without the pattern
(:data:`BatchInstantField`: the same JSON schema) and its strict decoder decodes a payload it
doubts with its :func:`strict_twin`, which keeps the pattern: a bad payload's error is msgspec's,
for the first bad field in order, exactly as when the declaration carried the pattern.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Annotated, Final, TypeAlias, final

import msgspec

from session_schedule.core.instants import CANONICAL_INSTANT_PATTERN
from session_schedule.core.schema import json_schema

Decoder = Callable[[bytes, str], object]
"""Strictly decode one payload; the ``str`` names the entry in error messages."""
BatchDecoder = Callable[[Sequence[bytes]], Sequence[object] | None]
"""Decode many payloads as the :data:`Decoder` decodes each, or ``None`` at the first doubt."""


@final
class CatalogEntry(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    """The entry type as written in the log, e.g. ``schedule/change``."""
    versions: tuple[int, ...]
    """Every version of the payload the project writes and reads."""
    declaration: str
    """Qualified name of the Python type that declares the payload."""
    module: str
    line: int
    """Line of the registration in ``module``; it stands directly under the declaration."""
    schema: dict[str, object]
    """JSON Schema of the payload, generated from the declaration."""


@final
class PersistenceCatalog:
    """A registry of durable event types, keyed by name."""

    def __init__(self) -> None:
        self._entries: dict[str, CatalogEntry] = {}
        self._decoders: dict[str, Decoder] = {}
        self._types: dict[str, object] = {}
        self._batch_decoders: dict[str, BatchDecoder] = {}

    def register(
        self,
        name: str,
        *,
        versions: tuple[int, ...],
        declaration: object,
        decode: Decoder,
        decode_many: BatchDecoder | None = None,
    ) -> CatalogEntry:
        """Register the durable type ``name`` declared by ``declaration`` (``decode_many``: its
        batch decoder, if it has one; see the module docstring).

        Call it at module level, on the line under the declaration: the location is taken from
        the caller. Raises ``ValueError`` when ``name`` is registered already or when the
        declaration is not a module-level name of the caller.
        """
        if name in self._entries:
            raise ValueError(f"durable event type {name!r} is registered already")
        caller = sys._getframe(1)  # the registration site is the point
        module = str(caller.f_globals["__name__"])
        names = [key for key, value in caller.f_globals.items() if value is declaration]
        if not names:
            raise ValueError(f"the declaration of {name!r} must be a module-level name")
        entry = CatalogEntry(
            name=name,
            versions=versions,
            declaration=f"{module}.{names[0]}",
            module=module,
            line=caller.f_lineno,
            schema=json_schema(declaration),
        )
        self._entries[name] = entry
        self._decoders[name] = decode
        self._types[name] = declaration
        if decode_many is not None:
            self._batch_decoders[name] = decode_many
        return entry

    def __iter__(self) -> Iterator[CatalogEntry]:
        return iter(sorted(self._entries.values(), key=lambda entry: entry.name))

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def entry(self, name: str) -> CatalogEntry | None:
        return self._entries.get(name)

    def decoder(self, name: str) -> Decoder | None:
        """The strict decoder of ``name``, or ``None`` for a type nobody registered."""
        return self._decoders.get(name)

    def batch_decoder(self, name: str) -> BatchDecoder | None:
        """The batch decoder of ``name``, or ``None`` when it has none (or is not registered)."""
        return self._batch_decoders.get(name)

    def declared_type(self, name: str) -> object | None:
        """The type that declares ``name``'s payload, or ``None`` for a type nobody registered."""
        return self._types.get(name)

    def to_json(self) -> bytes:
        """The catalog as canonical JSON: a list of entries ordered by name."""
        return msgspec.json.encode(list(self))


BatchInstantField: TypeAlias = Annotated[
    str,
    msgspec.Meta(
        description="An instant in UTC, canonical form YYYY-MM-DDTHH:MM:SS.sssZ.",
        extra_json_schema={"type": "string", "pattern": CANONICAL_INSTANT_PATTERN},
    ),
]
"""An instant field in its canonical form, as the records' ``InstantField`` (the same JSON
schema), whose pattern a batch decoder checks (see the module docstring); the type's strict
decoder checks it with its :func:`strict_twin`, where the field is an ``InstantField``."""


def strict_twin(
    declaration: type[msgspec.Struct], fields: Mapping[str, object]
) -> type[msgspec.Struct]:
    """A struct type to decode payloads of ``declaration`` with, one at a time: the same fields
    in the same order, with the same wire names, defaults and options, but the types ``fields``
    gives for the fields it names (their checked forms, see the module docstring). It decodes
    what ``declaration`` decodes, less what those types refuse, and refuses it with msgspec's
    errors in field order; its values encode as ``declaration``'s do.

    Raises ``ValueError`` (a developer error) when ``fields`` names a field ``declaration`` does
    not have.
    """
    declared = msgspec.structs.fields(declaration)
    unknown = set(fields) - {field.name for field in declared}
    if unknown:
        raise ValueError(f"{declaration.__name__} has no fields {sorted(unknown)}")
    config = declaration.__struct_config__
    twin: list[tuple[str, object] | tuple[str, object, object]] = []
    for field in declared:
        kind = fields.get(field.name, field.type)
        if field.default is not msgspec.NODEFAULT:
            twin.append((field.name, kind, field.default))
        elif field.default_factory is not msgspec.NODEFAULT:
            twin.append((field.name, kind, msgspec.field(default_factory=field.default_factory)))
        else:
            twin.append((field.name, kind))
    return msgspec.defstruct(
        declaration.__name__,
        twin,
        module=declaration.__module__,
        kw_only=True,
        frozen=config.frozen,
        forbid_unknown_fields=config.forbid_unknown_fields,
        omit_defaults=config.omit_defaults,
        rename={field.name: field.encode_name for field in declared},
    )


CATALOG: Final = PersistenceCatalog()
"""The project's catalog. Importing a module that declares a durable type registers it."""
