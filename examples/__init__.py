"""Runnable examples: one per framework adapter, each offline against the framework's test model."""
