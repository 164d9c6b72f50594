"""``session-schedule serve``: the web overlay on the embedded default store (JSONL files).

The model is configured as for the CLI chat: ``--model`` or ``$SESSION_SCHEDULE_MODEL`` names it,
``--base-url`` or ``$OPENAI_BASE_URL`` picks an OpenAI-compatible endpoint and
``$OPENAI_API_KEY`` authenticates; with no model the overlay runs in offline mode, where the
person calls the tools from the page. The server binds 127.0.0.1 unless told otherwise; on any
other address it requires an access token (generated when ``--token`` is not given) and prints
the address to open, token included.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import re
import secrets
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

from session_schedule.cli.chat import MODEL_VARIABLE, ModelConfig, model_config
from session_schedule.cli.common import EXIT_OK, EXIT_USAGE, data_dir, fail
from session_schedule.harness.model import OpenAIChatModel
from session_schedule.session.jsonl import JsonlSessionStore
from session_schedule.web.app import create_app
from session_schedule.web.live import ModelFactory
from session_schedule.web.security import access_policy, is_loopback, is_wildcard
from session_schedule.web.server import OverlayServer, bind

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8765
_TOKEN: Final = re.compile(r"[A-Za-z0-9._~-]{8,200}")

EPILOG = f"""\
example: session-schedule serve --model llama3.2 --base-url http://localhost:11434/v1
more examples:
  session-schedule serve                              offline mode, on http://127.0.0.1:8765/
  session-schedule serve --model gpt-4o-mini          OpenAI, with $OPENAI_API_KEY
  session-schedule serve --host 0.0.0.0 --port 8080   other machines too, with a token

The model is --model, else ${MODEL_VARIABLE}; without one the overlay runs offline and you call
the tools from the page. The endpoint is --base-url, else $OPENAI_BASE_URL, else OpenAI's; the
key is $OPENAI_API_KEY (an endpoint given without one is sent a placeholder). On an address
other than loopback every request needs the access token (--token, or one generated at start):
open the printed address once and the page keeps it."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "serve",
        help="the web overlay: chat in the browser, the browser's time zone on every prompt",
        description="Serve the web overlay: a chat on a live Session in the browser. Each "
        "prompt carries the browser's time zone; reminders come back as ordinary turns.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}; any other needs the token)",
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=DEFAULT_PORT,
        help=f"port to listen on (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    parser.add_argument("--model", help=f"model name (default ${MODEL_VARIABLE}; none: offline)")
    parser.add_argument(
        "--base-url", metavar="URL", help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL)"
    )
    parser.add_argument(
        "--token", help="access token to require (generated when the host is not loopback)"
    )
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    host: str = arguments.host
    token: str | None = arguments.token
    if token is not None and not _TOKEN.fullmatch(token):
        return fail(
            "--token must be 8 to 200 characters: letters, digits, '-', '_', '.' or '~'",
            EXIT_USAGE,
        )
    if token is None and not is_loopback(host):
        token = secrets.token_urlsafe(24)
    config = model_config(arguments.model, arguments.base_url, os.environ)
    if isinstance(config, str):
        return fail(config, EXIT_USAGE)
    try:
        sock = bind(host, arguments.port)
    except OSError as error:
        return fail(
            f"cannot listen on {host}:{arguments.port} ({error.strerror or error}); "
            "choose another --host or --port",
            EXIT_USAGE,
        )
    with sock:
        asyncio.run(_serve(arguments, sock, token=token, config=config))
    return EXIT_OK


async def _serve(
    arguments: argparse.Namespace,
    sock: socket.socket,
    *,
    token: str | None,
    config: ModelConfig | None,
) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(name)s: %(message)s")
    directory = data_dir(arguments)
    async with _model(config) as model:
        app = create_app(
            JsonlSessionStore(directory),
            model=model,
            policy=access_policy(arguments.host, token=token),
        )
        _announce(arguments.host, sock, token=token, config=config, directory=directory)
        await OverlayServer(app).serve(sockets=[sock])


@contextlib.asynccontextmanager
async def _model(config: ModelConfig | None) -> AsyncIterator[ModelFactory | None]:
    """The model factory the chat's configuration selects (``None``: offline mode)."""
    if config is None:
        yield None
        return
    from openai import AsyncOpenAI  # noqa: PLC0415 - only a configured model needs the SDK

    async with AsyncOpenAI(api_key=config.api_key, base_url=config.base_url) as client:
        model = OpenAIChatModel(client, config.name)
        yield lambda: model


def _announce(
    host: str,
    sock: socket.socket,
    *,
    token: str | None,
    config: ModelConfig | None,
    directory: Path,
) -> None:
    port: int = sock.getsockname()[1]
    shown = "127.0.0.1" if is_wildcard(host) else host.strip("[]")
    if ":" in shown:
        shown = f"[{shown}]"
    url = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    print(f"session-schedule: the web overlay is at {url}", flush=True)
    if is_wildcard(host):
        print(
            "session-schedule: listening on every address of this machine; from another one, "
            "use its address in place of 127.0.0.1",
            flush=True,
        )
    if token:
        print(
            "session-schedule: every request needs the token; keep the address secret",
            flush=True,
        )
    mode = f"model {config.name}" if config else "offline mode (you call the tools on the page)"
    print(f"session-schedule: {mode}; sessions in {directory}", flush=True)


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535)")
    return int(text)
