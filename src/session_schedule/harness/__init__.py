"""The reference agent harness: a small, real agent loop with Schedule plugged in."""

from session_schedule.harness.agent import ChatAgent as ChatAgent
from session_schedule.harness.agent import ChatEvent as ChatEvent
from session_schedule.harness.model import Model as Model
from session_schedule.harness.model import ModelError as ModelError
from session_schedule.harness.model import ModelReply as ModelReply
from session_schedule.harness.model import OpenAIChatModel as OpenAIChatModel
