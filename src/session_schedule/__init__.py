"""session-schedule: durable, session-local reminders for LLM agents."""
