"""The lines' CRC-32: zlib-ng's with the ``speedups`` extra, the standard library's without, and
the same function either way."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zlib

from hypothesis import given
from hypothesis import strategies as st

from session_schedule.session import crc


@given(st.binary(max_size=4096), st.integers(min_value=0, max_value=2**32 - 1))
def test_the_crc_is_zlibs_whichever_computes_it(data: bytes, start: int) -> None:
    assert crc.crc32(data) == zlib.crc32(data)
    assert crc.crc32(data, start) == zlib.crc32(data, start)


def test_the_development_install_has_the_speedups() -> None:
    # `dev.py setup` installs `.[all]`, which holds `speedups`: the suite runs the fast path.
    assert crc.SPEEDUPS


def test_without_zlib_ng_a_session_is_written_and_read_back_with_the_standard_library() -> None:
    script = textwrap.dedent(
        """
        import asyncio, sys, tempfile
        sys.modules["zlib_ng"] = None  # as if the speedups extra were not installed

        from session_schedule.session import JsonlSessionStore, crc
        from session_schedule.testing import FakeClock

        async def main() -> None:
            with tempfile.TemporaryDirectory() as directory:
                store = JsonlSessionStore(directory)
                handle = await store.create(now=FakeClock("2026-01-01T00:00:00.000Z").now())
                handle.append("message", {"role": "user", "origin": "person", "content": "hello",
                                          "at": "2026-01-01T00:00:00.000Z"})
                await handle.barrier()
                await handle.close()
                snapshot = await store.read(handle.id)
                print(crc.SPEEDUPS, crc.crc32.__module__, len(snapshot.entries))

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout == "False zlib 1\n"
