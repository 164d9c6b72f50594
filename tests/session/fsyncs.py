"""Which threads a session's fsyncs run on, recorded in tests."""

from __future__ import annotations

import os
import threading

import pytest


def record_fsync_threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads that call :func:`os.fsync` from now on, in order (each fsync
    still runs)."""
    threads: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        threads.append(threading.current_thread().name)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return threads
