"""The Session event log: the port, plus its memory, JSONL, SQLite and PostgreSQL backends.

See SPEC §4, §5 and §8.

General layout:

- ``port``     — what every store and handle promises: ``SessionStore``, ``SessionHandle``, the
                 ``SessionHeader``, ``LogEntry`` and ``SessionSnapshot`` values;
- ``ids``      — session ids and their one accepted form;
- ``errors``   — ``SessionError`` and its kinds, ``PersistenceUncertain`` among them;
- ``message``  — the ``message`` entry type (transcript turns), registered in the persistence
                 catalog beside the core's ``schedule/change``;
- ``turns``    — the ``turn/queued`` and ``turn/finished`` entry types (the durable turn
                 queue);
- ``framework`` — the ``framework/messages`` entry type (a framework adapter's own conversation
                 history, kept in the log) and its reader;
- ``quotas``   — the ``schedule/quotas`` entry type (the quotas a person set for the session);
- ``entry_types`` — every durable entry type registered: the complete persistence catalog;
- ``codec``    — the envelope and payload bytes shared by the file and database backends;
- ``lines``    — the JSONL file's line formats (1 and 2: sequence numbers, chained checksums,
                 commit records) and the scan that tells a torn tail from corruption;
- ``barrier``  — group commit, the mechanism behind ``barrier()``;
- ``worker``   — the dedicated thread each open file or database session runs its blocking
                 calls on;
- ``handle``   — the handle behaviour all backends share (positions, live view, poisoning);
- ``targets``  — the next-target index every store keeps (``due_sessions``), and
                 ``jsonl.next_targets``, the JSONL store's sidecar file for it;
- ``stores``   — what the stores share in keeping their records (rows pending a flush, rows
                 decoded strictly, a checkpoint's window, a listing of headers);
- ``checkpoint`` — the derived snapshot of a session's fold kept beside its log, so an open
                 decodes only the log's tail;
- ``memory``, ``jsonl``, ``sqlite`` — the backends (``jsonl`` a package, one module per part of
                 its discipline: files, creation, opening, the handle, checkpoints, segments, the
                 next-target index);
- ``postgres``, ``postgres_schema`` — the PostgreSQL backend and its schema, imported only by
                 name (``from session_schedule.session.postgres import PostgresSessionStore``):
                 they need the ``postgres`` extra (psycopg), which nothing else imports.

Imports flow one way: this package uses ``session_schedule.core`` and nothing above it. The names
below are loaded on first use, so importing one backend does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

# The durable entry types (``message``, ``turn/queued``, ``turn/finished``,
# ``framework/messages``, ``schedule/quotas``) register themselves in the persistence catalog when
# their modules are imported, and every store decodes entries of those types: importing any part
# of this package imports them all (``entry_types``).
import session_schedule.session.entry_types  # noqa: F401 - registers every durable type
from session_schedule.extras import lazy_exports
from session_schedule.session.framework import FRAMEWORK_MESSAGES_TYPE as FRAMEWORK_MESSAGES_TYPE
from session_schedule.session.framework import FrameworkMessages as FrameworkMessages
from session_schedule.session.message import MESSAGE_ENTRY_TYPE as MESSAGE_ENTRY_TYPE
from session_schedule.session.message import MessageEntry as MessageEntry
from session_schedule.session.message import Origin as Origin
from session_schedule.session.message import Role as Role
from session_schedule.session.message import ToolCall as ToolCall
from session_schedule.session.message import assistant_message as assistant_message
from session_schedule.session.message import tool_message as tool_message
from session_schedule.session.message import user_message as user_message
from session_schedule.session.turns import TURN_FINISHED_TYPE as TURN_FINISHED_TYPE
from session_schedule.session.turns import TURN_QUEUED_TYPE as TURN_QUEUED_TYPE
from session_schedule.session.turns import TurnFinished as TurnFinished
from session_schedule.session.turns import TurnQueued as TurnQueued

if TYPE_CHECKING:
    from session_schedule.session.errors import PersistenceUncertain as PersistenceUncertain
    from session_schedule.session.errors import SessionBusy as SessionBusy
    from session_schedule.session.errors import SessionClosed as SessionClosed
    from session_schedule.session.errors import SessionCorrupt as SessionCorrupt
    from session_schedule.session.errors import SessionError as SessionError
    from session_schedule.session.errors import SessionExists as SessionExists
    from session_schedule.session.errors import SessionNotFound as SessionNotFound
    from session_schedule.session.handle import LogHandle as LogHandle
    from session_schedule.session.ids import SessionId as SessionId
    from session_schedule.session.ids import parse_session_id as parse_session_id
    from session_schedule.session.jsonl import JsonlInspection as JsonlInspection
    from session_schedule.session.jsonl import JsonlSessionHandle as JsonlSessionHandle
    from session_schedule.session.jsonl import JsonlSessionStore as JsonlSessionStore
    from session_schedule.session.memory import MemorySessionHandle as MemorySessionHandle
    from session_schedule.session.memory import MemorySessionStore as MemorySessionStore
    from session_schedule.session.port import FORMAT_VERSION as FORMAT_VERSION
    from session_schedule.session.port import DueSession as DueSession
    from session_schedule.session.port import LogEntry as LogEntry
    from session_schedule.session.port import SessionHandle as SessionHandle
    from session_schedule.session.port import SessionHeader as SessionHeader
    from session_schedule.session.port import SessionSnapshot as SessionSnapshot
    from session_schedule.session.port import SessionStore as SessionStore
    from session_schedule.session.sqlite import SqliteSessionHandle as SqliteSessionHandle
    from session_schedule.session.sqlite import SqliteSessionStore as SqliteSessionStore

_EXPORTS: Final = {
    "PersistenceUncertain": "session_schedule.session.errors",
    "SessionBusy": "session_schedule.session.errors",
    "SessionClosed": "session_schedule.session.errors",
    "SessionCorrupt": "session_schedule.session.errors",
    "SessionError": "session_schedule.session.errors",
    "SessionExists": "session_schedule.session.errors",
    "SessionNotFound": "session_schedule.session.errors",
    "LogHandle": "session_schedule.session.handle",
    "SessionId": "session_schedule.session.ids",
    "parse_session_id": "session_schedule.session.ids",
    "JsonlInspection": "session_schedule.session.jsonl",
    "JsonlSessionHandle": "session_schedule.session.jsonl",
    "JsonlSessionStore": "session_schedule.session.jsonl",
    "MemorySessionHandle": "session_schedule.session.memory",
    "MemorySessionStore": "session_schedule.session.memory",
    "FORMAT_VERSION": "session_schedule.session.port",
    "DueSession": "session_schedule.session.port",
    "LogEntry": "session_schedule.session.port",
    "SessionHandle": "session_schedule.session.port",
    "SessionHeader": "session_schedule.session.port",
    "SessionSnapshot": "session_schedule.session.port",
    "SessionStore": "session_schedule.session.port",
    "SqliteSessionHandle": "session_schedule.session.sqlite",
    "SqliteSessionStore": "session_schedule.session.sqlite",
}
"""Each public name and the module that defines it."""

__all__ = [
    "FORMAT_VERSION",
    "FRAMEWORK_MESSAGES_TYPE",
    "MESSAGE_ENTRY_TYPE",
    "TURN_FINISHED_TYPE",
    "TURN_QUEUED_TYPE",
    "DueSession",
    "FrameworkMessages",
    "JsonlInspection",
    "JsonlSessionHandle",
    "JsonlSessionStore",
    "LogEntry",
    "LogHandle",
    "MemorySessionHandle",
    "MemorySessionStore",
    "MessageEntry",
    "Origin",
    "PersistenceUncertain",
    "Role",
    "SessionBusy",
    "SessionClosed",
    "SessionCorrupt",
    "SessionError",
    "SessionExists",
    "SessionHandle",
    "SessionHeader",
    "SessionId",
    "SessionNotFound",
    "SessionSnapshot",
    "SessionStore",
    "SqliteSessionHandle",
    "SqliteSessionStore",
    "ToolCall",
    "TurnFinished",
    "TurnQueued",
    "assistant_message",
    "parse_session_id",
    "tool_message",
    "user_message",
]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
