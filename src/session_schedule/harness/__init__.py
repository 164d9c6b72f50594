"""The reference agent harness: a small, real agent loop with Schedule plugged in.

The names below are loaded on first use: the transcript rules alone do not import the agent or
the model client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from session_schedule.extras import lazy_exports

if TYPE_CHECKING:
    from session_schedule.harness.agent import ChatAgent as ChatAgent
    from session_schedule.harness.agent import ChatEvent as ChatEvent
    from session_schedule.harness.model import Model as Model
    from session_schedule.harness.model import ModelError as ModelError
    from session_schedule.harness.model import ModelReply as ModelReply
    from session_schedule.harness.model import OpenAIChatModel as OpenAIChatModel

_EXPORTS: Final = {
    "ChatAgent": "session_schedule.harness.agent",
    "ChatEvent": "session_schedule.harness.agent",
    "Model": "session_schedule.harness.model",
    "ModelError": "session_schedule.harness.model",
    "ModelReply": "session_schedule.harness.model",
    "OpenAIChatModel": "session_schedule.harness.model",
}
"""Each public name and the module that defines it."""

__all__ = [
    "ChatAgent",
    "ChatEvent",
    "Model",
    "ModelError",
    "ModelReply",
    "OpenAIChatModel",
]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
