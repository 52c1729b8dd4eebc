"""The progress bar on stderr (only when stderr is a terminal), what a command imports, and how the process ends."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from dupfind.config import load_config
from dupfind.ingest import ingest

from conftest import FIXTURES, ROOT, run_cli

LOGS = FIXTURES / "synth" / "deploy-overlap" / "logs"


def _with_terminal_stderr(*args: str, script: str | None = None, env: dict | None = None,
                          ) -> tuple[subprocess.CompletedProcess, bytes]:
    """Run dupfind (or a Python `script`) with stderr on a pseudo-terminal (stdout a pipe): the
    process and what the terminal got."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm", **(env or {})}
    command = [sys.executable, "-c", script] if script is not None else [sys.executable, "-m", "dupfind", *args]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=slave,
                            stdin=subprocess.DEVNULL, cwd=ROOT, env=env)
    os.close(slave)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the other end closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read)
    reader.start()
    stdout, _ = proc.communicate(timeout=300)
    reader.join(timeout=10)
    os.close(master)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, b""), b"".join(chunks)


def test_a_terminal_gets_a_progress_bar_and_the_report_is_the_same():
    proc, terminal = _with_terminal_stderr("analyze", str(LOGS), "--format", "json", "--no-cache")
    assert proc.returncode == 0
    assert b"reading logs" in terminal and b"kB" in terminal  # bytes read of the total
    plain = run_cli("analyze", str(LOGS), "--format", "json", "--no-cache")
    assert orjson.loads(proc.stdout) == orjson.loads(plain.stdout)
    assert b"reading logs" not in plain.stderr and b"\x1b" not in plain.stderr  # not a terminal: no bar


def test_a_terminal_is_told_the_output_is_complete_while_the_cache_is_saved(tmp_path):
    """Cache writes after the output (20 s at 5M lines) show a transient line on a terminal, so
    the wait is not mistaken for the report still coming; writes shorter than the delay (a warm
    run's) show none."""
    script = (
        "import sys, time\nimport dupfind.result_cache as rc\nfrom dupfind import cli\n"
        "cli.SAVING_STATUS_DELAY_S = 0.0\n"
        "store = rc.ResultCache.store_set\n"
        "def slow(*a, **k):\n    time.sleep(1)\n    return store(*a, **k)\n"
        "rc.ResultCache.store_set = slow\n"
        f"sys.argv = ['dupfind', 'analyze', {str(LOGS)!r}, '--format', 'json']\ncli.run()\n"
    )
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    first, terminal = _with_terminal_stderr(script=script, env=env)
    assert first.returncode == 0 and b"output complete; saving the cache" in terminal
    assert first.stdout == run_cli("analyze", str(LOGS), "--format", "json", "--no-cache").stdout
    warm, terminal = _with_terminal_stderr("analyze", str(LOGS), "--format", "json", env=env)
    assert warm.returncode == 0 and warm.stdout == first.stdout and b"saving the cache" not in terminal
    piped = run_cli("analyze", str(LOGS), "--format", "json", env={"DUPFIND_CACHE_DIR": str(tmp_path / "other")})
    assert piped.returncode == 0 and piped.stderr == b""  # not a terminal: nothing


def test_a_terminal_is_told_which_step_runs_after_the_reading_bar(tmp_path):
    """Correlation and the detectors (10 s each at 5M lines) each show a transient line once they
    have run status_line.DELAY_S (0 here); a run answered from the cache runs neither and shows
    neither, and a piped stderr gets nothing."""
    script = (  # each step made to last long enough for its line to be drawn
        "import sys, time\nimport dupfind.analyze, dupfind.correlate\nfrom dupfind import cli, status_line\n"
        "status_line.DELAY_S = 0.0\n"
        "def slow(step):\n    def run(*a, **k):\n        time.sleep(0.5)\n        return step(*a, **k)\n    return run\n"
        "dupfind.correlate.correlate = slow(dupfind.correlate.correlate)\n"
        "dupfind.analyze.analyze = slow(dupfind.analyze.analyze)\n"
        "sys.argv = ['dupfind', *ARGS]\ncli.run()\n"
    )
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    args = ["analyze", str(LOGS), "--format", "json"]
    first, terminal = _with_terminal_stderr(script=script.replace("ARGS", repr(args)), env=env)
    assert first.returncode == 0
    records = ingest([str(LOGS)], load_config(cwd=Path("/"))).table.height
    assert f"correlating {records} records into actions and executions".encode() in terminal
    assert b"detection rules and gathering their evidence" in terminal
    assert first.stdout == run_cli(*args, "--no-cache").stdout
    warm, terminal = _with_terminal_stderr(script=script.replace("ARGS", repr(args)), env=env)
    assert warm.stdout == first.stdout and b"correlating" not in terminal and b"detection rules" not in terminal
    piped = run_cli(*args, "--no-cache")
    assert piped.returncode == 0 and piped.stderr == b""


def test_a_transient_line_or_bar_leaves_standard_output_where_it_goes():
    """rich's own status and progress lines swap sys.stdout for a proxy that prints to their
    console (stderr, the terminal) while they show; dupfind's leave it alone, so what a command
    writes meanwhile still reaches its output."""
    script = (
        "import sys, time\nfrom dupfind import status_line\nstatus_line.DELAY_S = 0.0\n"
        "with status_line.DelayedStatus('working on it'):\n"
        "    time.sleep(0.3)\n    print('the output', flush=True)\n    time.sleep(0.2)\n"
    )
    proc, terminal = _with_terminal_stderr(script=script)
    assert proc.returncode == 0 and b"working on it" in terminal
    assert proc.stdout == b"the output\n" and b"the output" not in terminal
    bar = (  # the reading bar, the same way
        "import time\nfrom dupfind.cli_common import progress_console\nfrom dupfind.pipeline import progress_for\n"
        f"progress, advance = progress_for([{str(LOGS)!r}], progress_console())\n"
        "with progress:\n    advance(1000)\n    time.sleep(0.3)\n    print('the output', flush=True)\n    time.sleep(0.2)\n"
    )
    proc, terminal = _with_terminal_stderr(script=bar)
    assert proc.returncode == 0 and b"reading logs" in terminal
    assert proc.stdout == b"the output\n" and b"the output" not in terminal


def _run_and_tell(args: list[str], question: str, env: dict | None = None) -> tuple[bytes, str]:
    """Run `dupfind ARGS` to its end in a fresh interpreter: (its stdout, the value of the Python
    expression `question` after it)."""
    script = (
        "import sys\nfrom dupfind.cli import main\n"
        f"sys.argv = ['dupfind', *{args!r}]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code in (0, None), exc.code\n"
        f"sys.stdout.flush()\nsys.stderr.write('answer: %s\\n' % ({question}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, cwd=ROOT, timeout=300, check=False,
                          env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout, proc.stderr.decode().splitlines()[-1].removeprefix("answer: ")


def _loads_rich(*args: str) -> bool:
    """Whether `dupfind ARGS LOGS --no-cache` (run to the end in a fresh interpreter) imports rich."""
    _, loaded = _run_and_tell([*args, str(LOGS), "--no-cache"],
                              "any(m == 'rich' or m.startswith('rich.') for m in sys.modules)")
    return loaded == "True"


@pytest.mark.parametrize("args", [
    ("analyze", "--format", "json"),
    ("stats", "--format", "json"),
    ("timeline", "--format", "json"),
    ("trace", "ord_5048923", "--format", "json"),
])
def test_machine_output_does_not_import_rich(args):
    """rich (15 ms of a command's start) is imported by the terminal views and the progress bar
    only: a JSON command piped into another program never loads it."""
    assert not _loads_rich(*args)


def test_the_terminal_view_does_load_rich():
    assert _loads_rich("analyze")


POLARS_LOADED = "__import__('dupfind.lazy_import').lazy_import.is_loaded('polars')"


@pytest.mark.parametrize("args", [
    ("analyze", "--format", "json"),
    ("analyze", "--format", "markdown"),
    ("stats", "--format", "json"),
    ("timeline", "--format", "json"),
    ("trace", "ord_5048923", "--format", "json"),
])
def test_a_command_answered_from_the_cache_does_not_load_polars(tmp_path, args):
    """polars takes 0.3 s to load, most of a warm command over many small files: a command whose
    report is stored writes it without loading polars. The first run (which stores it) and a run
    without the cache do load it, and all three give the same bytes."""
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    command = [*args, str(LOGS)]
    first, first_loaded = _run_and_tell(command, POLARS_LOADED, env)
    warm, warm_loaded = _run_and_tell(command, POLARS_LOADED, env)
    cold, cold_loaded = _run_and_tell([*command, "--no-cache"], POLARS_LOADED, env)
    assert (first_loaded, warm_loaded, cold_loaded) == ("True", "False", "True")
    assert warm == first and len(warm) > 1000
    if args[0] != "analyze" or args[-1] != "markdown":  # the ticket names its command line, which differs
        assert cold == first


def test_the_process_ends_with_all_its_output_written(tmp_path):
    """run() ends the process without the interpreter's teardown: what it wrote to a pipe is whole,
    as --output writes it, and the exit status is the command's."""
    proc = run_cli("analyze", str(LOGS), "--format", "json", "--no-cache", "--output", str(tmp_path / "report.json"))
    assert proc.returncode == 0
    piped = run_cli("analyze", str(LOGS), "--format", "json", "--no-cache")
    assert piped.returncode == 0 and piped.stderr == b""
    assert len(piped.stdout) > 65536 and piped.stdout == (tmp_path / "report.json").read_bytes()
    failed = run_cli("analyze", str(LOGS), "--format", "json", "--no-cache", "--fail-on", "high")
    assert failed.returncode == 1 and failed.stdout == piped.stdout
    missing = run_cli("analyze", str(tmp_path / "nothing-here"))
    assert missing.returncode == 2 and missing.stderr.count(b"\n") == 1 and missing.stderr.startswith(b"dupfind: error:")


@pytest.mark.parametrize("cache", [False, True])
def test_a_closed_pipe_ends_the_command_quietly(tmp_path, cache):
    """`dupfind analyze ... | head -c 10`: the reader leaves early; exit 0, nothing on stderr. The
    report meets the closed pipe while it is rendered: with the cache on, the part written is not
    stored as the report, and the next run writes the whole report."""
    env = {**os.environ, "DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "dupfind", "analyze", str(LOGS), "--format", "json", *([] if cache else ["--no-cache"])]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    assert len(proc.stdout.read(10)) == 10
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=300) == 0
    assert stderr == b""
    if cache:
        def stored_reports() -> list:  # beside the timeline's views analyze draws for the next command
            return [p for p in (tmp_path / "cache").rglob("*.out") if b'"verdict_reason"' in p.read_bytes()]

        assert not stored_reports()
        whole = subprocess.run(command, capture_output=True, cwd=ROOT, env=env, timeout=300)
        cold = run_cli("analyze", str(LOGS), "--format", "json", "--no-cache")
        assert whole.returncode == 0 and whole.stdout == cold.stdout
        assert len(stored_reports()) == 1


def test_the_report_reader_gets_its_end_of_file_before_the_cache_writes(tmp_path):
    """A first run stores its cache after the report: `dupfind analyze | jq` sees the end of the
    report then, not when the process ends (cache writes made slow here to tell them apart)."""
    script = (
        "import sys, time\nimport dupfind.result_cache as rc\nfrom dupfind.cli import run\n"
        "store = rc.ResultCache.store_set\n"
        "def slow(*a, **k):\n    time.sleep(3)\n    return store(*a, **k)\n"
        "rc.ResultCache.store_set = slow\n"
        f"sys.argv = ['dupfind', 'analyze', {str(LOGS)!r}, '--format', 'json']\nrun()\n"
    )
    env = {**os.environ, "DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=ROOT, env=env)
    report = proc.stdout.read()  # to its end of file
    assert proc.poll() is None  # still writing its cache
    assert proc.wait(timeout=300) == 0 and proc.stderr.read() == b""
    assert report == run_cli("analyze", str(LOGS), "--format", "json", "--no-cache").stdout
    assert list((tmp_path / "cache" / "sets").glob("*/meta.json"))  # the cache was written after all
    warm = run_cli("analyze", str(LOGS), "--format", "json", env={"DUPFIND_CACHE_DIR": str(tmp_path / "cache")})
    assert warm.stdout == report


def test_closed_standard_streams_do_not_fail_the_command(tmp_path):
    """`dupfind ... >&- 2>&-`: Python starts without stdout and stderr; the command still writes
    --output and ends as it would (it failed with an internal error before)."""
    report = tmp_path / "report.json"

    def closing(*fds: int):
        return lambda: [os.close(fd) for fd in fds]

    args = [sys.executable, "-m", "dupfind", "analyze", str(LOGS), "--format", "json", "--no-cache"]
    proc = subprocess.run([*args, "--output", str(report)], cwd=ROOT, preexec_fn=closing(1, 2), timeout=300, check=False)
    assert proc.returncode == 0
    assert report.read_bytes() == run_cli("analyze", str(LOGS), "--format", "json", "--no-cache").stdout
    piped = subprocess.run(args, cwd=ROOT, stdout=subprocess.PIPE, preexec_fn=closing(2), timeout=300, check=False)
    assert piped.returncode == 0 and piped.stdout == report.read_bytes()
    failed = subprocess.run([*args[:4], str(tmp_path / "missing")], cwd=ROOT, preexec_fn=closing(1, 2), timeout=300,
                            check=False)
    assert failed.returncode == 2


PARSERS_LOADED = "sorted(m for m in ('dupfind.ingest', 'dupfind.normalize', 'dateutil') if m in sys.modules)"


@pytest.mark.parametrize("args", [
    ("analyze", "--format", "json"),
    ("stats", "--format", "json"),
    ("timeline", "--format", "json"),
])
def test_a_command_answered_from_the_cache_does_not_load_the_parsers(tmp_path, args):
    """The parsers (30-40 ms of imports) are loaded by a command that reads logs, not by one whose
    report is stored; dateutil only by a read with a timestamp polars cannot parse."""
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    command = [*args, str(LOGS)]
    first, first_loaded = _run_and_tell(command, PARSERS_LOADED, env)
    warm, warm_loaded = _run_and_tell(command, PARSERS_LOADED, env)
    assert "'dupfind.ingest', 'dupfind.normalize'" in first_loaded  # dateutil: only for odd timestamps
    assert warm_loaded == "[]"
    assert warm == first


WINDOWS_LOADED = "sorted(m for m in ('dupfind.windows', 'dupfind.timeline', 'dupfind.redact') if m in sys.modules)"


def test_an_analysis_answered_from_the_cache_does_not_load_the_windowed_read(tmp_path):
    """Deciding whether to read in windows (dupfind.read_plan) does not load the windowed read, the
    timeline or the redaction rules (about 18 ms of imports); a Markdown report redacts, so it does."""
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    command = ["analyze", "--format", "json", str(LOGS)]
    first, _ = _run_and_tell(command, WINDOWS_LOADED, env)
    warm, warm_loaded = _run_and_tell(command, WINDOWS_LOADED, env)
    assert warm_loaded == "[]" and warm == first
    _, markdown_loaded = _run_and_tell(["analyze", "--format", "markdown", str(LOGS)], WINDOWS_LOADED, env)
    assert "dupfind.redact" in markdown_loaded


CONFIG_WORK = (
    "sorted(m for m in sys.modules if m == 'tomllib' or m.startswith('dupfind.detectors.'))"
)


def test_a_command_over_unchanged_configuration_parses_no_toml_and_loads_no_detector(tmp_path):
    """The shipped rules' TOML parses are kept in the cache with the patterns they hold known to
    compile (dupfind.parse_memo), and a rule's detector is loaded when the rule runs: a command
    answered from the cache does neither (about 40 ms). The first run, and `--no-cache`, parse."""
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    command = ["analyze", "--format", "json", str(LOGS)]
    first, first_loaded = _run_and_tell(command, CONFIG_WORK, env)
    warm, warm_loaded = _run_and_tell(command, CONFIG_WORK, env)
    assert "'tomllib'" in first_loaded and "'dupfind.detectors.duplicate_side_effect'" in first_loaded
    assert warm_loaded == "[]" and warm == first
    _, uncached = _run_and_tell([*command, "--no-cache"], CONFIG_WORK, env)
    assert "'tomllib'" in uncached


@pytest.mark.parametrize(("argv", "built"), [
    (["formats", "--help"], ["formats"]),
    (["--help"], ["analyze", "formats", "stats", "synth", "timeline", "trace"]),
    (["anlyze", "--help"], ["analyze", "formats", "stats", "synth", "timeline", "trace"]),  # for "Did you mean"
])
def test_a_run_builds_only_the_command_it_names(monkeypatch, capsys, argv, built):
    """typer builds the click command of every registered subcommand on each run: only the named
    one is, and every one is registered again afterwards."""
    import typer.main

    from dupfind.cli import app, main

    made: list[str] = []
    real = typer.main.get_command_from_info

    def counting(*args, **kwargs):
        made.append((kwargs.get("command_info") or args[0]).callback.__name__)
        return real(*args, **kwargs)

    monkeypatch.setattr(typer.main, "get_command_from_info", counting)
    monkeypatch.setattr(sys, "argv", ["dupfind", *argv])
    everything = list(app.registered_commands)
    with pytest.raises(SystemExit) as exc:
        main()
    out = capsys.readouterr()
    assert exc.value.code == (2 if argv[0] == "anlyze" else 0), out.err
    assert sorted(made) == built
    assert app.registered_commands == everything
    shown = out.out + out.err
    assert "Usage: " in shown and ("Did you mean 'analyze'?" in shown if argv[0] == "anlyze" else "--help" in shown)
