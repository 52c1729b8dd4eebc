"""dupfind: find background-job side effects that happened twice, and why."""

import os
import sys

from dupfind.lazy_import import lazy_module
from dupfind.malloc_tuning import return_large_blocks

__version__ = "0.1.0"

# polars allocates through jemalloc, which by default keeps freed pages for 10 s before giving
# them back; an analysis frees and allocates large frames stage after stage, so those pages pile
# up in the peak. Returning them after 250 ms lowered a 1M-line analyze's peak RSS by about 12 %
# at no measurable cost in time; after 120 ms, 14 MiB less again (median; 21 at the highest of
# seven runs each), for about 1.5 % more time: a read frees some 450 MB a second, and what it
# freed in the last decay period is what it holds beyond its data. Allocations of 256 KiB and
# more (a column of a 32k-row batch) come from jemalloc's arena for large ones, which returns
# freed pages at once: 17 MiB less at the peak at 1M lines, 27 MiB at 5M, in the same time. Read
# when polars loads, hence here, before anything imports it; a value the user set is kept.
DIRTY_DECAY_MS = 120
os.environ.setdefault("_RJEM_MALLOC_CONF", f"dirty_decay_ms:{DIRTY_DECAY_MS},muzzy_decay_ms:0,oversize_threshold:262144")

# polars (0.3 s to load here, most of it its 178 MB library) loads at its first use, not at its
# import: a command answered from the cache (a warm `analyze`, `stats`, `timeline` or `trace`)
# writes the stored report and never needs it. A command that loads it works on large frames and
# byte strings: glibc's malloc is told then to give large freed blocks back (dupfind.malloc_tuning).
if "polars" in sys.modules:  # loaded before dupfind (a program that uses both)
    return_large_blocks()
lazy_module("polars", before=return_large_blocks)
