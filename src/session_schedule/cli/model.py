"""Which model the chat, the web overlay and the host talk to, and the client that reaches it.

``--model`` (else ``$SESSION_SCHEDULE_MODEL``) names it; without one a command runs offline.
``--base-url`` (else ``$OPENAI_BASE_URL``, else OpenAI's) picks any OpenAI-compatible Chat
Completions endpoint, and ``$OPENAI_API_KEY`` authenticates (an endpoint given without one is sent
:data:`API_KEY_PLACEHOLDER`). The official ``openai`` SDK (the ``openai`` extra) is imported only
once a configured model is connected.
"""

from __future__ import annotations

import argparse
import contextlib
import urllib.parse
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Final, final

from session_schedule.harness.model import Model, OpenAIChatModel

MODEL_VARIABLE: Final = "SESSION_SCHEDULE_MODEL"
API_KEY_PLACEHOLDER: Final = "not-needed"
"""Sent as the API key to an explicit endpoint when ``$OPENAI_API_KEY`` is unset (local servers
such as Ollama or llama.cpp need none, but the SDK insists on one)."""


def add_model_options(parser: argparse.ArgumentParser, *, model: str, base_url: str) -> None:
    """Add ``--model MODEL`` and ``--base-url URL``, with these helps (see :func:`model_config`)."""
    parser.add_argument("--model", metavar="MODEL", help=model)
    parser.add_argument("--base-url", metavar="URL", help=base_url)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelConfig:
    """Which model to reach, where, and with which key."""

    name: str
    base_url: str | None
    """``None``: the SDK's default endpoint."""
    api_key: str


def model_config(
    model: str | None, base_url: str | None, environ: Mapping[str, str]
) -> ModelConfig | str | None:
    """The model the options and ``environ`` select: ``None`` for offline mode, or a message
    saying what is missing or wrong."""
    name = model or environ.get(MODEL_VARIABLE) or None
    if name is None:
        return None
    url = base_url or environ.get("OPENAI_BASE_URL") or None
    if url is not None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            origin = "--base-url" if base_url else "OPENAI_BASE_URL"
            return (
                f"{origin}: {url!r} is not an http or https URL; give the endpoint's base URL, "
                "such as http://localhost:11434/v1"
            )
    key = environ.get("OPENAI_API_KEY") or None
    if key is not None and not (key.isascii() and key.isprintable() and key.strip() == key):
        # Sent in the Authorization header, which takes printable ASCII only: such a key fails
        # every request, deep in the HTTP client.
        return (
            "OPENAI_API_KEY holds a character an HTTP header cannot carry (only printable ASCII, "
            "without spaces around it); set it to the key itself"
        )
    if key is None:
        if url is None:
            return (
                f"model {name!r} needs an API key: set OPENAI_API_KEY, or give --base-url for a "
                "local endpoint that needs none"
            )
        key = API_KEY_PLACEHOLDER
    return ModelConfig(name=name, base_url=url, api_key=key)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Connection:
    """The model a command talks to, once connected."""

    model: Model | None
    """``None``: offline."""
    endpoint: str
    """The endpoint as the SDK resolved it (empty offline)."""


@contextlib.asynccontextmanager
async def connect(config: ModelConfig | None) -> AsyncIterator[Connection]:
    """The model ``config`` names, through a client closed afterwards; offline for ``None``.

    The caller has checked that the SDK is installed (``require("openai", …)``)."""
    if config is None:
        yield Connection(model=None, endpoint="")
        return
    from openai import AsyncOpenAI  # noqa: PLC0415 - only a configured model needs the SDK

    # The turn queue retries a failed turn (Settings.turn_retry); the SDK's own retries would
    # hide attempts from it and wait outside its bounds.
    async with AsyncOpenAI(
        api_key=config.api_key, base_url=config.base_url, max_retries=0
    ) as client:
        yield Connection(model=OpenAIChatModel(client, config.name), endpoint=str(client.base_url))
