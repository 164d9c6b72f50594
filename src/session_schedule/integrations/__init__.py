"""Framework adapters: the four tools as each framework's native tool objects, and a
conversation that runs each queued turn — the host's prompts and the reminders Schedule
delivers — as a new run on the same conversation, the history kept.

Each module needs its framework, which its extra brings; importing one without it raises
:class:`~session_schedule.extras.MissingExtraError`, one line naming the ``pip install``:

- ``integrations.pydantic_ai`` — PydanticAI (``session-schedule[pydantic-ai]``)
- ``integrations.openai_agents`` — the OpenAI Agents SDK (``session-schedule[openai-agents]``)
- ``integrations.langchain`` — LangChain tools, a LangGraph thread (``session-schedule[langchain]``)
- ``integrations.anthropic`` — the Anthropic Messages API (``session-schedule[anthropic]``)
- ``integrations.openai`` — the OpenAI Chat Completions API (``session-schedule[openai]``)

``integrations.common`` holds what they share and needs no framework. The Anthropic, OpenAI and
PydanticAI conversations keep their history in the Session's log with ``durable=True``; the
Agents SDK and LangGraph keep theirs in their own stores (a file-backed ``SQLiteSession``, a
SQLite checkpointer).
"""
