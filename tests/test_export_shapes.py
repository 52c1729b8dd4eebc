"""The same JSON logs as kubectl, stern, journalctl and log shippers write them give the findings they give as NDJSON."""

from __future__ import annotations

import csv
import gzip
import io
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson
import polars as pl
import pytest

from dupfind.config import load_config
from dupfind.formats import sniff_format
from dupfind.ingest import ingest

from conftest import FIXTURES
from test_rotated_logs import _findings

_OWN_TIME = re.compile(r'"(?:ts|timestamp|time|@timestamp)":\s*"([^"]+)"')


def _runtime_time(line: str, lag_us: int) -> datetime:
    """When the container runtime or the journal took the line: the record's own time (or a fixed
    one for a record timed otherwise), a little later."""
    found = _OWN_TIME.search(line)
    own = datetime.fromisoformat(found.group(1)) if found else datetime.fromisoformat("2026-07-21T10:00:00+00:00")
    return own + timedelta(microseconds=lag_us)


def _nano(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%f") + "417Z"


def _pacific(at: datetime) -> str:
    """A time as Papertrail's archives write it (the account's zone, to the second)."""
    return at.astimezone(timezone(timedelta(hours=-8))).strftime("%Y-%m-%d %H:%M:%S %z")


def _octet_counted(frame: str) -> str:
    """A syslog frame after its length in bytes (RFC 6587; a Heroku drain's POST body), its newline counted."""
    return f"{len(frame.encode()) + 1} {frame}"


def _firelens(pod: str, line: str) -> dict:
    task = f"{sum(map(ord, pod)) * 2654435761 % 2**64:016x}"
    return {"container_id": f"{task}-1527384619", "container_name": "app", "ecs_cluster": "prod",
            "ecs_task_arn": f"arn:aws:ecs:eu-west-1:123456789012:task/prod/{task}",
            "ecs_task_definition": "inventory-worker:41", "log": line, "source": "stdout"}


SHAPES = {
    "kubectl-timestamps": lambda pod, line, n: f"{_nano(_runtime_time(line, 150 + n % 90))} {line}",
    "kubectl-prefix": lambda pod, line, n: f"[pod/{pod}/app] {_nano(_runtime_time(line, 150 + n % 90))} {line}",
    "stern": lambda pod, line, n: f"{pod} app {line}",
    "journal-short-iso": lambda pod, line, n: (
        f"{_runtime_time(line, 310).strftime('%Y-%m-%dT%H:%M:%S.%f')}+00:00 vm-3 {pod}[{4000 + len(pod)}]: {line}"
    ),
    "journal-short": lambda pod, line, n: f"{_runtime_time(line, 310).strftime('%b %e %H:%M:%S')} vm-3 {pod}[{4000 + len(pod)}]: {line}",
    "compose": lambda pod, line, n: f"{pod + '-1':<40} | {_nano(_runtime_time(line, 150 + n % 90))} {line}",
    "heroku": lambda pod, line, n: (
        f"{_runtime_time(line, 900).strftime('%Y-%m-%dT%H:%M:%S.%f')}+00:00 app[{pod.rsplit('-', 1)[-1]}.1]: {line}"
    ),
    "fly": lambda pod, line, n: (
        f"{_runtime_time(line, 0).strftime('%Y-%m-%dT%H:%M:%S')}Z app[{sum(map(ord, pod)) * 40503 % 16**14:014x}] iad [info]{line}"
    ),
    "aws-logs-tail": lambda pod, line, n: (
        f"{_runtime_time(line, 2000).strftime('%Y-%m-%dT%H:%M:%S.%f')}+00:00 ecs/{pod}/7f3c9a1e2b4d {line}"
    ),
    "splunk": lambda pod, line, n: orjson.dumps({"preview": False, "offset": n, "result": {
        "_bkt": "main~41~7C0E5A9B", "_cd": f"41:{88113 + 2 * n}", "_indextime": "1784628003", "_raw": line,
        "_serial": str(n), "_si": ["idx-1", "main"], "_sourcetype": "_json",
        "_time": _runtime_time(line, 0).isoformat(timespec="milliseconds"), "host": pod, "index": "main",
        "linecount": "1", "source": f"/var/log/containers/{pod}_prod_app.log", "sourcetype": "_json", "splunk_server": "idx-1",
    }}).decode(),
    # Azure Monitor's ContainerLogV2 rows as a diagnostic setting exports them to a storage account.
    "azure-storage": lambda pod, line, n: orjson.dumps({
        "TimeGenerated": _runtime_time(line, 1200).isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "Computer": "aks-nodepool1-31415926-vmss000002", "ContainerId": "9f3c1b7e2d4a", "ContainerName": "app", "PodName": pod,
        "PodNamespace": "prod", "LogMessage": orjson.loads(line) if line.startswith("{") else line, "LogSource": "stdout",
        "KubernetesMetadata": {"podLabels": {"app": "inventory"}}, "LogLevel": "info", "Type": "ContainerLogV2",
        "_ResourceId": "/subscriptions/4f1c/resourcegroups/prod/providers/microsoft.containerservice/managedclusters/aks-prod"}).decode(),
    # AWS FireLens' records (an ECS task's Fluent Bit) as Firehose delivers them to S3, newline-delimited.
    "firelens": lambda pod, line, n: orjson.dumps(_firelens(pod, line)).decode(),
    # Log shippers' own outputs (a file, S3 or stdout sink, one event a line): Vector's
    # kubernetes_logs source, Filebeat's container input, Logstash's file input, Fluentd's
    # Kubernetes daemonset through out_file / out_s3 (`<time>\t<tag>\t<record>`, to the second).
    "vector": lambda pod, line, n: orjson.dumps({
        "file": f"/var/log/pods/prod_{pod}_1f0c9a7e/app/0.log", "kubernetes": {
            "container_id": "containerd://9f3c1b7e", "container_image": "registry.internal/inventory:v2.11.3",
            "container_name": "app", "pod_labels": {"app": "inventory", "pod-template-hash": "7fxtm6zm4"}, "pod_name": pod,
            "pod_namespace": "prod", "pod_node_name": "node-1", "pod_owner": "ReplicaSet/worker-inventory-7fxtm6zm4"},
        "message": line, "source_type": "kubernetes_logs", "stream": "stdout",
        "timestamp": _nano(_runtime_time(line, 150 + n % 90))[:-4] + "Z"}).decode(),
    "filebeat": lambda pod, line, n: orjson.dumps({
        "@timestamp": _runtime_time(line, 150 + n % 90).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "@metadata": {"beat": "filebeat", "type": "_doc", "version": "8.11.1"}, "message": line,
        "log": {"offset": 231 * n, "file": {"path": f"/var/log/containers/{pod}_prod_app-9f3c1b7e.log"}}, "stream": "stdout",
        "input": {"type": "container"}, "kubernetes": {"pod": {"name": pod}, "namespace": "prod", "container": {"name": "app"}},
        "host": {"name": "node-1"}, "agent": {"type": "filebeat", "version": "8.11.1"}, "ecs": {"version": "8.0.0"}}).decode(),
    "logstash": lambda pod, line, n: orjson.dumps({
        "@timestamp": _runtime_time(line, 900).isoformat(timespec="milliseconds").replace("+00:00", "Z"), "@version": "1",
        "message": line, "event": {"original": line}, "host": {"name": "vm-3"},
        "log": {"file": {"path": f"/var/log/inventory/{pod}.log"}}}).decode(),
    # Papertrail's archive (TSV, no header): id, generated and received times, the system's id,
    # name and IP, facility, severity, program, message.
    "papertrail": lambda pod, line, n: (
        f"{1583610000 + 2 * n}\t{_pacific(_runtime_time(line, 0))}\t{_pacific(_runtime_time(line, 700_000))}\t{4240 + len(pod)}\t"
        f"{pod}\t10.0.3.{len(pod)}\tUser\tInfo\tnotifier\t{line}"
    ),
    # Grafana's logs "Download > TXT" of one pod's query: the query's meta, two blank lines, then
    # each row's epoch milliseconds, ISO time and line (Grafana 11; before, the browser's local time
    # alone).
    "grafana-txt": lambda pod, line, n: (
        (f'Common labels: {{"app":"inventory","pod":"{pod}"}}\nLine limit: "1000 (412 returned)"\n\n\n' if n == 0 else "")
        + f"{int(_runtime_time(line, 0).timestamp() * 1000)}\t{_runtime_time(line, 0).strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3]}Z\t{line}"
    ),
    "grafana-txt-local": lambda pod, line, n: (
        ('Common labels: {"app":"inventory"}\n\n\n' if n == 0 else "") + f"{_runtime_time(line, 0).strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]}\t{line}"
    ),
    # RFC 5424 syslog as collectors write it: rsyslog's RSYSLOG_SyslogProtocol23Format (a legacy
    # sender's message after a space of its own), Docker's syslog driver (dockerd's PID, the
    # container's tag), a Heroku drain's octet-counted frames (host `host`, the dyno, no
    # structured data).
    "rsyslog-5424": lambda pod, line, n: (
        f"<14>1 {_runtime_time(line, 400 + n % 70).isoformat(timespec='microseconds')} vm-3 {pod} {4000 + len(pod)} - -  {line}"
    ),
    "rsyslog-forward": lambda pod, line, n: (
        f"<14>{_runtime_time(line, 310).isoformat(timespec='microseconds')} vm-3 {pod}[{4000 + len(pod)}]: {line}"
    ),
    "docker-syslog": lambda pod, line, n: (
        f"<30>1 {_runtime_time(line, 0).strftime('%Y-%m-%dT%H:%M:%S')}Z node-1 {pod} 811 {pod} - {line}"
    ),
    "heroku-drain": lambda pod, line, n: _octet_counted(
        f"<190>1 {_runtime_time(line, 900).isoformat(timespec='microseconds')} host app {pod.rsplit('-', 1)[-1]}.1 - {line}"
    ),
    "fluentd": lambda pod, line, n: (
        f"{_runtime_time(line, 150).strftime('%Y-%m-%dT%H:%M:%S')}+00:00\tkubernetes.var.log.containers.{pod}_prod_app-9f3c1b7e.log\t"
        + orjson.dumps({"log": line + "\n", "stream": "stdout", "docker": {"container_id": "9f3c1b7e"}, "kubernetes": {
            "container_name": "app", "namespace_name": "prod", "pod_name": pod, "host": "node-1"}}).decode()),
}
CASES = ["synth/lock-nonatomic", "scenarios/lock-get-then-set-race"]


def _shaped(logs: Path, out: Path, shape: str) -> None:
    """Each log of `logs` written under `out` as export shape `shape` prints its lines."""
    for log in sorted(logs.iterdir()):
        lines = log.read_text().splitlines()
        (out / log.name).write_text("".join(SHAPES[shape](log.stem, line, n) + "\n" for n, line in enumerate(lines)))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("case", CASES)
def test_json_logs_in_an_export_shape_give_the_findings_of_the_ndjson(tmp_path, case, shape):
    """Before, each line was text with a leading time (or no time at all): no finding at all."""
    logs = FIXTURES / case / "logs"
    _shaped(logs, tmp_path, shape)
    whole = _findings(logs)
    assert whole and _findings(tmp_path) == whole


@pytest.mark.parametrize("shape", ["grafana-txt", "grafana-txt-local"])
def test_a_grafana_download_s_meta_lines_are_the_export_s_not_rejected_lines(tmp_path, shape):
    """Before the `grafana-text` preset, every line was text with a leading time (no finding), and
    with it the query's meta lines were two rejected lines a file."""
    logs = FIXTURES / CASES[0] / "logs"
    _shaped(logs, tmp_path, shape)
    config = load_config(cwd=Path("/"))
    plain, shaped = ingest([str(logs)], config).files, ingest([str(tmp_path)], config).files
    assert [f.format for f in shaped] == ["grafana-text"] * len(plain)
    # Every line a record: the NDJSON's line without a time (a traceback's) takes Grafana's.
    assert [(f.records, f.rejected_total) for f in shaped] == [(f.records + f.rejected_total, 0) for f in plain]


def _csv(rows: list[dict]) -> str:
    out = io.StringIO()
    table = csv.DictWriter(out, fieldnames=list(rows[0]), quoting=csv.QUOTE_ALL, lineterminator="\r\n")
    table.writeheader()
    table.writerows(rows)
    return out.getvalue()


def _kibana(at: datetime) -> str:
    """A time as Kibana's CSV reports write it (`MMM D, YYYY @ HH:mm:ss.SSS`, the browser's zone: Berlin's)."""
    return at.astimezone(timezone(timedelta(hours=2))).strftime("%b %-d, %Y @ %H:%M:%S.%f")[:-3]


def _epoch_ms(line: str) -> str:
    return str(int(_runtime_time(line, 0).timestamp() * 1000))


# Search results of every file's events in one export (newest first), the application's line a
# field: Splunk Web's CSV export (the host a column); Sumo Logic's search page CSV and its Search
# Job API's messages (Sumo's Kubernetes collection's `pod` field, the log's `_sourcename`).
SEARCH_EXPORTS = {
    "splunk-csv": ("splunk-results.csv", lambda log, line, k: {
        "_time": _runtime_time(line, 0).isoformat(timespec="milliseconds"), "host": log.stem, "source": f"/var/log/{log.name}",
        "sourcetype": "_json", "_raw": line}, _csv),
    "sumo-csv": ("search-results.csv", lambda log, line, k: {
        "_messagetime": _epoch_ms(line), "_receipttime": str(int(_epoch_ms(line)) + 640), "_raw": line, "_sourcehost": "",
        "_sourcename": f"prod.{log.stem}.app", "_sourcecategory": "prod/inventory", "_collector": "kubernetes-prod",
        "_messageid": str(-7112583441 - k), "pod": log.stem}, _csv),
    "sumo-api": ("messages.json", lambda log, line, k: {"map": {
        "_messagetime": _epoch_ms(line), "_receipttime": str(int(_epoch_ms(line)) + 640), "_raw": line,
        "_sourcename": f"prod.{log.stem}.app", "_sourcecategory": "prod/inventory", "_collector": "kubernetes-prod",
        "_messageid": str(-7112583441 - k), "_size": str(len(line)), "_format": "t:fail:o:-1:l:0:p:null"}},
        lambda rows: orjson.dumps({"fields": [{"name": "_raw", "fieldType": "string", "keyField": False}],
                                   "messages": rows}, option=orjson.OPT_INDENT_2).decode()),
    # Kibana's Discover "Generate CSV" of Filebeat's documents (the pod and message columns
    # chosen): @timestamp in Kibana's dateFormat, in the zone of the browser that asked for it.
    "kibana-csv": ("discover-export.csv", lambda log, line, k: {
        "@timestamp": _kibana(_runtime_time(line, 0)), "kubernetes.pod.name": log.stem, "message": line}, _csv),
    # Grafana's logs "Download > JSON" of a Loki query (newest first): each row's labels in `fields`.
    "grafana-json": ("Explore-logs-2026-07-21 12_03_00.json", lambda log, line, k: {
        "line": line, "timestamp": str(int(_runtime_time(line, 0).timestamp() * 1_000_000) * 1000),
        "fields": {"app": "inventory", "namespace": "prod", "pod": log.stem, "stream": "stdout"}},
        lambda rows: orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode()),
    # Loki's HTTP API response (`curl .../query_range`): the lines of each file a stream of its own.
    "loki-api": ("query_range.json", lambda log, line, k: (log.stem, [str(int(_runtime_time(line, 0).timestamp() * 1_000_000) * 1000), line]),
                 lambda rows: orjson.dumps({"status": "success", "data": {"resultType": "streams", "result": [
                     {"stream": {"namespace": "prod", "pod": pod}, "values": [value for name, value in rows if name == pod]}
                     for pod in dict.fromkeys(name for name, _ in rows)]}}).decode()),
    # Graylog's search page "Export to CSV" (Docker's GELF log driver: `source` the host, the
    # container's name a field of its own, chosen as a column) and its REST API's search.
    "graylog-csv": ("graylog-search-result.csv", lambda log, line, k: {
        "timestamp": _runtime_time(line, 0).isoformat(timespec="milliseconds").replace("+00:00", "Z"), "source": "docker-host-2",
        "message": line, "container_name": log.stem}, _csv),
    "graylog-api": ("universal-relative.json", lambda log, line, k: {"index": "graylog_41", "highlight_ranges": {}, "message": {
        "_id": f"5f1c{k:020x}", "timestamp": _runtime_time(line, 0).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "source": "docker-host-2", "message": line, "container_name": log.stem, "command": "/app/run", "level": 6,
        "gl2_source_input": "64f0c1a2e4b0", "streams": ["000000000000000000000001"]}},
        lambda rows: orjson.dumps({"query": "*", "built_query": "{}", "used_indices": [], "messages": rows, "fields": [],
                                   "time": 41, "total_results": len(rows)}, option=orjson.OPT_INDENT_2).decode()),
}


@pytest.mark.parametrize("export", SEARCH_EXPORTS)
@pytest.mark.parametrize("case", CASES)
def test_json_logs_in_one_search_export_give_the_findings_of_the_ndjson(tmp_path, case, export):
    """Before, Sumo Logic's results were records whose message was the line: no finding."""
    logs = FIXTURES / case / "logs"
    name, row, render = SEARCH_EXPORTS[export]
    events = [(_runtime_time(line, 0), log, line) for log in sorted(logs.iterdir()) for line in log.read_text().splitlines()]
    events.sort(key=lambda event: event[0], reverse=True)
    (tmp_path / name).write_text(render([row(log, line, k) for k, (_, log, line) in enumerate(events)]), newline="")
    whole = _findings(logs)
    assert whole and _findings(tmp_path) == whole


@pytest.mark.parametrize("written", ["back to back", "an array"])
@pytest.mark.parametrize("case", CASES)
def test_a_line_envelope_s_records_in_one_document_give_the_findings_of_the_ndjson(tmp_path, case, written):
    """FireLens' records as Firehose writes them to S3 without a delimiter (gzip), or an array of
    them: before, each was a JSON record whose `log` was text, no finding."""
    logs = FIXTURES / case / "logs"
    events = sorted((_runtime_time(line, 0), n, log, line) for log in sorted(logs.iterdir())
                    for n, line in enumerate(log.read_text().splitlines()))
    records = [_firelens(log.stem, line) for _, _, log, line in events]
    data = b"".join(map(orjson.dumps, records)) if written == "back to back" else orjson.dumps(records)
    (tmp_path / "prod-firelens-1-2026-07-21-10-04-17-5f0e9d8c.gz").write_bytes(gzip.compress(data))
    whole = _findings(logs)
    assert whole and _findings(tmp_path) == whole


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("table", ["ContainerLogV2", "ContainerLog"])
def test_json_logs_in_one_azure_log_analytics_query_give_the_findings_of_the_ndjson(tmp_path, case, table):
    """`az monitor log-analytics query -o json` over AKS' container logs: an array of rows, the
    line in LogMessage (v2) or LogEntry (v1) as text. Before, each row was one record whose
    message was the line: no finding."""
    logs = FIXTURES / case / "logs"
    rows = []
    for log in sorted(logs.iterdir()):
        for line in log.read_text().splitlines():
            at = _runtime_time(line, 1200).isoformat(timespec="microseconds").replace("+00:00", "Z")
            rows.append({"Computer": "aks-nodepool1-31415926-vmss000002", "ContainerName": "app", "LogMessage": line,
                         "LogSource": "stdout", "PodName": log.stem, "PodNamespace": "prod", "TableName": "PrimaryResult",
                         "TimeGenerated": at} if table == "ContainerLogV2" else
                        {"Computer": "aks-nodepool1-31415926-vmss000002", "ContainerID": "9f3c1b7e2d4a", "Image": "inventory",
                         "LogEntry": line, "LogEntrySource": "stdout", "Name": f"{log.stem}/app", "TableName": "PrimaryResult",
                         "TimeGenerated": at})
    rows.sort(key=lambda row: row["TimeGenerated"], reverse=True)  # `| order by TimeGenerated desc`
    (tmp_path / "query.json").write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
    whole = _findings(logs)
    assert whole and _findings(tmp_path) == whole


# A worker framework's own text lines: Celery's and Dramatiq's `[2026-11-29 07:16:09,727...`,
# Sidekiq's `INFO 2026-11-29T07:16:09.727Z pid=...` (after its colours).
_FRAMEWORK_TIME = re.compile(
    r"^(?:\x1b\[[0-9;]*m)?(?:[A-Z]+\s*(?:\x1b\[[0-9;]*m)?\s+)?\[?(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})[,.](\d{3})"
)


def _framework_lines(log, shape, lag_us: int = 0) -> list[str]:
    """A framework's log as `shape` prints it: each line after the time the runtime took it (its
    own time, or the last line's for a banner or traceback line, `lag_us` later)."""
    at, lines = datetime.fromisoformat("2026-11-29T00:00:00+00:00"), []
    for n, line in enumerate(log.read_text().splitlines()):
        found = _FRAMEWORK_TIME.match(line)
        if found:
            at = datetime.fromisoformat(f"{found[1]}T{found[2]}.{found[3]}+00:00")
        lines.append(shape(log.stem, at + timedelta(microseconds=lag_us), line, n))
    return lines


FRAMEWORK_SHAPES = {
    # `kubectl logs --timestamps` / `docker logs -t`: RFC3339Nano; a CloudWatch Logs export to S3
    # (`<task>/<stream>/000000.gz`): milliseconds; both one container's or stream's lines.
    "kubectl-timestamps": lambda pod, at, line, n: f"{at.strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {line}",
    "cloudwatch-s3": lambda pod, at, line, n: f"{at.strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3]}Z {line}",
}


def _runtime_shaped(logs, out, shape: str) -> None:
    for log in sorted(logs.iterdir()):
        if not any(map(_FRAMEWORK_TIME.match, log.read_text().splitlines())):  # JSON lines, Redis' log
            (out / log.name).write_bytes(log.read_bytes())
            continue
        lines = [line + "\n" for line in _framework_lines(log, FRAMEWORK_SHAPES[shape])]
        if shape == "cloudwatch-s3":  # the objects of one stream, the second from a record's first line on
            stream = out / "3f9c1b7e-export" / log.stem
            stream.mkdir(parents=True)
            own = log.read_text().splitlines()
            cut = next(n for n in range(len(own) // 2, len(own)) if _FRAMEWORK_TIME.match(own[n]))
            (stream / "000000.gz").write_bytes(gzip.compress("".join(lines[:cut]).encode()))
            (stream / "000001.gz").write_bytes(gzip.compress("".join(lines[cut:]).encode()))
        else:
            (out / log.name).write_text("".join(lines))


def _records(logs) -> list[tuple]:
    config = load_config(cwd=Path("/"))
    read = ingest([str(logs)], config)
    table = read.texts.decoded(read.table)
    return sorted(table.select(
        pl.col("ts").dt.truncate("1ms"), "kind", "job_id", "worker_id", "level", "name",
    ).cast(pl.String).rows(), key=str)


@pytest.mark.parametrize("shape", FRAMEWORK_SHAPES)
@pytest.mark.parametrize("case", ["formats/celery-worker", "formats/sidekiq", "formats/dramatiq-worker"])
def test_a_framework_log_as_a_runtime_prints_it_gives_the_records_of_the_file(tmp_path, case, shape):
    """Before, a Celery, Sidekiq or Dramatiq line after the runtime's time was a text line with a
    leading time: no job, no worker (kind `other`); only a JSON object after it was read inside.
    A banner's and a traceback's lines are the worker's as in the file; a Sidekiq log is the worker
    its file (or, exported to S3, its log stream) names."""
    logs = FIXTURES / case / "logs"
    _runtime_shaped(logs, tmp_path, shape)
    assert _records(tmp_path) == _records(logs)


# Exports of several sources, each line naming its own (a host and service, a pod, a log stream,
# a dyno, a container): `journalctl -u` (its default output, a time without a year), `-o
# short-iso`, stern, `aws logs tail`, `heroku logs`, `docker compose logs -t`, `kubectl logs --prefix`.
SOURCE_SHAPES = {
    "journal-short": lambda pod, at, line, n: f"{at.strftime('%b %e %H:%M:%S')} vm-3 {pod}[1711]: {line}",
    "journal-short-iso": lambda pod, at, line, n: f"{at.strftime('%Y-%m-%dT%H:%M:%S')}+0000 vm-3 {pod}[1711]: {line}",
    "stern": lambda pod, at, line, n: f"{pod}-7d9f8c6b5-x2x9k worker {line}",
    "aws-logs-tail": lambda pod, at, line, n: f"{at.strftime('%Y-%m-%dT%H:%M:%S.%f')}+00:00 ecs/{pod}/4f2a9c1e {line}",
    "heroku": lambda pod, at, line, n: f"{at.strftime('%Y-%m-%dT%H:%M:%S.%f')}+00:00 app[{pod}.1]: {line}",
    "fly": lambda pod, at, line, n: f"{at.strftime('%Y-%m-%dT%H:%M:%S')}Z app[{sum(map(ord, pod)) * 40503 % 16**14:014x}] ams [info] {line}",
    "syslog-3164": lambda pod, at, line, n: f"<14>{at.strftime('%b %e %H:%M:%S')} vm-3 {pod}[1711]: {line}",
    "papertrail": lambda pod, at, line, n: (
        f"{1583610000 + n}\t{_pacific(at)}\t{_pacific(at + timedelta(milliseconds=380))}\t4241\tvm-3\t10.0.3.7\tDaemon\tInfo\t{pod}\t{line}"
    ),
    "syslog-5424": lambda pod, at, line, n: (
        f"<14>1 {at.isoformat(timespec='microseconds')} vm-3 {pod} {1711 + n % 3} - [origin ip=\"10.0.3.7\"] {line}"
    ),
    "compose": lambda pod, at, line, n: f"{pod + '-1':<24} | {at.strftime('%Y-%m-%dT%H:%M:%S.%f')}417Z {line}",
    "kubectl-prefix": lambda pod, at, line, n: f"[pod/{pod}-7d9f8c6b5-x2x9k/worker] {at.strftime('%Y-%m-%dT%H:%M:%S.%f')}417Z {line}",
}


@pytest.mark.parametrize("shape", SOURCE_SHAPES)
@pytest.mark.parametrize("case", ["formats/celery-worker", "formats/dramatiq-worker"])
def test_a_framework_log_in_an_export_of_several_sources_gives_the_records_of_the_file(tmp_path, case, shape):
    """Its banner's lines and its tracebacks' are its own source's, joined to their records (before,
    each traceback line was a record of its own, or rejected where the time has no year); the
    journal's default output, whose time has no year, was not read at all (47 of 47 lines rejected)."""
    logs = FIXTURES / case / "logs"
    for log in logs.iterdir():
        (tmp_path / log.name).write_text("".join(line + "\n" for line in _framework_lines(log, SOURCE_SHAPES[shape], 310)))
    config = load_config(cwd=Path("/"))
    assert [f.rejected_total for f in ingest([str(tmp_path)], config).files] == [0]
    records = [r[:3] + r[4:] for r in _records(tmp_path)]
    assert records == [r[:3] + r[4:] for r in _records(logs)]  # the worker: the envelope's, or the node's


def _grammar_logs() -> list[Path]:
    """The format fixtures' files of a framework's own text lines (a grammar preset's)."""
    config = load_config(cwd=Path("/"))
    grammars = {p.label or p.name for p in config.presets if p.is_grammar}
    found = []
    for folder in sorted((FIXTURES / "formats").iterdir()):
        for log in sorted((folder / "logs").glob("*")):
            if log.is_file() and sniff_format(log.read_bytes()[:65536], presets=config.presets).label in grammars:
                found.append(log)
    return found


# The same exports without the runtime's time (no --timestamps, no -t): a line's own time is
# where the runtime's would be.
UNTIMED_SHAPES = {
    "kubectl-prefix": lambda pod, line: f"[pod/{pod}-7d9f8c6b5-x2x9k/worker] {line}",
    "compose": lambda pod, line: f"{pod + '-1':<24} | {line}",
    "stern": lambda pod, line: f"{pod}-7d9f8c6b5-x2x9k worker {line}",
}
GRAMMAR_LOGS = _grammar_logs()


@pytest.mark.parametrize("shape", UNTIMED_SHAPES)
@pytest.mark.parametrize("log", GRAMMAR_LOGS, ids=[f"{p.parts[-3]}/{p.name}" for p in GRAMMAR_LOGS])
def test_a_framework_log_in_an_export_without_the_runtimes_time_gives_the_records_of_the_file(tmp_path, log, shape):
    """Before 2026-12-07 Spring Boot's, Rust tracing's, structlog's, RabbitMQ's, Redis' and NATS'
    lines under `docker compose logs` and stern were all rejected (only Celery's, Dramatiq's, RQ's
    and Sidekiq's told the export apart from any text), and under `kubectl logs --prefix` a line's
    own ISO time was taken for kubectl's (Spring's and tracing's lines read as logfmt)."""
    pod = re.sub(r"[^a-z0-9]+", "-", log.stem.lower()).strip("-")  # a name a container or pod can have
    (tmp_path / log.name).write_text("".join(UNTIMED_SHAPES[shape](pod, line) + "\n" for line in log.read_text().splitlines()))
    config = load_config(cwd=Path("/"))
    shaped = ingest([str(tmp_path)], config).files[0]
    whole = ingest([str(log)], config).files[0]
    assert (shaped.records, shaped.rejected_total) == (whole.records, whole.rejected_total)
    assert [r[:3] + r[4:] for r in _records(tmp_path)] == [r[:3] + r[4:] for r in _records(log)]


CELERY_LOGS = FIXTURES / "real" / "celery_redis_visibility_timeout" / "logs"


def _celery_without_app_logs(out) -> None:
    """The recording's Celery workers' own logs, the producer's and Redis', not the application's
    JSON logs (which name the workers too)."""
    out.mkdir(parents=True, exist_ok=True)
    for log in CELERY_LOGS.iterdir():
        if not log.name.startswith("app-"):
            (out / log.name).write_bytes(log.read_bytes())


@pytest.mark.parametrize("shape", FRAMEWORK_SHAPES)
def test_celery_workers_as_a_runtime_prints_their_logs_give_the_findings_of_the_files(tmp_path, shape):
    _celery_without_app_logs(tmp_path / "files")
    (tmp_path / "shaped").mkdir()
    _runtime_shaped(tmp_path / "files", tmp_path / "shaped", shape)
    whole = _findings(tmp_path / "files")
    assert len(whole) > 10 and _findings(tmp_path / "shaped") == whole


def _stream_events(logs) -> list[tuple[datetime, str, int, str]]:
    """Each Celery worker's lines as the events of its own log stream, in time order."""
    events = [(at, log.stem, n, line) for log in sorted(logs.glob("celery-*.log"))
              for at, line, n in _framework_lines(log, lambda pod, at, line, n: (at, line, n))]
    return sorted(events, key=lambda e: (e[0], e[1], e[2]))


MERGED_SHAPES = {
    # `aws logs filter-log-events` over the workers' streams (one JSON document).
    "filter-log-events": ("streams.json", lambda events: orjson.dumps({"events": [
        {"logStreamName": f"celery/worker/{stream}", "timestamp": int(at.timestamp() * 1000), "message": line,
         "ingestionTime": int(at.timestamp() * 1000) + 412, "eventId": f"3894{int(at.timestamp() * 1000)}{k:06d}"}
        for k, (at, stream, _, line) in enumerate(events)
    ], "searchedLogStreams": []}, option=orjson.OPT_INDENT_2).decode()),
    # `aws logs filter-log-events --output text`: each event's fields by name, tab-separated; then
    # the streams searched.
    "aws-cli-text": ("events.txt", lambda events: "".join(
        f"EVENTS\t3894{int(at.timestamp() * 1000)}{k:06d}\t{int(at.timestamp() * 1000) + 412}\tcelery/worker/{stream}\t"
        f"{line}\t{int(at.timestamp() * 1000)}\n" for k, (at, stream, _, line) in enumerate(events)
    ) + "".join(f"SEARCHEDLOGSTREAMS\tcelery/worker/{stream}\tTrue\n" for stream in sorted({e[1] for e in events}))),
    "aws-logs-tail": ("tail.log", lambda events: "".join(
        f"{at.strftime('%Y-%m-%dT%H:%M:%S.%f')}+00:00 celery/worker/{stream} {line}\n" for at, stream, _, line in events)),
    "stern": ("stern.log", lambda events: "".join(f"{stream} celery {line}\n" for at, stream, _, line in events)),
    "kubectl-prefix": ("pods.log", lambda events: "".join(
        f"[pod/{stream}/celery] {at.strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {line}\n" for at, stream, _, line in events)),
    # `journalctl -o json` of two Celery services on one host (templated units, one identifier).
    "journald": ("journal.json", lambda events: "".join(orjson.dumps({
        "__CURSOR": f"s=5f1c;i={k:x}", "__REALTIME_TIMESTAMP": str(int(at.timestamp() * 1_000_000) + 37),
        "_HOSTNAME": "vm-3", "_SYSTEMD_UNIT": f"celery@{stream.removeprefix('celery-')}.service",
        "SYSLOG_IDENTIFIER": "celery", "_PID": str(4100 + 40 * int(stream[-1])), "PRIORITY": "6", "MESSAGE": line,
        "_SYSTEMD_INVOCATION_ID": f"9e0c{stream[-1]}", "_TRANSPORT": "stdout",
    }).decode() + "\n" for k, (at, stream, _, line) in enumerate(events))),
    # Docker's journald log driver on one host: every container's entries dockerd's (its unit,
    # PID and invocation), the container named by CONTAINER_NAME.
    "docker-journald": ("journal.json", lambda events: "".join(orjson.dumps({
        "__CURSOR": f"s=5f1c;i={k:x}", "__REALTIME_TIMESTAMP": str(int(at.timestamp() * 1_000_000) + 37),
        "_HOSTNAME": "vm-3", "_SYSTEMD_UNIT": "docker.service", "_PID": "811", "_SYSTEMD_INVOCATION_ID": "4be1c0de",
        "PRIORITY": "3", "_TRANSPORT": "journal", "CONTAINER_NAME": stream, "CONTAINER_ID": f"{sum(map(ord, stream)):012x}",
        "CONTAINER_TAG": f"{sum(map(ord, stream)):012x}", "SYSLOG_IDENTIFIER": f"{sum(map(ord, stream)):012x}",
        "IMAGE_NAME": "notifier:2026.11.3", "MESSAGE": line,
    }).decode() + "\n" for k, (at, stream, _, line) in enumerate(events))),
    # Filebeat's documents of Celery's text log (the line in `message`): a search's hits, and
    # elasticdump's hits one a line.
    "elasticsearch": ("hits.json", lambda events: orjson.dumps({"took": 7, "timed_out": False, "hits": {
        "total": {"value": len(events), "relation": "eq"}, "hits": [{"_index": "filebeat-8.11.1", "_id": f"Zk{k:08x}", "_source": {
            "@timestamp": at.isoformat().replace("+00:00", "Z"), "message": line, "stream": "stderr",
            "kubernetes": {"pod": {"name": stream}, "container": {"name": "celery"}}, "log": {"offset": 97 * k},
        }} for k, (at, stream, _, line) in enumerate(events)]}}, option=orjson.OPT_INDENT_2).decode()),
    "elasticdump": ("hits.ndjson", lambda events: "".join(orjson.dumps({"_index": "filebeat-8.11.1", "_id": f"Zk{k:08x}", "_source": {
        "@timestamp": at.isoformat().replace("+00:00", "Z"), "message": line, "kubernetes": {"pod": {"name": stream}},
    }}).decode() + "\n" for k, (at, stream, _, line) in enumerate(events))),
    # Datadog's Logs API export of the agent's container logs (no pipeline parsed the line: it is
    # the message, and `attributes.attributes` holds only what the agent adds).
    "datadog": ("datadog.json", lambda events: orjson.dumps({"data": [{"id": f"AQAAAZb9{k:024x}", "type": "log", "attributes": {
        "timestamp": at.isoformat(timespec="milliseconds").replace("+00:00", "Z"), "host": "i-0a1b2c3d4e5f60718",
        "service": "celery", "status": "info", "message": line,
        "tags": ["env:prod", f"pod_name:{stream}", "container_name:celery", "source:python"],
        "attributes": {"logger": {"name": "stdout"}},
    }} for k, (at, stream, _, line) in enumerate(events)], "links": {}, "meta": {"page": {}}},
        option=orjson.OPT_INDENT_2).decode()),
    # The OpenTelemetry collector's file exporter (filelog receiver): a request a line, the line
    # its record's string body, each stream its resource.
    "otlp": ("otlp.jsonl", lambda events: "".join(orjson.dumps({"resourceLogs": [{"resource": {"attributes": [
        {"key": "k8s.pod.name", "value": {"stringValue": stream}}, {"key": "service.name", "value": {"stringValue": "celery"}}]},
        "scopeLogs": [{"scope": {}, "logRecords": [{"timeUnixNano": str(int(at.timestamp() * 1_000_000) * 1000),
            "observedTimeUnixNano": str(int(at.timestamp() * 1_000_000) * 1000 + 417_000), "body": {"stringValue": line},
            "attributes": [{"key": "log.iostream", "value": {"stringValue": "stderr"}}]}]}]}]}).decode() + "\n"
        for at, stream, _, line in events)),
    # Fluent Bit's records (tail input, cri parser, kubernetes filter) as its file output writes them.
    "fluent-bit": ("fluent-bit.jsonl", lambda events: "".join(orjson.dumps({
        "date": at.timestamp(), "time": at.isoformat(timespec="microseconds").replace("+00:00", "Z"), "stream": "stderr",
        "_p": "F", "log": line, "kubernetes": {"pod_name": stream, "namespace_name": "notifications", "container_name": "celery"},
    }).decode() + "\n" for at, stream, _, line in events)),
    # Shippers' outputs of the workers' pods (tests above: SHAPES).
    "vector": ("vector.json", lambda events: "".join(orjson.dumps({
        "file": f"/var/log/pods/prod_{stream}_1f0c/celery/0.log", "kubernetes": {"container_name": "celery", "pod_name": stream,
        "pod_namespace": "prod"}, "message": line, "source_type": "kubernetes_logs", "stream": "stderr",
        "timestamp": at.isoformat(timespec="microseconds").replace("+00:00", "Z")}).decode() + "\n"
        for at, stream, _, line in events)),
    "filebeat": ("filebeat.ndjson", lambda events: "".join(orjson.dumps({
        "@timestamp": at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "@metadata": {"beat": "filebeat", "type": "_doc", "version": "8.11.1"}, "message": line,
        "log": {"offset": 97 * k}, "input": {"type": "container"}, "kubernetes": {"pod": {"name": stream}},
        "agent": {"type": "filebeat"}}).decode() + "\n" for k, (at, stream, _, line) in enumerate(events))),
    "fluentd": ("fluentd.log", lambda events: "".join(
        f"{at.strftime('%Y-%m-%dT%H:%M:%S')}+00:00\tkubernetes.var.log.containers.{stream}_prod_celery-9f3c.log\t"
        + orjson.dumps({"log": line + "\n", "stream": "stderr", "kubernetes": {"pod_name": stream}}).decode() + "\n"
        for at, stream, _, line in events)),
    # rsyslog's RFC 5424 file on a central server: each worker's host its own.
    "syslog-5424": ("syslog.log", lambda events: "".join(
        f"<14>1 {at.isoformat(timespec='microseconds')} {stream}.internal celery {4100 + n % 5} - - {line}\n"
        for at, stream, n, line in events)),
    # A Papertrail archive of the workers' hosts (each its own system).
    "papertrail": ("2026-11-29-07.tsv", lambda events: "".join(
        f"{1583610000 + k}\t{_pacific(at)}\t{_pacific(at + timedelta(milliseconds=380))}\t{4240 + int(stream[-1])}\t{stream}.internal\t"
        f"10.0.3.{int(stream[-1])}\tDaemon\tInfo\tcelery\t{line}\n" for k, (at, stream, _, line) in enumerate(events))),
    # Grafana's logs "Download > JSON" of the same Loki query (newest first).
    "grafana-json": ("Explore-logs.json", lambda events: orjson.dumps([{
        "line": line, "timestamp": str(int(at.timestamp() * 1_000_000) * 1000),
        "fields": {"app": "notifier", "pod": stream, "stream": "stderr"}} for at, stream, _, line in reversed(events)],
        option=orjson.OPT_INDENT_2).decode()),
    # Loki's HTTP API response to a query_range (`curl`), each worker's pod a stream, newest first.
    "loki-api": ("query_range.json", lambda events: orjson.dumps({"status": "success", "data": {
        "resultType": "streams", "result": [{"stream": {"app": "notifier", "pod": pod, "stream": "stderr"}, "values": [
            [str(int(at.timestamp() * 1_000_000) * 1000), line] for at, stream, _, line in reversed(events) if stream == pod]}
            for pod in sorted({e[1] for e in events})],
        "stats": {"summary": {"bytesProcessedPerSecond": 1843200, "totalEntriesReturned": len(events)}}}}).decode()),
    # Graylog's CSV export of the workers' GELF messages (the container a column).
    "graylog-csv": ("graylog-search-result.csv", lambda events: _csv([{
        "timestamp": at.isoformat(timespec="milliseconds").replace("+00:00", "Z"), "source": "vm-3", "message": line,
        "container_name": stream} for at, stream, _, line in reversed(events)])),
    # Loki's `logcli query` text output, newest first.
    "loki-text": ("logcli.txt", lambda events: "".join(
        f'{at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]}Z {{app="notifier", pod="{stream}"}} {line}\n'
        for at, stream, _, line in reversed(events))),
}


@pytest.mark.parametrize("shape", MERGED_SHAPES)
def test_celery_workers_of_one_export_file_are_each_the_node_its_own_stream_names(tmp_path, shape):
    """Two Celery workers' logs in one export, interleaved (each stream or pod its own): each
    record is the node its own stream's `ready.` line names. Before, the first node named in the
    file named every record (filter-log-events, `kubectl logs --prefix`, logcli, the journal of
    one host: 16 findings instead of 23, the two workers one); and `aws logs tail`, stern, the
    AWS CLI's text output and Elasticsearch's hits (their `message` unwrapped only when JSON) did
    not read a framework's line."""
    files, merged = tmp_path / "files", tmp_path / "merged"
    _celery_without_app_logs(files)
    merged.mkdir()
    for log in files.iterdir():
        if not log.name.startswith("celery-"):
            (merged / log.name).write_bytes(log.read_bytes())
    name, render = MERGED_SHAPES[shape]
    (merged / name).write_text(render(_stream_events(files)))
    whole = _findings(files)
    assert {w.split("/")[0] for f in whole for w in f[7]} >= {"worker1@rec", "worker2@rec"}
    assert _findings(merged) == whole


GCLOUD_JSON = FIXTURES / "formats" / "gcp-logging" / "logs" / "gcloud-read.json"


def _gcloud_yaml(entries: list) -> str:
    """Entries as `gcloud logging read` prints them without --format: YAML documents between
    `---` lines, keys sorted, times quoted, long values wrapped, a multi-line text as a block."""
    import yaml

    class Printer(yaml.SafeDumper):
        pass

    Printer.add_representer(str, lambda dumper, value: dumper.represent_scalar(
        "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None))
    return yaml.dump_all(entries, Dumper=Printer, default_flow_style=False, sort_keys=True, width=80)


def _rows(path) -> list[str]:
    config = load_config(cwd=Path("/"))
    read = ingest([str(path)], config)
    return sorted(map(str, read.text_table().drop("source", "line", "format").rows()))


def test_gcloud_logging_read_yaml_gives_the_rows_of_its_json(tmp_path):
    """Before, each YAML line was a line of text: no record had a job, a worker or its time."""
    (tmp_path / "read.txt").write_text(_gcloud_yaml(orjson.loads(GCLOUD_JSON.read_bytes())))
    rows = _rows(tmp_path / "read.txt")
    assert len(rows) == 7 and rows == _rows(GCLOUD_JSON)


def test_a_yaml_document_that_does_not_parse_is_one_rejected_line(tmp_path):
    """A document damaged by hand (a tab where YAML wants spaces): one rejected line where it
    starts, named by file:line; the documents around it are read, and every line is accounted for."""
    text = _gcloud_yaml(orjson.loads(GCLOUD_JSON.read_bytes()))
    documents = text.split("---\n")
    documents[2] = documents[2].replace("\n  ", "\n\t", 1)
    (tmp_path / "read.txt").write_text("---\n".join(documents))
    config = load_config(cwd=Path("/"))
    read = ingest([str(tmp_path)], config)
    report = read.files[0]
    start = sum(len(d.splitlines()) + 1 for d in documents[:2]) + 1
    assert dict(report.rejected) == {"invalid_yaml": 1} and report.examples == {"invalid_yaml": start}
    assert report.records == 6 and report.lines == report.parsed + report.blank + report.rejected_total


# One YAML document of records: `aws logs filter-log-events --output yaml` (the API's key order),
# `kubectl get events -o yaml` (keys sorted, as sigs.k8s.io/yaml writes them).
YAML_DOCUMENTS = {
    "filter-log-events": (FIXTURES / "formats" / "cloudwatch-logs" / "logs" / "filter-log-events.json", False),
    "kubectl-events": (FIXTURES / "scenarios" / "k8s-graceful-drain" / "logs" / "kubectl-events.json", True),
}


@pytest.mark.parametrize("name", YAML_DOCUMENTS)
def test_one_yaml_document_of_records_gives_the_rows_of_its_json(tmp_path, name):
    """Before, a single YAML document (no `---` line) was lines of text: no record had a job, a
    worker or its time."""
    import yaml

    source, sort_keys = YAML_DOCUMENTS[name]
    (tmp_path / "export.yaml").write_text(yaml.safe_dump(orjson.loads(source.read_bytes()), sort_keys=sort_keys,
                                                         default_flow_style=False, width=80))
    rows = _rows(tmp_path / "export.yaml")
    assert len(rows) >= 5 and rows == _rows(source)
    report = ingest([str(tmp_path)], load_config(cwd=Path("/"))).files[0]
    assert "yaml-document" in report.format and report.rejected_total == 0


def test_one_gcloud_entry_without_a_separator_is_read_by_its_preset(tmp_path):
    """`gcloud logging read --limit 1` prints one entry and no `---` line: that entry, its
    jsonPayload the record, as in a file of several."""
    entry = orjson.loads(GCLOUD_JSON.read_bytes())[0]
    (tmp_path / "one.txt").write_text(_gcloud_yaml([entry]).removeprefix("---\n"))
    (tmp_path / "one.json").write_bytes(orjson.dumps([entry]))
    assert "---" not in (tmp_path / "one.txt").read_text()
    assert _rows(tmp_path / "one.txt") == _rows(tmp_path / "one.json") and len(_rows(tmp_path / "one.json")) == 1


@pytest.mark.parametrize("text", [
    ("Name:         notifier-7d9f8c6b5-x2x9k\nNamespace:    prod\nStatus:       Running\nEvents:\n  Type    Reason   Age\n"
     "  ----    ------   ----\n  Normal  Killing  2m    Stopping container worker\n"),  # kubectl describe: not YAML
    "summary:\n  jobs ran twice: 14\n\tworkers: 2\n  cause: deploy overlap\n",  # a tab: YAML refuses it
])
def test_text_that_looks_like_one_yaml_document_and_is_not_is_read_as_lines(tmp_path, text):
    (tmp_path / "notes.txt").write_text(text)
    report = ingest([str(tmp_path)], load_config(cwd=Path("/"))).files[0]
    assert "yaml" not in report.format and report.lines == len(text.splitlines())
    assert report.lines == report.parsed + report.blank + report.rejected_total


@pytest.mark.parametrize("text", [
    "deploy notes\n---\nrolled back: v2.14.0 to v2.13.9\n---\n",  # text with separators, not YAML's keys
    "---\ntitle: incident 4411\n---\n\nThe worker pool restarted at 07:16 and jobs ran twice.\nNo alert fired.\n",
])
def test_text_with_dashes_between_paragraphs_is_not_taken_for_yaml(tmp_path, text):
    (tmp_path / "notes.log").write_text(text)
    config = load_config(cwd=Path("/"))
    assert "yaml" not in ingest([str(tmp_path)], config).files[0].format


def test_filter_log_events_as_the_aws_cli_prints_text_gives_the_rows_of_its_json(tmp_path):
    """`--output text`: before, each event was a line of text with no time (rejected); the
    streams it searched are about the export, not records (neither rejected nor read)."""
    source = FIXTURES / "formats" / "cloudwatch-logs" / "logs" / "filter-log-events.json"
    export = orjson.loads(source.read_bytes())
    lines = ["\t".join(["EVENTS", e["eventId"], str(e["ingestionTime"]), e["logStreamName"], e["message"], str(e["timestamp"])])
             for e in export["events"]]
    lines += [f"SEARCHEDLOGSTREAMS\t{s['logStreamName']}\t{s['searchedCompletely']}" for s in export["searchedLogStreams"]]
    (tmp_path / "events.txt").write_text("\n".join(lines) + "\n")
    config = load_config(cwd=Path("/"))
    report = ingest([str(tmp_path)], config).files[0]
    assert report.format == "aws-cli-text" and report.rejected_total == 0
    assert report.records == ingest([str(source)], config).files[0].records and report.lines == len(lines)
    assert _rows(tmp_path / "events.txt") == _rows(source)
