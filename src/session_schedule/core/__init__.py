"""The pure core of Schedule: no clock, no I/O, no asyncio, no randomness.

Everything here is a function of its arguments: ``now`` is always a parameter and ids come from
the fold's allocator. The shell (``session``, ``runtime``, ``tools`` and the programs) injects
time and storage.
"""
