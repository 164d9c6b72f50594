"""How long the overlay's body nesting check takes on the worst 64 KiB bodies it can be sent.

    python3 dev.py bench body_nesting [--runs N]

The check runs on the event loop before a body is decoded, so its time is time the whole server
(every session's delivery) waits. Each body is the largest the overlay accepts
(``MAX_BODY_BYTES``); the figures are the median and the maximum over N runs of the check alone,
and of the whole decode (``decode_json``, which refuses or accepts the body).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import time
from collections.abc import Callable

from session_schedule.tools.nesting import json_depth
from session_schedule.web.bodies import MAX_BODY_BYTES, PromptBody, decode_json
from session_schedule.web.problems import HttpProblem


def bodies() -> dict[str, bytes]:
    size = MAX_BODY_BYTES
    return {
        "escaped quotes, unterminated": (b'"' + b'\\"' * size)[:size],
        "escaped quotes in a prompt": b'{"text": "'
        + b'\\"' * ((size - 32) // 2)
        + b'", "zone": null}',
        "brackets only": b"[" * (size // 2) + b"]" * (size // 2),
        "quotes only": b'"' * size,
        "backslashes in a string": (b'"' + b"\\" * (size - 2) + b'"'),
        "plain text prompt": b'{"text": "' + b"a" * (size - 32) + b'", "zone": null}',
    }


def timed(action: Callable[[], object], runs: int) -> list[float]:
    times: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return times


def decode(body: bytes) -> None:
    with contextlib.suppress(HttpProblem):
        decode_json(body, PromptBody)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    runs: int = parser.parse_args().runs
    print(f"{'body (64 KiB)':<32} {'scan median':>12} {'scan max':>10} {'decode max':>11}")
    for name, body in bodies().items():
        if len(body) > MAX_BODY_BYTES:
            raise SystemExit(f"{name}: {len(body)} bytes, more than the overlay accepts")
        scan = timed(functools.partial(json_depth, body), runs)
        whole = timed(functools.partial(decode, body), runs)
        print(
            f"{name:<32} {statistics.median(scan) * 1000:>9.2f} ms {max(scan) * 1000:>7.2f} ms "
            f"{max(whole) * 1000:>8.2f} ms"
        )


if __name__ == "__main__":
    main()
