"""``session-schedule serve``: the web overlay on the embedded default store (JSONL files).

The model is configured as for the CLI chat: ``--model`` or ``$SESSION_SCHEDULE_MODEL`` names it,
``--base-url`` or ``$OPENAI_BASE_URL`` picks an OpenAI-compatible endpoint and
``$OPENAI_API_KEY`` authenticates; with no model the overlay runs in offline mode, where the
person calls the tools from the page. The server binds 127.0.0.1 unless told otherwise and
requires an access token on every address, as notebook servers do: ``--token``,
``--token-file``, ``$SESSION_SCHEDULE_TOKEN``, else the one kept in the data directory
(:data:`TOKEN_FILE`, ``0600``), generated on the first start and kept across restarts so an open
page reconnects by itself; ``--new-token`` replaces it. It prints the address to open, token
included. ``--no-token`` turns the token off, on a loopback address only.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import math
import os
import re
import secrets
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from session_schedule.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    HelpFormatter,
    add_quotas,
    data_dir,
    fail,
    schedule_settings,
    store_location,
)
from session_schedule.cli.model import (
    MODEL_VARIABLE,
    ModelConfig,
    add_model_options,
    connect,
    model_config,
)
from session_schedule.extras import require
from session_schedule.harness.model import Model
from session_schedule.session.location import (
    StoreLocation,
    check_store,
    opened_store,
    store_url,
)
from session_schedule.session.port import SessionStore
from session_schedule.session.private import (
    NotPrivateFile,
    file_mode,
    private_directory,
    read_private,
    write_private,
)

if TYPE_CHECKING:
    from session_schedule.web.live import ModelFactory

# The overlay's own defaults (``web.server.Limits``, ``web.live.LiveLimits``), stated here so that
# ``serve --help`` needs no ``web`` extra: the overlay is imported only when the command runs.
MAX_CONNECTIONS: Final = 200
MAX_LIVE: Final = 100
MAX_PAGES: Final = 64
IDLE_CLOSE_SECONDS: Final = 1800

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8765
TOKEN_VARIABLE: Final = "SESSION_SCHEDULE_TOKEN"  # noqa: S105 - a variable's name
MIN_TOKEN_BITS: Final = 128
TOKEN_FILE: Final = "serve.token"  # noqa: S105 - a file's name
"""The token ``serve`` keeps in the data directory when none is given (``0600``)."""
MAX_TOKEN_FILE_BYTES: Final = 4096
_TOKEN: Final = re.compile(r"[A-Za-z0-9._~-]{1,256}")
# Character classes for the entropy estimate: a token is taken as drawn uniformly from the union
# of the classes it uses; a token of hex digits only counts 4 bits a character.
_CLASSES: Final = (
    "0123456789",
    "abcdefghijklmnopqrstuvwxyz",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "-_.~",
)
_HEX: Final = re.compile(r"[0-9a-f]+|[0-9A-F]+")

EPILOG = f"""\
example: session-schedule serve --model llama3.2 \\
           --base-url http://localhost:11434/v1
more examples:
  session-schedule serve
      offline mode, on http://127.0.0.1:8765/
  session-schedule serve --model gpt-4o-mini
      OpenAI, with $OPENAI_API_KEY
  session-schedule serve --host 0.0.0.0 --port 8080
      other machines too, with a token

The model is --model, else ${MODEL_VARIABLE}; without one the overlay runs offline and you call
the tools from the page. The endpoint is --base-url, else $OPENAI_BASE_URL, else OpenAI's; the
key is $OPENAI_API_KEY (an endpoint given without one is sent a placeholder).

Every request needs the access token, on every address: --token, --token-file (readable by
its owner only), else ${TOKEN_VARIABLE}, else the one kept in the data directory's {TOKEN_FILE}
(generated on the first start, the same after a restart; --new-token replaces it). A chosen one
needs >= {MIN_TOKEN_BITS} bits, e.g. 32 random url-safe characters or 32 hex digits. Open the
printed address once and the page keeps it in a cookie; an open page reconnects by itself after
a restart. --no-token (loopback only) lets every program and user of this machine in."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "serve",
        help="the web overlay: chat in the browser, the browser's time zone on every prompt",
        description="Serve the web overlay: a chat on a live Session in the browser. Each "
        "prompt carries the browser's time zone; reminders come back as ordinary turns.",
        epilog=EPILOG,
        formatter_class=HelpFormatter,
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
    add_model_options(
        parser,
        model=f"model name (default ${MODEL_VARIABLE}; none: offline)",
        base_url="OpenAI-compatible endpoint (default $OPENAI_BASE_URL)",
    )
    tokens = parser.add_mutually_exclusive_group()
    tokens.add_argument(
        "--token",
        help=f"access token to require (default ${TOKEN_VARIABLE}, else generated; "
        "visible in ps: prefer the variable or --token-file)",
    )
    tokens.add_argument(
        "--token-file", metavar="PATH", type=Path, help="read the access token from PATH"
    )
    tokens.add_argument(
        "--new-token",
        action="store_true",
        help=f"replace the token kept in the data directory's {TOKEN_FILE} with a new one "
        "(open pages then need the new address)",
    )
    tokens.add_argument(
        "--no-token",
        action="store_true",
        help="require no token (loopback only: every local program and user gets in)",
    )
    parser.add_argument(
        "--max-connections",
        metavar="N",
        type=_positive,
        default=MAX_CONNECTIONS,
        help=f"open connections at most (default {MAX_CONNECTIONS})",
    )
    parser.add_argument(
        "--max-live",
        metavar="N",
        type=_positive,
        default=MAX_LIVE,
        help=f"live sessions at most (default {MAX_LIVE})",
    )
    parser.add_argument(
        "--max-pages",
        metavar="N",
        type=_positive,
        default=MAX_PAGES,
        help=f"open pages (event streams) at most (default {MAX_PAGES}; at most "
        "half of --max-connections, so requests always find a connection)",
    )
    parser.add_argument(
        "--idle-close",
        metavar="SECONDS",
        type=_positive,
        default=IDLE_CLOSE_SECONDS,
        help="close a live session without reminders, turn or open page after this long idle "
        f"(default {IDLE_CLOSE_SECONDS})",
    )
    add_quotas(parser)
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    # The overlay needs the ``web`` extra, checked first and imported only once the command
    # runs (its help needs none): without it this raises MissingExtraError, which ``main``
    # reports in one line (exit 2), the data directory untouched. A refusal leaves the data
    # directory as it was: the model and the store are checked before the token, which may be
    # generated and kept there.
    require("web", purpose="the web overlay")
    config = model_config(arguments.model, arguments.base_url, os.environ)
    if isinstance(config, str):
        return fail(config, EXIT_USAGE)
    if config is not None:
        require("openai", purpose="chatting with a model")
    return asyncio.run(_start(arguments, store_location(arguments), config))


async def _start(
    arguments: argparse.Namespace, location: StoreLocation, config: ModelConfig | None
) -> int:
    from session_schedule.web.server import bind  # noqa: PLC0415

    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(name)s: %(message)s")
    async with opened_store(location) as store:
        # A store that cannot be used is refused here, as every command refuses it (one line,
        # exit 5 or 6 from ``main``), not on every request once the overlay says it started.
        await check_store(store)
        token = _token(arguments, os.environ, data_dir(arguments))
        if isinstance(token, _Refusal):
            return fail(token.message, EXIT_USAGE)
        host: str = arguments.host
        try:
            sock = bind(host, arguments.port)
        except OSError as error:
            return fail(
                f"cannot listen on {host}:{arguments.port} ({error.strerror or error}); "
                "choose another --host or --port",
                EXIT_USAGE,
            )
        with sock:
            await _serve(
                arguments, store, sock, token=token, config=config, place=store_url(location)
            )
    return EXIT_OK


async def _serve(
    arguments: argparse.Namespace,
    store: SessionStore,
    sock: socket.socket,
    *,
    token: str | None,
    config: ModelConfig | None,
    place: str,
) -> None:
    from session_schedule.web.app import create_app  # noqa: PLC0415
    from session_schedule.web.live import LiveLimits  # noqa: PLC0415
    from session_schedule.web.security import access_policy  # noqa: PLC0415
    from session_schedule.web.server import Limits, OverlayServer  # noqa: PLC0415

    async with connect(config) as connection:
        app = create_app(
            store,
            model=_factory(connection.model),
            policy=access_policy(arguments.host, token=token),
            settings=schedule_settings(arguments),
            live_limits=LiveLimits(
                max_live=arguments.max_live,
                idle_seconds=arguments.idle_close,
                max_streams=arguments.max_pages,
            ),
        )
        _announce(arguments.host, sock, token=token, config=config, place=place)
        limits = Limits(max_connections=arguments.max_connections)
        await OverlayServer(app, limits=limits).serve(sockets=[sock])


def _factory(model: Model | None) -> ModelFactory | None:
    """What the overlay calls for the model of a session (``None``: offline mode)."""
    if model is None:
        return None
    return lambda: model


def _announce(
    host: str,
    sock: socket.socket,
    *,
    token: str | None,
    config: ModelConfig | None,
    place: str,
) -> None:
    from session_schedule.web.security import is_wildcard  # noqa: PLC0415

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
    else:
        print(
            "session-schedule: no access token (--no-token): every program and user of this "
            "machine can use the overlay and read its sessions",
            flush=True,
        )
    mode = f"model {config.name}" if config else "offline mode (you call the tools on the page)"
    print(f"session-schedule: {mode}; sessions in {place}", flush=True)


@dataclasses.dataclass(frozen=True, slots=True)
class _Refusal:
    message: str


def _token(
    arguments: argparse.Namespace, environ: Mapping[str, str], directory: Path
) -> str | _Refusal | None:
    """The access token to require (``None``: ``--no-token``), or why the options are refused."""
    from session_schedule.web.security import is_loopback  # noqa: PLC0415

    if arguments.no_token:
        if not is_loopback(arguments.host):
            return _Refusal(
                f"--no-token is for a loopback --host only; {arguments.host} is reachable from "
                "other machines, so it always needs the token"
            )
        return None
    source = "--token"
    token: str | None = arguments.token
    if arguments.token_file is not None:
        source = "--token-file"
        read = _read_token_file(arguments.token_file, "--token-file")
        if isinstance(read, _Refusal):
            return read
        token = read
    elif token is None and environ.get(TOKEN_VARIABLE):
        if arguments.new_token:
            return _Refusal(
                f"--new-token replaces the token kept in the data directory, but ${TOKEN_VARIABLE} "
                "is set and would be used instead; unset it, or change it to change the token"
            )
        source, token = f"${TOKEN_VARIABLE}", environ[TOKEN_VARIABLE]
    if token is None:
        return _kept_token(directory / TOKEN_FILE, renew=arguments.new_token)
    return _checked_token(token, source)


def _checked_token(token: str, source: str) -> str | _Refusal:
    if not _TOKEN.fullmatch(token):
        return _Refusal(
            f"{source} must be 1 to 256 characters: letters, digits, '-', '_', '.' or '~'"
        )
    bits = token_bits(token)
    if bits < MIN_TOKEN_BITS:
        return _Refusal(
            f"{source} is too easy to guess: about {bits} bits, and it needs at least "
            f"{MIN_TOKEN_BITS} (for example 32 random url-safe characters or 32 hex digits; "
            "python3 -c 'import secrets; print(secrets.token_urlsafe(32))' makes one), or leave "
            "it out and one is generated"
        )
    return token


def _read_token_file(path: Path, source: str) -> str | _Refusal:
    """The token in ``path``, which must be a regular file only its owner can read."""
    try:
        mode = file_mode(path)
        data = read_private(path, limit=MAX_TOKEN_FILE_BYTES) if mode is not None else None
    except OSError as error:
        return _Refusal(f"cannot read {source} {path} ({error.strerror or error})")
    if mode is None or data is None:
        return _Refusal(f"cannot read {source} {path} (No such file or directory)")
    if mode & 0o077:
        return _Refusal(
            f"{source} {path} can be read by other users (mode {mode:04o}); make it readable by "
            f"its owner only (chmod 600 {path})"
        )
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return _Refusal(f"cannot read {source} {path} (not UTF-8 text)")


def _kept_token(path: Path, *, renew: bool) -> str | _Refusal:
    """The token kept in ``path`` — generated and stored ``0600`` on the first start, or when
    ``renew`` — so a restart keeps the address an open page uses."""
    source = "the kept token"
    if not renew:
        try:
            kept = file_mode(path) is not None
        except NotPrivateFile as error:
            return _Refusal(f"cannot read {source} {path} ({error.strerror}); move it away")
        if kept:
            token = _read_token_file(path, source)
            if isinstance(token, str):
                token = _checked_token(token, f"{source} {path}")
            if isinstance(token, _Refusal):
                return _Refusal(f"{token.message}; or start with --new-token to replace it")
            return token
    token = secrets.token_urlsafe(24)
    try:
        private_directory(path.parent)
        write_private(path, f"{token}\n".encode())
    except OSError as error:
        return _Refusal(f"cannot keep the token in {path} ({error.strerror or error})")
    return token


def token_bits(token: str) -> int:
    """A conservative estimate of ``token``'s entropy, in whole bits: the length of its period
    (a token that repeats a shorter part, ``abcdefgh`` four times say, counts that part once)
    times log2 of the size of the character classes it uses — digits, lower-case letters,
    upper-case letters, ``-_.~``; hex digits alone count 16 — and 0 with fewer than 8 distinct
    characters."""
    if len(set(token)) < 8:
        return 0
    period = next(
        (shift for shift in range(1, len(token)) if token.startswith(token[shift:])), len(token)
    )
    if _HEX.fullmatch(token):
        return 4 * period
    alphabet = sum(len(chars) for chars in _CLASSES if any(c in chars for c in token))
    return math.floor(period * math.log2(alphabet))


def _positive(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def _port(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535)")
    return int(text)
