"""dupfind: find background-job side effects that happened twice, and why."""

import os

__version__ = "0.1.0"

# polars allocates through jemalloc, which by default keeps freed pages for 10 s before giving
# them back; an analysis frees and allocates large frames stage after stage, so those pages pile
# up in the peak. Returning them after 250 ms lowers a 1M-line analyze's peak RSS by about 12 %
# at no measurable cost in time. Read when polars loads, hence here, before anything imports it;
# a value the user set is kept.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:250,muzzy_decay_ms:0")
