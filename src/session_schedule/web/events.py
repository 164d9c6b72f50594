"""The event stream of one live Session, as Server-Sent Events.

``turn`` events carry a :class:`~session_schedule.web.live.TurnView` and the turn's log position
as the event id, so a reconnecting ``EventSource`` (which sends ``Last-Event-ID``) resumes right
after the last turn it saw. ``notice`` events carry a problem to show (never stored, no id). A
comment line is sent when nothing happened for a while, so dead connections are noticed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final

import msgspec

from session_schedule.web.live import LiveSession, StreamItem, SubscriptionClosed, TurnView

RETRY_MILLISECONDS: Final = 2000
_encoder = msgspec.json.Encoder()


async def event_stream(
    live: LiveSession, start: int, *, heartbeat_seconds: float
) -> AsyncIterator[bytes]:
    """Every turn from log position ``start`` on, then each event as it happens, until the
    Session's streams are closed."""
    backlog, subscription = live.subscribe(start)
    try:
        yield f"retry: {RETRY_MILLISECONDS}\n\n".encode()
        for turn in backlog:
            yield encode_event(turn)
        while True:
            try:
                item = await subscription.next(heartbeat_seconds)
            except SubscriptionClosed:
                return
            yield b": keep-alive\n\n" if item is None else encode_event(item)
    finally:
        live.unsubscribe(subscription)


def encode_event(item: StreamItem) -> bytes:
    """One SSE event; the JSON is on one line (newlines in text are escaped by JSON)."""
    data = _encoder.encode(item)
    if isinstance(item, TurnView):
        return b"id: %d\nevent: turn\ndata: %s\n\n" % (item.position, data)
    return b"event: notice\ndata: %s\n\n" % data
