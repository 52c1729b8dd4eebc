"""Measurement helpers shared by the benchmark scripts in bench/ (not part of dupfind).

* Every measurement runs in a fresh process started by `run`, with a timeout.
* A Python child reports its own peak RSS with `rss_hwm_mb` (VmHWM from /proc/self/status) and
  hands its figures back as one marked JSON line (`emit`) on stdout or stderr.
* A non-Python command can be wrapped in GNU time (`gnu_time_prefix`): time forks the command
  itself, so the peak RSS it reports is the command's own (see `rss_hwm_mb` for why a Python
  parent cannot simply read `ru_maxrss` of its children).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import orjson

CHILD_MARK = "@@BENCH@@ "


def rss_hwm_mb() -> float:
    """This process's peak RSS so far, in MB (MiB, as ps and top count it).

    VmHWM belongs to the process's own address space, which execve creates afresh, so it is
    exact per run. ru_maxrss is not: Linux carries the parent's RSS at fork/vfork time over
    into the child's ru_maxrss across exec, so a child of a fat parent would report the parent.
    """
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def emit(result: dict, stream=None) -> None:
    """Print a child's result as one marked JSON line (stdout unless told otherwise)."""
    stream = stream or sys.stdout
    stream.write(CHILD_MARK + orjson.dumps(result, option=orjson.OPT_NON_STR_KEYS).decode() + "\n")
    stream.flush()


def parse_marks(text: str) -> dict:
    """Merge every marked JSON line found in a child's output."""
    found: dict = {}
    for line in text.splitlines():
        if line.startswith(CHILD_MARK):
            try:
                found.update(orjson.loads(line[len(CHILD_MARK):]))
            except orjson.JSONDecodeError:
                pass
    return found


GNU_TIME = "/usr/bin/time"


def gnu_time_prefix() -> list[str] | None:
    """`/usr/bin/time -f <mark>` reporting the wrapped command's peak RSS (KiB) and wall time on
    stderr as a marked line; None when GNU time is not installed."""
    if not (os.path.isfile(GNU_TIME) and os.access(GNU_TIME, os.X_OK)):
        return None
    return [GNU_TIME, "-f", CHILD_MARK + '{"rss_peak_kb": %M, "time_elapsed_s": %e, "time_status": %x}']


def run(cmd: list[str], *, cwd: Path | str | None = None, timeout: float = 1800, env: dict | None = None,
        stdout_path: Path | None = None, first_byte: bool = False) -> dict:
    """Run one measurement in a fresh process; return its wall time, exit status and marks.

    The child gets its own session, so a timeout kills it and anything it started (GNU time's
    child, for example). stdout goes to `stdout_path` when given (a report to keep), else it is
    captured; marked lines are read from captured stdout and from stderr. With `first_byte` (and a
    `stdout_path`), stdout is copied through this process and `first_byte_seconds` says when the
    report began to arrive (a first run with the cache on shows it before its cache writes).

    The wall time ends when the child is reaped, by a thread blocked in waitpid. A wait with a
    timeout polls instead, sleeping up to 50 ms between looks: a warm run of 0.2 s measured
    0.27 s that way.
    """
    with open(stdout_path or os.devnull, "wb") as out_fh:
        relay = first_byte and stdout_path is not None
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE if relay or not stdout_path else out_fh,
                                stderr=subprocess.PIPE, cwd=cwd, env=env, start_new_session=True)
        first: list[float] = []
        out, err, ended, timed_out = _collected(proc, out_fh if relay else None, timeout,
                                                lambda: first.append(time.perf_counter() - t0))
    wall = ended - t0
    stdout = (out or b"").decode(errors="replace")
    stderr = (err or b"").decode(errors="replace")
    res: dict = {"proc_seconds": wall, "exit": proc.returncode, "stdout": stdout, "stderr": stderr}
    if first:
        res["first_byte_seconds"] = first[0]
    res.update(parse_marks(stdout))
    res.update(parse_marks(stderr))
    if timed_out:
        res["timed_out"] = True
        res["error"] = f"killed after the timeout of {timeout:.0f} s"
    elif proc.returncode != 0:
        tail = "\n".join(line for line in stderr.splitlines() if not line.startswith(CHILD_MARK))
        res["error"] = tail.strip()[-6000:] or f"exit status {proc.returncode}"
    return res


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group `run` created for the child
    except ProcessLookupError:
        pass


def _collected(proc: subprocess.Popen, relay_to, timeout: float,
               on_first: Callable[[], None]) -> tuple[bytes, bytes, float, bool]:
    """Read the child's pipes on threads until it exits: its stdout copied to `relay_to` (calling
    `on_first` at its first bytes) or kept, its stderr kept. (stdout kept, stderr, when the child
    was reaped by perf_counter, whether the timeout killed it)."""
    out: list[bytes] = []
    err: list[bytes] = []
    ended: list[float] = []

    def copy() -> None:
        while chunk := proc.stdout.read1(1 << 20):
            if relay_to.tell() == 0:
                on_first()
            relay_to.write(chunk)

    def reap() -> None:
        proc.wait()  # no timeout: a blocking waitpid, which returns as the child exits
        ended.append(time.perf_counter())

    readers = [threading.Thread(target=lambda: err.append(proc.stderr.read()))]
    if proc.stdout is not None:
        readers.append(threading.Thread(target=copy if relay_to is not None else lambda: out.append(proc.stdout.read())))
    waiter = threading.Thread(target=reap, daemon=True)
    for thread in (*readers, waiter):
        thread.start()
    waiter.join(timeout)
    timed_out = waiter.is_alive()
    if timed_out:
        _kill_group(proc)
        waiter.join()
    for thread in readers:
        thread.join()
    return b"".join(out), b"".join(err), ended[0], timed_out


def fmt_rate(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.0f}k"


def dupfind_revision() -> str:
    """Which dupfind is measured: the checkout's commit, and whether dupfind/ has local edits."""
    import importlib.util

    spec = importlib.util.find_spec("dupfind")  # locates the package without importing polars
    if spec is None or not spec.origin:
        return "dupfind: not importable"
    pkg = Path(spec.origin).parent
    if shutil.which("git") is None:
        return f"dupfind at {pkg}"
    try:
        head = subprocess.run(["git", "-C", str(pkg), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(pkg), "status", "--porcelain", "--", "."],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"dupfind at {pkg} (not a git checkout)"
    return f"dupfind {head}{' + uncommitted edits in dupfind/' if dirty else ''} ({pkg})"


def compile_package(pkg: Path | None = None) -> str:
    """Compile dupfind's sources to bytecode, as `pip install` does, so that no measured run spends
    its first tenth of a second compiling them (an editable checkout under PYTHONDONTWRITEBYTECODE=1
    never keeps its bytecode). Returns a line for the report."""
    import compileall
    import importlib.util

    if pkg is None:
        spec = importlib.util.find_spec("dupfind")
        if spec is None or not spec.origin:
            return "bytecode: dupfind is not importable"
        pkg = Path(spec.origin).parent
    ok = compileall.compile_dir(str(pkg), quiet=1)
    return f"bytecode: {pkg} compiled, as pip install does" if ok else f"bytecode: compiling {pkg} failed"


def dupfind_state() -> str:
    """A fingerprint of the dupfind/ sources (committed tree plus uncommitted edits), to notice a
    change while a benchmark runs; '' when it cannot be taken."""
    import hashlib
    import importlib.util

    spec = importlib.util.find_spec("dupfind")
    if spec is None or not spec.origin or shutil.which("git") is None:
        return ""
    pkg = str(Path(spec.origin).parent)
    try:
        tree = subprocess.run(["git", "-C", pkg, "rev-parse", "HEAD:./"], capture_output=True, check=True).stdout
        diff = subprocess.run(["git", "-C", pkg, "diff", "HEAD", "--", "."], capture_output=True, check=True).stdout
        new = subprocess.run(["git", "-C", pkg, "ls-files", "--others", "--exclude-standard", "--", "."],
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""
    return hashlib.sha256(tree + diff + new).hexdigest()
