"""Wrap a scenario's NDJSON logs in the shapes log platforms export them in (test helper).

Each function takes the scenario's files ({file name: [(raw line, record)]}) and returns the files
of one export ({file name: bytes}), shaped as the platform writes them: its envelope keys, its time
format, its ordering, the fields it moves out of the application's record. One source file is one
log stream (a pod, a container, a unit), named after the file.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timezone
from pathlib import Path
from typing import Callable

from dupfind.presets import get_path

Lines = dict[str, list[tuple[str, dict]]]
TIME_KEYS = ("ts", "timestamp", "time", "@timestamp", "t")


def read_scenario(logs: Path) -> Lines:
    """The scenario's NDJSON files, line by line (raw text and decoded record)."""
    files: Lines = {}
    for path in sorted(logs.iterdir()):
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        files[path.stem] = [(line, json.loads(line)) for line in lines]
    return files


def _time(record: dict) -> datetime:
    for key in TIME_KEYS:
        value = get_path(record, key)
        if isinstance(value, str):
            return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(timezone.utc)
    raise ValueError(f"no time in {record}")


def _iso(ts: datetime, digits: int = 6) -> str:
    text = ts.strftime("%Y-%m-%dT%H:%M:%S.%f")
    return (text[: 20 + digits] if digits else text[:19]) + "Z"


def _ms(ts: datetime) -> int:
    return int(ts.timestamp() * 1000)


def _ns(ts: datetime) -> str:
    return str(int(ts.timestamp() * 1_000_000) * 1000)


def _chronological(files: Lines) -> list[tuple[str, str, dict, datetime]]:
    rows = [(stream, line, record, _time(record)) for stream, lines in files.items() for line, record in lines]
    return sorted(rows, key=lambda r: r[3])


def _without(record: dict, *keys: str) -> dict:
    return {k: v for k, v in record.items() if k not in keys}


def gcp_gcloud(files: Lines) -> dict[str, bytes]:
    """`gcloud logging read --format=json`: one array, newest first; the agent moved the time and
    severity out of jsonPayload."""
    entries = []
    for number, (stream, _, record, ts) in enumerate(_chronological(files)):
        severity = str(record.get("level") or record.get("severity") or "INFO").upper()
        entries.append({
            "insertId": f"{number:012x}",
            "jsonPayload": _without(record, *TIME_KEYS, "severity"),
            "labels": {"k8s-pod/app": "notifier", "k8s-pod/pod-template-hash": "7d9f8c6b5"},
            "logName": "projects/acme-prod/logs/stdout",
            "receiveTimestamp": _iso(ts, 6),
            "resource": {"type": "k8s_container", "labels": {"pod_name": stream, "namespace_name": "notifications"}},
            "severity": severity,
            "timestamp": _iso(ts),
        })
    return {"gcloud-read.json": json.dumps(entries[::-1], indent=2, sort_keys=True).encode()}


def cloudwatch_filter(files: Lines) -> dict[str, bytes]:
    """`aws logs filter-log-events`: events of every stream interleaved by time, the line verbatim."""
    events = [
        {"logStreamName": f"ecs/{stream}", "timestamp": _ms(ts), "message": line, "ingestionTime": _ms(ts) + 420,
         "eventId": f"{index:056d}"}
        for index, (stream, line, _, ts) in enumerate(_chronological(files))
    ]
    return {"filter-log-events.json": json.dumps({"events": events, "searchedLogStreams": []}, indent=4).encode()}


def _subscription_messages(files: Lines) -> list[tuple[datetime, str]]:
    """CloudWatch Logs' subscription messages of the streams: each stream's events in batches
    of up to 8 within 2 s (as the service delivers them), with the time the batch was sent."""
    messages = []
    index = 0
    for stream, lines in files.items():
        batch: list[dict] = []
        for line, record in lines + [("", None)]:
            ts = _time(record) if record is not None else None
            if batch and (ts is None or len(batch) == 8 or _ms(ts) - batch[0]["timestamp"] > 2000):
                messages.append((datetime.fromtimestamp(batch[-1]["timestamp"] / 1000, UTC), json.dumps({
                    "messageType": "DATA_MESSAGE", "owner": "481516234200", "logGroup": "/ecs/notifier",
                    "logStream": f"ecs/worker/{stream}", "subscriptionFilters": ["to-firehose"], "logEvents": batch,
                }, separators=(",", ":"))))
                batch = []
            if ts is not None:
                batch.append({"id": f"{index:056d}", "timestamp": _ms(ts), "message": line})
                index += 1
    return sorted(messages, key=lambda m: m[0])


def firehose_s3(files: Lines) -> dict[str, bytes]:
    """Kinesis Data Firehose's S3 objects of a subscription, no compression of its own: each
    message a gzip member as CloudWatch Logs sent it, back to back, an object a minute."""
    import gzip

    objects: dict[str, bytes] = {}
    for sent, message in _subscription_messages(files):
        name = f"notifier-logs-1-{sent:%Y-%m-%d-%H-%M}-00-5f2b7a1c"
        objects[name] = objects.get(name, b"") + gzip.compress(message.encode(), mtime=0)
    return objects


def firehose_s3_lines(files: Lines) -> dict[str, bytes]:
    """The same, decompressed by Firehose and written one message a line."""
    return {"notifier-logs.ndjson": "".join(message + "\n" for _, message in _subscription_messages(files)).encode()}


def _insights_rows(files: Lines) -> list[dict]:
    return [
        {"@timestamp": _iso(ts, 3).replace("T", " ").rstrip("Z"), "@message": line, "@logStream": stream,
         "@log": "481516234200:/ecs/notifier"}
        for stream, line, _, ts in reversed(_chronological(files))
    ]


def insights_json(files: Lines) -> dict[str, bytes]:
    """Logs Insights console download: newest first, `@timestamp` in UTC without a zone."""
    return {"logs-insights-results.json": json.dumps(_insights_rows(files), indent=2).encode()}


def insights_csv(files: Lines) -> dict[str, bytes]:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["@timestamp", "@message", "@logStream", "@log"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(_insights_rows(files))
    return {"logs-insights-results.csv": out.getvalue().encode()}


def insights_query_results(files: Lines) -> dict[str, bytes]:
    """`aws logs get-query-results`: rows of field/value pairs."""
    results = [[{"field": k, "value": v} for k, v in row.items()] for row in _insights_rows(files)]
    return {"get-query-results.json": json.dumps({"results": results, "status": "Complete"}, indent=4).encode()}


def elasticsearch(files: Lines) -> dict[str, bytes]:
    """Search hits of Filebeat documents whose JSON line was not decoded (still in `message`)."""
    hits = [
        {"_index": "logs-notifier", "_id": f"{index:020x}", "_score": None, "sort": [_ms(ts)],
         "_source": {"@timestamp": _iso(ts, 3), "message": line, "kubernetes": {"pod": {"name": stream}},
                     "host": {"name": "gke-node-1"}, "stream": "stdout", "ecs": {"version": "8.0.0"}}}
        for index, (stream, line, _, ts) in enumerate(_chronological(files))
    ]
    return {"search.json": json.dumps({"took": 9, "timed_out": False, "hits": {"hits": hits}}, indent=2).encode()}


def elasticsearch_fluent_bit(files: Lines) -> dict[str, bytes]:
    """Search hits of Fluent Bit documents (tail input with the `cri` multiline parser, the
    kubernetes filter's defaults, es output with Logstash_Format): the line in `log`, the runtime's
    time in `time`, pod fields flat under `kubernetes`; elasticdump's one hit a line."""
    def hit(index: int, stream: str, line: str, ts: datetime) -> str:
        return json.dumps({"_index": f"logstash-{ts:%Y.%m.%d}", "_id": f"{index:020x}", "_source": {
            "@timestamp": _iso(ts, 3), "time": _iso(ts)[:-1] + "123Z", "stream": "stdout", "_p": "F", "log": line,
            "kubernetes": {"pod_name": stream, "namespace_name": "notifications", "container_name": "worker",
                           "host": "gke-node-1", "labels": {"app": "notifier"}}}})

    return {"fluent-bit-hits.ndjson": "".join(
        hit(index, stream, line, ts) + "\n" for index, (stream, line, _, ts) in enumerate(_chronological(files))).encode()}


def fluent_bit_s3(files: Lines) -> dict[str, bytes]:
    """Fluent Bit's s3 output (one object a tag: a pod's file; `json_date_key` date as epoch
    seconds), records of the tail input with the `cri` multiline parser and the kubernetes filter."""
    def record(stream: str, line: str, ts: datetime) -> str:
        return json.dumps({"date": round(ts.timestamp(), 6), "time": _iso(ts)[:-1] + "123Z", "stream": "stdout",
                           "_p": "F", "log": line, "kubernetes": {"pod_name": stream, "namespace_name": "notifications",
                                                                   "container_name": "worker", "host": "gke-node-1"}})

    return {f"kube.var.log.containers.{stream}.log-{ts.isoformat()[:10]}.json": "".join(
        record(stream, line, _time(rec)) + "\n" for line, rec in lines).encode()
        for stream, lines in files.items() if lines for ts in [_time(lines[0][1])]}


def loki_jsonl(files: Lines) -> dict[str, bytes]:
    lines = [
        json.dumps({"labels": {"pod": stream, "stream": "stdout"}, "line": line, "timestamp": _iso(ts)[:-1] + "000Z"})
        for stream, line, _, ts in _chronological(files)
    ]
    return {"logcli.jsonl": ("\n".join(lines) + "\n").encode()}


def loki_text(files: Lines) -> dict[str, bytes]:
    """logcli's default output: the time in whole seconds, then the labels, then the line."""
    lines = [f'{_iso(ts, 0)} {{pod="{stream}"}} {line}' for stream, line, _, ts in _chronological(files)]
    return {"logcli.log": ("\n".join(lines) + "\n").encode()}


def datadog(files: Lines) -> dict[str, bytes]:
    """Logs API export: Datadog moved the time, status and message up out of the record."""
    data = []
    for index, (stream, _, record, ts) in enumerate(_chronological(files)):
        message = record.get("message") or record.get("msg") or ""
        data.append({"id": f"AQAAA{index:020d}", "type": "log", "attributes": {
            "timestamp": _iso(ts, 3), "host": "i-0a1b2c3d", "service": "notifier",
            "status": str(record.get("level") or record.get("severity") or "info").lower(), "message": message,
            "tags": [f"pod_name:{stream}", "env:prod"],
            "attributes": _without(record, *TIME_KEYS, "message", "msg", "level", "severity"),
        }})
    return {"logs-export.json": json.dumps({"data": data, "meta": {"status": "done"}}, indent=2).encode()}


def journald(files: Lines) -> dict[str, bytes]:
    lines = [
        json.dumps({"__REALTIME_TIMESTAMP": str(int(ts.timestamp() * 1_000_000)), "_HOSTNAME": stream, "_PID": "1",
                    "_SYSTEMD_UNIT": "notifier.service", "PRIORITY": "6", "MESSAGE": line})
        for stream, line, _, ts in _chronological(files)
    ]
    return {"journal.json": ("\n".join(lines) + "\n").encode()}


def otlp(files: Lines) -> dict[str, bytes]:
    """The collector's file exporter: one request a line, one resource (a stream) each."""
    out = []
    for stream, lines in files.items():
        records = [{"timeUnixNano": _ns(_time(record)), "severityText": "INFO", "body": {"stringValue": line}}
                   for line, record in lines]
        resource = {"attributes": [{"key": "k8s.pod.name", "value": {"stringValue": stream}}]}
        scope = {"scope": {}, "logRecords": records}
        out.append(json.dumps({"resourceLogs": [{"resource": resource, "scopeLogs": [scope]}]}))
    return {"otel-logs.jsonl": ("\n".join(out) + "\n").encode()}


def docker(files: Lines) -> dict[str, bytes]:
    def entry(line: str, record: dict) -> str:
        return json.dumps({"log": line + "\n", "stream": "stdout", "time": _iso(_time(record))}) + "\n"

    return {f"{stream}-json.log": "".join(entry(*item) for item in lines).encode() for stream, lines in files.items()}


def cri(files: Lines) -> dict[str, bytes]:
    return {f"{stream}.log": "".join(
        f"{_iso(_time(record), 6)} stdout F {line}\n" for line, record in lines
    ).encode() for stream, lines in files.items()}


PLATFORMS: dict[str, Callable[[Lines], dict[str, bytes]]] = {
    "gcp-gcloud": gcp_gcloud, "cloudwatch-filter-log-events": cloudwatch_filter, "insights-json": insights_json,
    "insights-csv": insights_csv, "insights-get-query-results": insights_query_results, "elasticsearch": elasticsearch,
    "elasticsearch-fluent-bit": elasticsearch_fluent_bit, "fluent-bit-s3": fluent_bit_s3,
    "firehose-s3": firehose_s3, "firehose-s3-lines": firehose_s3_lines,
    "loki-jsonl": loki_jsonl, "loki-text": loki_text, "datadog": datadog, "journald": journald, "otlp": otlp,
    "docker": docker, "cri": cri,
}


def write_export(files: Lines, platform: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, data in PLATFORMS[platform](files).items():
        (out / name).write_bytes(data)
