"""The walkthrough's output is frozen by a snapshot: it runs in virtual time, so it never varies.

Regenerate after a deliberate change with ``SESSION_SCHEDULE_UPDATE_SNAPSHOTS=1``.
"""

from __future__ import annotations

import os
from pathlib import Path

from session_schedule.cli import walkthrough

SNAPSHOT = Path(__file__).parent / "snapshots" / "walkthrough.txt"


def test_walkthrough_matches_the_snapshot() -> None:
    lines: list[str] = []
    walkthrough.run(lines.append)
    rendered = "\n".join(lines) + "\n"
    if os.environ.get("SESSION_SCHEDULE_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(rendered, encoding="utf-8")
    assert rendered == SNAPSHOT.read_text(encoding="utf-8")


def test_daily_rules_keep_their_wall_time_across_the_changes() -> None:
    lines: list[str] = []
    walkthrough.run(lines.append)
    text = "\n".join(lines)
    assert "kind: daily (09:00 Asia/Tokyo, mon tue wed thu fri)" in text
    assert (
        "2027-03-14 02:30  ->  2027-03-14T03:00:00.000-04:00  =  2027-03-14T07:00:00.000Z  "
        "(a gap: fires as the clocks jump)"
    ) in text
    assert (
        "2027-11-07 01:30  ->  2027-11-07T01:30:00.000-04:00  =  2027-11-07T05:30:00.000Z  "
        "(an overlap: the earlier instant, once; not 2027-11-07T06:30:00.000Z)"
    ) in text
