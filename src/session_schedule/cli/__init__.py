"""The ``session-schedule`` program."""
