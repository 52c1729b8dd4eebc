"""`dupfind ARGV` measured in this process, as the console script runs it (dupfind.cli.run); its
figures go to stderr as one marked line (see _measure.emit). Not part of dupfind.

A script of its own, importing nothing dupfind does not: run as `compare.py --child`, every
measured command also paid compare.py's imports (argparse, platform, tempfile, statistics and
more), about 20 ms, a tenth of a warm run over 20,000 files.

    python bench/dupfind_child.py analyze LOGS --format json
"""

import os
import sys
import time

MARK = "@@BENCH@@ "  # _measure.CHILD_MARK


def _rss_hwm_mb() -> float:
    """VmHWM, as _measure.rss_hwm_mb reads it."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource  # not Linux: the peak as the kernel's accounting has it

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str]) -> None:
    t0 = time.perf_counter()
    import orjson  # dupfind's own dependency: loaded by it in any case

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
    figures = {"seconds": seconds, "rss_peak_mb": _rss_hwm_mb(), "exit_code": code}
    os.write(2, (MARK + orjson.dumps(figures).decode() + "\n").encode())
    os._exit(code)  # as dupfind.cli.run: no interpreter teardown


if __name__ == "__main__":
    main(sys.argv[1:])
