"""`dupfind synth` from the command line: list, write, determinism, error paths."""

from __future__ import annotations

import orjson

from dupfind.synth import PRESETS


def test_list_names_every_preset_with_a_line_each(cli):
    proc = cli("synth", "--list")
    assert proc.returncode == 0
    lines = proc.stdout.decode().splitlines()
    assert [line.split()[0] for line in lines] == list(PRESETS)
    assert all(len(line.split(None, 1)[1]) > 20 for line in lines)


def test_writes_logs_and_truth_deterministically(cli, tmp_path):
    for name in ("a", "b"):
        proc = cli("synth", "lock-nonatomic", "--out", str(tmp_path / name), "--seed", "9", "--jobs", "15", "--format", "logfmt")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == b"" and b"truth.json" in proc.stderr
    a_files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert a_files and all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in a_files)
    truth = orjson.loads((tmp_path / "a" / "truth.json").read_bytes())
    assert truth["preset"] == "lock-nonatomic" and truth["seed"] == 9 and truth["counters"]["actions"] == 15
    analyzed = cli("analyze", str(tmp_path / "a" / "logs"), "--format", "json")
    flagged = sum(1 for f in orjson.loads(analyzed.stdout)["findings"] if f["harmful"])
    assert flagged == truth["counters"]["duplicated_actions"]


def test_errors(cli, tmp_path):
    for args in (["synth", "no-such-preset", "--out", str(tmp_path)], ["synth", "baseline"],
                 ["synth", "baseline", "--out", str(tmp_path), "--format", "xml"], ["synth"],
                 ["synth", "baseline", "--out", str(tmp_path), "--jobs", "0"]):
        proc = cli(*args)
        assert proc.returncode == 2, args
        assert b"Traceback" not in proc.stderr and proc.stderr.strip().count(b"\n") == 0, proc.stderr
