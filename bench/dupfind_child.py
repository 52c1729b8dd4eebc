"""`dupfind ARGV` measured in this process, as the console script runs it (dupfind.cli.run); its
figures go to stderr as one marked line (see _measure.emit). Not part of dupfind.

A script of its own, importing nothing before dupfind that dupfind does not import: run as
`compare.py --child`, every measured command also paid compare.py's imports (argparse, platform,
tempfile, statistics and more), about 20 ms, a tenth of a warm run over 20,000 files.

    python bench/dupfind_child.py analyze LOGS --format json
"""

import os
import sys
import time


def main(argv: list[str]) -> None:
    t0 = time.perf_counter()
    from dupfind.cli import _exit_status
    from dupfind.cli import main as dupfind_main

    sys.argv = ["dupfind", *argv]
    try:
        dupfind_main(release_output=True)
        code = 0
    except SystemExit as exc:
        code = _exit_status(exc.code)
    seconds = time.perf_counter() - t0
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    from _measure import emit, rss_hwm_mb  # once timed: what it imports, dupfind had imported

    emit({"seconds": seconds, "rss_peak_mb": rss_hwm_mb(), "exit_code": code}, sys.stderr)
    os._exit(code)  # as dupfind.cli.run: no interpreter teardown


if __name__ == "__main__":
    main(sys.argv[1:])
