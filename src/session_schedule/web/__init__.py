"""The official web overlay (SPEC §2): a chat on a live Session in the browser.

General layout:

- ``app``       — the Starlette app factory: the page, the JSON API, the event streams;
- ``live``      — the Sessions kept live in the server, each running the reference chat, and
                  the fan-out of their transcript turns to the pages subscribed to them;
- ``events``    — a live Session's turns and notices as Server-Sent Events;
- ``server``    — uvicorn within connection limits and deadlines, stopping without waiting on
                  open pages;
- ``bodies``    — request body shapes and the strict, size-limited way they are read;
- ``security``  — Host, Origin and token checks, and the headers every answer carries;
- ``limits``    — token-bucket rate limits (creates and forks);
- ``problems``  — the one JSON shape of a refused request;
- ``static/``   — the page: one HTML file, one script, one style sheet (no build step).

Imports flow one way: this package uses ``harness`` and the layers below it; only ``cli`` uses it.
It needs the ``web`` extra (starlette, uvicorn): without it, importing the package raises
:class:`~session_schedule.extras.MissingExtraError` naming the command that installs it.
"""

from session_schedule.extras import require

require("web", purpose="the web overlay")  # before anything imports starlette or uvicorn

from session_schedule.web.app import OverlayApp as OverlayApp
from session_schedule.web.app import create_app as create_app
from session_schedule.web.live import LiveSession as LiveSession
from session_schedule.web.live import LiveSessions as LiveSessions
from session_schedule.web.live import ModelFactory as ModelFactory
from session_schedule.web.security import AccessPolicy as AccessPolicy
from session_schedule.web.security import access_policy as access_policy
from session_schedule.web.security import is_loopback as is_loopback
from session_schedule.web.server import OverlayServer as OverlayServer
