"""Every durable entry type this version writes, registered in the persistence catalog.

A durable type registers itself in :data:`~session_schedule.core.catalog.CATALOG` when the module
that declares it is imported, so the catalog holds the types of the modules a process has imported
so far, and no more. What enumerates the catalog (``session-schedule catalog``, the reference the
documentation generates) takes it from :func:`complete_catalog`, which has imported every such
module first: it lists every type, however the program was entered. A module that declares a new
durable type is imported here; ``tests/session/test_entry_types.py`` fails until it is.
"""

from __future__ import annotations

from session_schedule.core import changes
from session_schedule.core.catalog import CATALOG, PersistenceCatalog
from session_schedule.session import framework, message, quotas, turns

_DECLARING_MODULES = (changes, framework, message, quotas, turns)
"""Every module that registers a durable type; importing them registered their types."""


def complete_catalog() -> PersistenceCatalog:
    """The persistence catalog, holding every durable entry type this version writes."""
    return CATALOG
