"""`dupfind formats` from the command line: both output formats and every error path."""

from __future__ import annotations

import json

import orjson

from conftest import FIXTURES

DIRTY = FIXTURES / "formats" / "ndjson-dirty" / "logs"
WORKERS = FIXTURES / "formats" / "ndjson-workers" / "logs"

CONTRACT_FILE_KEYS = {"path", "format", "compression", "lines", "parsed", "blank", "rejected", "first_ts", "last_ts", "fields", "unmapped_events"}


def test_version(cli):
    proc = cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.decode().startswith("dupfind ")


def test_help_on_every_command(cli):
    for args in (["--help"], ["formats", "--help"]):
        proc = cli(*args)
        assert proc.returncode == 0, args
        assert b"Usage" in proc.stdout


def test_json_contract(cli):
    proc = cli("formats", str(WORKERS), str(DIRTY), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = orjson.loads(proc.stdout)
    assert doc["schema"] == "1"
    assert len(doc["files"]) == 3
    for entry in doc["files"]:
        assert CONTRACT_FILE_KEYS <= set(entry)
        assert entry["lines"] == entry["parsed"] + entry["blank"] + sum(entry["rejected"].values())
    totals = doc["totals"]
    assert totals["lines"] == sum(f["lines"] for f in doc["files"])
    assert totals["rejected_total"] == sum(sum(f["rejected"].values()) for f in doc["files"])
    dirty = next(f for f in doc["files"] if f["path"].endswith("worker-dirty.ndjson"))
    assert dirty["rejected"]["invalid_json"] == 1
    assert dirty["rejected_examples"]["invalid_json"].endswith("worker-dirty.ndjson:6")
    workers = next(f for f in doc["files"] if f["path"].endswith("notifier-worker-1.ndjson"))
    assert workers["unmapped_events"] == {"heartbeat": 1}
    assert workers["fields"]["job_id"] == ["job_id"]
    assert proc.stderr == b""


def test_table_output_names_files_and_rejects(cli):
    proc = cli("formats", str(DIRTY), "--config", str(DIRTY.parent / "dupfind.toml"))
    assert proc.returncode == 0
    out = proc.stdout.decode()
    assert "worker-dirty.ndjson" in out
    assert "invalid_json" in out and "line_too_long" in out


def test_log_text_cannot_inject_terminal_escapes_or_markup(cli, tmp_path):
    evil = tmp_path / "evil.log"
    evil.write_text(
        '{"ts":"2026-07-21T10:00:00Z","event":"\\u001b]0;pwned\\u0007\\u001b[2J[bold red]x[/]","job_id":"a"}\n'
    )
    proc = cli("formats", str(evil))
    assert proc.returncode == 0
    assert b"\x1b" not in proc.stdout and b"\x07" not in proc.stdout
    assert b"\\x1b" in proc.stdout
    assert b"[bold red]x[/]" in proc.stdout


def test_rejects_file_lists_every_rejected_line(cli, tmp_path):
    target = tmp_path / "rejects.ndjson"
    proc = cli("formats", str(DIRTY), "--rejects", str(target), "--config", str(DIRTY.parent / "dupfind.toml"))
    assert proc.returncode == 0
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    # Lines 4-5, the traceback printed after the record on line 3, go on with it.
    assert [r["line"] for r in rows] == [6, 7, 8, 9, 10, 15]
    assert {r["reason"] for r in rows} >= {"invalid_json", "no_timestamp", "line_too_long", "unknown_format"}
    by_line = {r["line"]: r for r in rows}
    assert by_line[15]["text"].startswith("/entrypoint.sh: line 12:")
    assert by_line[8]["text"].startswith('{"level":"info"')


def test_rejects_to_stdout_is_refused_in_one_sentence(cli, tmp_path):
    """`--rejects -` would write the rejected lines into the report on stdout (it wrote a file named `-`)."""
    proc = cli("analyze", str(DIRTY), "--rejects", "-", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr.decode().count("\n") == 1 and "--rejects -" in proc.stderr.decode()
    assert not (tmp_path / "-").exists()


def test_strict_exits_2_when_lines_are_rejected(cli):
    proc = cli("formats", str(DIRTY), "--strict")
    assert proc.returncode == 2
    assert b"rejected" in proc.stderr
    assert b"Traceback" not in proc.stderr
    ok = cli("formats", str(WORKERS), "--strict")
    assert ok.returncode == 0


def test_stdin(cli):
    data = (WORKERS / "notifier-worker-1.ndjson").read_bytes()
    proc = cli("formats", "-", "--format", "json", stdin=data)
    assert proc.returncode == 0, proc.stderr
    doc = orjson.loads(proc.stdout)
    assert doc["files"][0]["path"] == "-"
    assert doc["files"][0]["records"] == 8


def _one_line_error(proc):
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert "Traceback" not in err
    assert proc.stdout == b""
    return err


def test_error_missing_path(cli):
    err = _one_line_error(cli("formats", "/no/such/dir"))
    assert err.count("\n") == 1 and "does not exist" in err


def test_error_empty_file(cli, tmp_path):
    (tmp_path / "empty.log").write_bytes(b"")
    err = _one_line_error(cli("formats", str(tmp_path / "empty.log")))
    assert "empty" in err


def test_error_empty_directory(cli, tmp_path):
    err = _one_line_error(cli("formats", str(tmp_path)))
    assert "no files" in err


def test_error_unreadable_file(cli, tmp_path):
    import os

    target = tmp_path / "secret.log"
    target.write_text("x=1 y=2\n")
    target.chmod(0)
    if os.access(target, os.R_OK):  # running as root: permissions do not apply
        target.unlink()
        target.mkdir()  # a directory named like a file with nothing inside
        err = _one_line_error(cli("formats", str(target)))
        assert "no files" in err
    else:
        err = _one_line_error(cli("formats", str(target)))
        assert "cannot be read" in err


def test_error_bad_config_names_file_and_key(cli, tmp_path):
    cfg = tmp_path / "dupfind.toml"
    cfg.write_text('[aliases]\njobid = ["x"]\n')
    err = _one_line_error(cli("formats", str(WORKERS), "--config", str(cfg)))
    assert "dupfind.toml" in err and "aliases.jobid" in err
    cfg.write_text("[aliases\n")
    err = _one_line_error(cli("formats", str(WORKERS), "--config", str(cfg)))
    assert "not valid TOML" in err


def test_error_bad_since(cli):
    err = _one_line_error(cli("formats", str(WORKERS), "--since", "last tuesday"))
    assert "--since" in err


def test_user_config_extends_aliases_and_vocabulary(cli, tmp_path):
    log = tmp_path / "logs" / "custom.log"
    log.parent.mkdir()
    log.write_text('{"when":"2026-07-21T10:00:00Z","what":"sendgrid_call","payload":{"jobRef":"J-1"},"shipment":"S-9"}\n')
    (tmp_path / "dupfind.toml").write_text(
        '[keys]\nbusiness = ["shipment_id"]\n'
        '[aliases]\nts = ["when"]\nname = ["what"]\njob_id = ["payload.jobRef"]\nshipment_id = ["shipment"]\n'
        '[vocabulary.kinds]\nside_effect = ["sendgrid_call"]\n'
    )
    proc = cli("formats", "logs", "--format", "json", cwd=tmp_path)  # dupfind.toml found in cwd
    assert proc.returncode == 0, proc.stderr
    entry = orjson.loads(proc.stdout)["files"][0]
    assert entry["records"] == 1
    assert entry["fields"]["job_id"] == ["payload.jobRef"]
    assert entry["fields"]["shipment_id"] == ["shipment"]
    assert entry["unmapped_events"] == {}
