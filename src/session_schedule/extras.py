"""Optional dependencies: which extra brings each one, and the one gate every optional import
passes.

``pip install session-schedule`` installs the core (msgspec and tzdata). The program's terminal,
the model clients, the web overlay, the PostgreSQL store, the MCP server and the framework
adapters (``session_schedule.integrations``) need more; each such package belongs to an extra
(``pip install 'session-schedule[web]'``). Code that needs one
calls :func:`require` before it imports from it, so that a missing package is one line naming
the command to run, never a traceback from deep inside an import.

The packages of the library load their public names on first use, through
:func:`lazy_exports`, so that importing a package costs only what is actually used (and an
optional dependency behind one of its names is required only when that name is).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Final, Literal, final

Extra = Literal[
    "cli",
    "web",
    "postgres",
    "mcp",
    "openai",
    "anthropic",
    "pydantic-ai",
    "openai-agents",
    "langchain",
]

EXTRAS: Final[Mapping[Extra, tuple[str, ...]]] = {
    "cli": ("rich", "prompt_toolkit"),
    "web": ("starlette", "uvicorn"),
    "postgres": ("psycopg", "psycopg_pool"),
    "mcp": ("mcp",),
    "openai": ("openai",),
    "anthropic": ("anthropic",),
    "pydantic-ai": ("pydantic_ai",),
    "openai-agents": ("agents",),
    "langchain": ("langchain_core", "langgraph"),
}
"""The top-level modules that :func:`require` imports for each extra."""


@final
class MissingExtraError(ImportError):
    """A package of an extra is not installed; the message is one line naming the install
    command."""

    def __init__(self, message: str, *, extra: Extra, name: str) -> None:
        super().__init__(message, name=name)
        self.extra: Final = extra


def install_command(extra: Extra) -> str:
    """The ``pip install`` that brings ``extra``."""
    return f"pip install 'session-schedule[{extra}]'"


def require(extra: Extra, *, purpose: str, modules: tuple[str, ...] = ()) -> None:
    """Import the modules of ``extra`` (or only ``modules``, some of them); ``purpose`` says, for
    the message, what needs them.

    Raises :class:`MissingExtraError` when one of them, or a module it imports, is not installed.
    """
    unknown = set(modules) - set(EXTRAS[extra])
    if unknown:
        raise ValueError(f"{sorted(unknown)} are not modules of the {extra!r} extra")
    for module in modules or EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            missing = error.name or module
            raise MissingExtraError(
                f"{purpose} needs the {extra!r} extra ({missing} is not installed): "
                f"{install_command(extra)}",
                extra=extra,
                name=missing,
            ) from None


def lazy_exports(
    module: str, namespace: MutableMapping[str, object], exports: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of the package ``module`` whose globals
    are ``namespace``, exporting each name of ``exports`` from the module it maps to.

    A name is imported on first access and then kept in ``namespace``, so later accesses are
    plain lookups; an import that needs a missing extra raises its :class:`MissingExtraError`
    then. Any other name raises ``AttributeError`` with the interpreter's own message.
    ``__dir__`` lists the globals and every exported name, sorted. Type checkers see the
    exported names only through the package's own ``if TYPE_CHECKING:`` imports, so a package
    declares each name there as well.
    """

    def load(name: str) -> object:
        source = exports.get(name)
        if source is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value: object = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    def names() -> list[str]:
        return sorted({*namespace, *exports})

    return load, names
