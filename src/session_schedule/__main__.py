"""``python -m session_schedule`` runs the ``session-schedule`` command."""

from __future__ import annotations

import sys

from session_schedule.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
