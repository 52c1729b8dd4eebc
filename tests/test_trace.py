"""`dupfind trace`: the right action for any of its ids, every record in time order, and annotations
that agree with the simulator's answer key."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import orjson
import polars as pl
import pytest

from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.trace import correlation_context, trace_ids

from conftest import FIXTURES

SYNTH = FIXTURES / "synth"
PII = FIXTURES / "scenarios" / "pii-order-confirmation" / "logs"
PRESETS = sorted(p.name for p in SYNTH.iterdir() if (p / "truth.json").is_file())


@lru_cache(maxsize=None)
def _context(preset: str):
    config = load_config(cwd=Path("/"))
    read = ingest([str(SYNTH / preset / "logs")], config)
    return correlation_context(read.table, config, texts=read.texts)


def _truth(preset: str) -> dict:
    return json.loads((SYNTH / preset / "truth.json").read_text())


def _notes(trace) -> list[str]:
    return [note for notes in trace.notes.values() for note in notes]


def _link_ids(action: dict) -> set[str]:
    return {f"{k}={v}" for k in ("job_id", "event_id", "idempotency_key") for v in action["ids"].get(k, [])}


@pytest.mark.parametrize("preset", PRESETS)
def test_every_id_of_an_action_finds_that_action_and_all_its_records(preset):
    ctx = _context(preset)
    truth = _truth(preset)
    actions = [a for a in truth["actions"] if a["duplicated"]] or truth["actions"][:5]
    for action in actions[:6]:
        keys = ("job_id", "event_id", "idempotency_key", "notification_id")
        queries = [v for k in keys for v in action["ids"].get(k, [])]
        identities = set()
        for query in queries:
            report = trace_ids(ctx, [query])
            linked = [t for t in report.traces if t.action_id is not None]
            assert len(linked) == 1, (query, [t.identity for t in report.traces])
            trace = linked[0]
            identities.add(trace.identity)
            assert _link_ids(action) <= set(trace.identity.split("|")), (query, trace.identity)
            # Every record of the action is in the trace, in time order.
            own = set(ctx.records_of(trace.action_id)["rid"].to_list())
            assert own <= {r["rid"] for r in trace.records}
            ts = [r["ts"] for r in trace.records]
            assert ts == sorted(ts)
        assert len(identities) == 1
        # An order may have several actions (confirmation, shipping notice): this one is among them.
        by_order = trace_ids(ctx, [action["order_id"]])
        assert identities <= {t.identity for t in by_order.traces}
        assert all(action["order_id"] in t.ids.get("order_id", []) for t in by_order.traces if t.action_id is not None)


@pytest.mark.parametrize("preset", PRESETS)
def test_annotations_agree_with_the_answer_key(preset):
    """Each duplicated action's trace names the turn that its truth records, and controls get no
    'second provider request' note for a side effect that happened once."""
    ctx = _context(preset)
    for action in _truth(preset)["actions"]:
        if not action["duplicated"] and not action["redeliveries"] and not action["guard_hits"]:
            continue
        report = trace_ids(ctx, [action["ids"]["job_id"][0]])
        notes = " | ".join(n for t in report.traces for n in _notes(t))
        if action["duplicated"]:
            assert "second provider request for the same idempotency key" in notes, notes
        elif action["true_count"] <= 1:
            # A repeated request is only named as such when the provider itself protected it.
            for note in notes.split(" | "):
                if note.startswith("second provider request"):
                    assert note.endswith("sent with the provider's idempotency key (done at most once)"), notes
        executions = action["executions"]
        overlapping_later = {later for _, later in action["overlapping_executions"]}
        for n, execution in enumerate(executions):
            because = execution["received_because"]
            if because == "lease_expired" and n in overlapping_later:
                assert "in flight (+" in notes, (execution, notes)
            if because == "worker_killed":
                assert "worker killed with this job in flight" in notes, notes
                assert "whose worker was killed with it in flight" in notes, notes
            if because == "retry" and executions[n - 1]["outcome"] == "db_update_failed" and execution["side_effect"]:
                assert "request succeeded: a retry repeats it" in notes, notes
        if action["double_publish"]:
            assert "second publish of the same action" in notes, notes
        if action["guard_hits"] and not action["duplicated"]:
            assert "guard held" in notes or "replay" in notes, notes


def test_redelivery_note_measures_the_gap_against_the_timeout():
    ctx = _context("visibility-timeout")
    action = next(a for a in _truth("visibility-timeout")["actions"] if a["duplicated"])
    trace = trace_ids(ctx, [action["order_id"]]).traces[0]
    received = pl.DataFrame(trace.records, infer_schema_length=None).filter(pl.col("kind") == "receive")
    second = received.filter(pl.col("attempt_shown") == 2).row(0, named=True)
    first = received.filter(pl.col("attempt_shown") == 1).row(0, named=True)
    gap = (second["ts"] - first["ts"]).total_seconds()
    assert trace.notes[second["rid"]][0] == (
        f"attempt 2 received while attempt 1 in flight (+{gap:.1f} s, close to the 30 s visibility timeout)"
    )


def test_provider_success_before_status_write_is_measured():
    config = load_config(cwd=Path("/"))
    read = ingest([str(PII)], config)
    ctx = correlation_context(read.table, config, texts=read.texts)
    trace = trace_ids(ctx, ["4514710497465075"]).traces[0]
    rows = pl.DataFrame(trace.records, infer_schema_length=None)
    result = rows.filter((pl.col("kind") == "side_effect_result") & (pl.col("attempt_shown") == 2)).row(0, named=True)
    commit = rows.filter((pl.col("kind") == "commit") & (pl.col("attempt_shown") == 2)).row(0, named=True)
    expected = f"provider success {(commit['ts'] - result['ts']).total_seconds():.2f} s before the status write"
    assert expected == "provider success 0.31 s before the status write"
    assert expected in trace.notes[result["rid"]]


def test_records_outside_the_action_join_its_story():
    """The producer's HTTP access line carries only the request id; the kill comes from the deploy log."""
    ctx = _context("deploy-overlap")
    action = next(a for a in _truth("deploy-overlap")["actions"] if "worker_killed" in a["causes"])
    trace = trace_ids(ctx, [action["ids"]["job_id"][0]]).traces[0]
    kinds = [r["kind"] for r in trace.records]
    assert "worker_killed" in kinds and "stop_signal" in kinds
    unlinked = [r for r in trace.records if r["action_id"] is None]
    assert len(unlinked) >= 2
    http = [r for r in trace.records if r["name"] == "http_access"]
    assert len(http) == 1 and http[0]["request_id"] in trace.ids["request_id"]


def test_several_ids_and_unknown_ids():
    ctx = _context("visibility-timeout")
    dup = [a for a in _truth("visibility-timeout")["actions"] if a["duplicated"]][:2]
    report = trace_ids(ctx, [dup[0]["order_id"], dup[1]["ids"]["event_id"][0], "ord_does_not_exist"])
    assert len(report.traces) == 2
    assert report.not_found == ["ord_does_not_exist"]
    starts = [t.first_ts for t in report.traces]
    assert starts == sorted(starts)


def test_column_qualified_id_searches_one_column():
    ctx = _context("visibility-timeout")
    action = next(a for a in _truth("visibility-timeout")["actions"] if a["duplicated"])
    assert trace_ids(ctx, [f"order_id={action['order_id']}"]).traces
    with pytest.raises(Exception, match="no record carries"):
        trace_ids(ctx, [f"job_id={action['order_id']}"])


# --- command line ------------------------------------------------------------------------------

def _raw_line(source: str, line: int) -> str:
    with open(source, encoding="utf-8") as fh:
        for n, text in enumerate(fh, start=1):
            if n == line:
                return text
    raise AssertionError(f"{source} has no line {line}")


def test_cli_json_cites_real_lines_in_time_order(cli):
    logs = SYNTH / "status-after-side-effect" / "logs"
    action = next(a for a in _truth("status-after-side-effect")["actions"] if a["duplicated"])
    proc = cli("trace", action["ids"]["idempotency_key"][0], str(logs), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = orjson.loads(proc.stdout)
    assert doc["not_found"] == [] and len(doc["traces"]) == 1
    trace = doc["traces"][0]
    assert trace["side_effects"][0]["duplicate"] == "certain"
    deltas = [r["delta_s"] for r in trace["records"]]
    assert deltas[0] == 0 and deltas == sorted(deltas)
    for record in trace["records"]:
        assert record["name"] in _raw_line(record["source"], record["line"])
    assert {e["attempt"] for e in trace["executions"]} == {e["attempt"] for e in action["executions"]}
    assert any("second provider request" in n for r in trace["records"] for n in r["notes"])


def test_cli_table_shows_the_story(cli):
    logs = SYNTH / "visibility-timeout" / "logs"
    action = next(a for a in _truth("visibility-timeout")["actions"] if a["duplicated"])
    proc = cli("trace", action["order_id"], str(logs))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert "received while attempt 1 in flight" in out
    assert "queue-broker.log:" in out
    assert "DUPLICATED (certain)" in out
    assert proc.stderr == b""


def test_cli_repeatable_id_option(cli):
    logs = SYNTH / "visibility-timeout" / "logs"
    dup = [a for a in _truth("visibility-timeout")["actions"] if a["duplicated"]][:2]
    proc = cli("trace", "--id", dup[0]["order_id"], "--id", dup[1]["ids"]["job_id"][0], str(logs), "-f", "json")
    assert proc.returncode == 0, proc.stderr
    assert len(orjson.loads(proc.stdout)["traces"]) == 2


def test_cli_finding_traces_the_action_of_an_analyze_finding(cli):
    logs = str(SYNTH / "deploy-overlap" / "logs")
    analysis = orjson.loads(cli("analyze", logs, "--format", "json").stdout)
    finding = next(f for f in analysis["findings"] if f["harmful"])
    proc = cli("trace", "--finding", finding["fingerprint"][:10], logs, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    trace = orjson.loads(proc.stdout)["traces"][0]
    assert trace["finding"]["fingerprint"] == finding["fingerprint"]
    assert trace["ids"]["job_id"] == finding["ids"]["job_id"]
    by_id = orjson.loads(cli("trace", finding["ids"]["job_id"][0], logs, "--format", "json").stdout)["traces"][0]
    assert [r["line"] for r in by_id["records"]] == [r["line"] for r in trace["records"]]


@pytest.mark.parametrize("args,message", [
    (["ord_nope", "LOGS"], "no record carries 'ord_nope'"),
    (["--finding", "0123456789abcdef", "LOGS"], "no finding has the fingerprint"),
    (["--finding", "01", "LOGS"], "too short"),
    (["LOGS", "LOGS"], "is a file or folder, not an id"),
    (["only-an-id"], "give the id to trace and at least one PATH"),
    (["--id", "x", "--finding", "0123456789abcdef", "LOGS"], "not both"),
    (["--id", "x"], "give at least one PATH"),
])
def test_cli_errors_are_one_line_exit_2(cli, args, message):
    logs = str(SYNTH / "visibility-timeout" / "logs")
    proc = cli("trace", *[logs if a == "LOGS" else a for a in args])
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert proc.stdout == b""


def test_cli_output_file(cli, tmp_path):
    logs = str(SYNTH / "double-publish" / "logs")
    action = next(a for a in _truth("double-publish")["actions"] if a["duplicated"])
    target = tmp_path / "trace.md"
    proc = cli("trace", action["order_id"], logs, "--format", "markdown", "--output", str(target))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b""
    assert str(target) in proc.stderr.decode()
    text = target.read_text()
    assert text.startswith("# Trace of ") and "second publish of the same action" in text


def test_an_overlap_within_the_clock_skew_is_only_possible(tmp_path):
    """Attempt 2 (another host) starts 0.2 s before attempt 1's last record: with 0.5 s of tolerated
    clock skew, that is not proof that both ran at once."""
    def rec(worker, ts, event, attempt):
        return json.dumps({"ts": f"2026-05-02T08:00:{ts}Z", "event": event, "job_id": "j-1", "worker": worker,
                           "attempt": attempt})
    (tmp_path / "a.log").write_text("\n".join([
        rec("host-a", "00.000", "job_received", 1), rec("host-a", "00.100", "job_started", 1),
        rec("host-a", "10.000", "job_acked", 1)]) + "\n")
    (tmp_path / "b.log").write_text("\n".join([
        rec("host-b", "09.800", "job_received", 2), rec("host-b", "09.900", "job_started", 2),
        rec("host-b", "11.000", "job_acked", 2)]) + "\n")
    config = load_config(cwd=Path("/"))
    read = ingest([str(tmp_path)], config)
    close = trace_ids(correlation_context(read.table, config, skew_s=0.5, texts=read.texts), ["j-1"]).traces[0]
    assert any("received while attempt 1 in flight (+9.8 s)" in n and n.endswith("so only possibly")
               for n in _notes(close)), _notes(close)
    strict = trace_ids(correlation_context(read.table, config, skew_s=0.1, texts=read.texts), ["j-1"]).traces[0]
    assert any(n == "attempt 2 received while attempt 1 in flight (+9.8 s)" for n in _notes(strict)), _notes(strict)


def test_a_warm_trace_by_id_reads_only_the_id_columns_holding_the_value(tmp_path, monkeypatch):
    """After `analyze`, `trace ID` reads the id columns that hold the value (AnalysisContext.id_values,
    stored with the analysis), not every id column; it prints what a run without the cache prints."""
    import shutil

    from typer.testing import CliRunner

    import dupfind.background
    from dupfind.cli import app
    from dupfind.result_cache import SetEntry
    from dupfind.schema import ID_COLUMNS

    logs = tmp_path / "logs"
    shutil.copytree(SYNTH / "deploy-overlap" / "logs", logs)
    monkeypatch.setenv("DUPFIND_CACHE_DIR", str(tmp_path / "cache"))
    config = load_config(None, None, None)
    table = ingest([str(logs)], config).text_table()
    value = table["order_id"].drop_nulls().cast(pl.String)[0]
    holding = {c for c in ID_COLUMNS if c in table.columns and (table[c].cast(pl.String) == value).any()}
    assert holding and len(holding) < len([c for c in ID_COLUMNS if table[c].null_count() < table.height])

    def invoke(*args: str) -> bytes:
        result = CliRunner().invoke(app, list(args), catch_exceptions=False)
        dupfind.background.wait()
        assert result.exit_code == 0, result.output
        return result.stdout_bytes

    invoke("analyze", str(logs), "--format", "json")
    read: list[str] = []
    read_columns = SetEntry._read_columns

    def recording(self, names):
        read.extend(names)
        return read_columns(self, names)

    monkeypatch.setattr(SetEntry, "_read_columns", recording)
    warm = invoke("trace", value, str(logs), "--format", "json")
    assert set(read) & set(ID_COLUMNS) == holding
    assert warm == invoke("trace", value, str(logs), "--format", "json", "--no-cache")
