"""glibc's malloc gives large freed blocks back once dupfind loads polars (dupfind.malloc_tuning)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from dupfind.malloc_tuning import is_glibc

pytestmark = pytest.mark.skipif(not is_glibc(), reason="glibc's malloc only")

# The start of a probe run in a fresh interpreter: glibc's statistics through `libc.mallinfo2()`.
MALLINFO = textwrap.dedent("""
    import ctypes, sys
    class Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallinfo2"):
        print("no mallinfo2"); sys.exit(0)
    libc.mallinfo2.restype = Info
""")
# Frees a 6 MiB block (glibc then raises its mmap threshold past it, unless the threshold is
# fixed), and says whether a 1 MiB block allocated next has a mapping of its own.
PROBE = MALLINFO + textwrap.dedent("""
    {setup}
    block = bytes(6 << 20)
    del block
    before = libc.mallinfo2().hblks
    kept = bytes(1 << 20)
    print("mapped" if libc.mallinfo2().hblks > before else "heap")
""")


def _probe(code: str) -> str:
    """What a probe (MALLINFO, then its own lines) prints, in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    if out == "no mallinfo2":
        pytest.skip("glibc before 2.33 has no mallinfo2")
    return out


def _where_a_large_block_goes(setup: str) -> str:
    return _probe(PROBE.format(setup=setup))


def test_untuned_glibc_carves_large_blocks_from_the_heap():
    # What the tuning is for: without it, the second block is not given back when freed.
    assert _where_a_large_block_goes("pass") == "heap"


def test_loading_polars_through_dupfind_maps_large_blocks():
    setup = "import dupfind, polars; polars.DataFrame; from dupfind import malloc_tuning; assert malloc_tuning._tuned"
    assert _where_a_large_block_goes(setup) == "mapped"


def test_dupfind_imported_after_polars_tunes_too():
    setup = "import polars; polars.DataFrame; import dupfind; from dupfind import malloc_tuning; assert malloc_tuning._tuned"
    assert _where_a_large_block_goes(setup) == "mapped"


def test_importing_dupfind_alone_leaves_malloc_as_it_is():
    # A command answered from the cache never loads polars, nor ctypes for this.
    setup = "import dupfind, dupfind.cli; from dupfind import malloc_tuning; assert not malloc_tuning._tuned"
    assert _where_a_large_block_goes(setup) == "heap"
    code = "import sys, dupfind.cli; assert 'ctypes' not in sys.modules and 'polars._plr' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_trim_heap_gives_free_heap_pages_back():
    # Untuned, a 3 MiB block freed after a 4 MiB one came from the heap and stays in it (glibc raised
    # its trim threshold too); trim_heap returns it.
    code = MALLINFO + textwrap.dedent("""
        block = bytes(4 << 20); del block
        block = bytes(3 << 20); del block
        before = libc.mallinfo2().arena
        from dupfind.malloc_tuning import trim_heap
        trim_heap()
        print(before - libc.mallinfo2().arena)
    """)
    assert int(_probe(code)) >= 2 << 20


# While files are read (reading_heap): what a block of 8 MiB freed leaves at the heap's top, and
# whether the next one comes from the heap or a mapping of its own; then the same after the read.
READING = MALLINFO + textwrap.dedent("""
    import dupfind, polars; polars.DataFrame
    from dupfind.malloc_tuning import reading_heap
    def step():
        block = bytes(8 << 20); del block
        mapped = libc.mallinfo2().hblks
        kept = bytes(8 << 20)
        where = "mapped" if libc.mallinfo2().hblks > mapped else "heap"
        del kept
        return where, libc.mallinfo2().keepcost
    with reading_heap():
        inside = step()
    trimmed = libc.mallinfo2().keepcost
    after = step()
    print(inside[0], inside[1] >= 8 << 20, after[0], trimmed < 4 << 20)
""")


def test_while_files_are_read_large_blocks_come_from_the_heap_and_its_top_is_kept():
    """Inside, an 8 MiB block after another reuses the heap's free top (no fresh pages to fault
    in); after, blocks have their mapping again and the heap's free top went back to the system."""
    assert _probe(READING).split() == ["heap", "True", "mapped", "True"]


def test_after_a_read_large_blocks_have_their_own_mapping_again(tmp_path):
    (tmp_path / "w.log").write_text('{"ts": "2026-03-02T14:00:00Z", "event": "job_started", "job_id": "j1"}\n')
    setup = (f"from dupfind.config import load_config; from dupfind.ingest import ingest; "
             f"assert ingest([{str(tmp_path)!r}], load_config(None)).table.height == 1")
    assert _where_a_large_block_goes(setup) == "mapped"
