"""Small files parsed together in batches give exactly what reading each file by itself gives."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import polars as pl
import pytest

import dupfind.ingest as ingest_module
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.schema import as_strings

FORMATS = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
CONFIG = load_config(cwd=Path("/"))


def _mixed_dir(root: Path) -> Path:
    """Two copies of several fixture logs (record layouts named after their worker file, framework
    grammars, dirty NDJSON), plus files with blank, undecodable and cut-off lines."""
    logs = root / "logs"
    logs.mkdir()
    for case in ("laravel-queue", "sidekiq", "celery-worker", "logger-conventions", "ndjson-dirty", "plain-text",
                 # envelopes: container runtimes' (a partial line joined), CLIs', shippers', a journal's
                 "docker-json", "cri-partial", "cli-exports", "loki", "journald", "log-shippers"):
        for path in sorted((FORMATS / case / "logs").iterdir()):
            for copy in ("a", "b"):
                shutil.copy(path, logs / f"{case}-{copy}-{path.name}")
    # Small container logs of JSON lines (a pod's few lines each): Docker's json-file, Vector's.
    synth = FORMATS.parent / "synth" / "lock-nonatomic" / "logs"
    for n, path in enumerate(sorted(synth.glob("worker-*.log"))):
        for k, line in enumerate(path.read_text().splitlines()[:6]):
            at = f"2026-07-21T10:00:{k:02d}.{n:03d}417Z"
            with open(logs / f"docker-{path.stem}-json.log", "a") as out:
                out.write(orjson.dumps({"log": line + "\n", "stream": "stdout", "time": at}).decode() + "\n")
            with open(logs / f"vector-{path.stem}.json", "a") as out:
                out.write(orjson.dumps({"message": line, "source_type": "kubernetes_logs", "timestamp": at,
                                        "kubernetes": {"pod_name": path.stem}}).decode() + "\n")
    good = b'{"ts":"2026-07-21T10:00:00Z","event":"job_started","job_id":"q-1"}\n'
    (logs / "dirty-1.log").write_bytes(
        good + b"\n   \n" + b'{"ts":"2026-07-21T10:00:01Z","event":"job_ac' + b"\n" + good
    )
    (logs / "dirty-2.log").write_bytes(b"\xff\xfe not utf-8\n" + good + b'{"event":"no time"}\n' + good.rstrip(b"\n"))
    (logs / "dirty-3.log").write_bytes(b'{"ts":"2026-07-21T10:00:02Z","event":"job_acked","job_id":"q-1"}{"ts":\n\n')
    (logs / "dirty-4-empty.log").write_bytes(b"")
    (logs / "dirty-5-bom.log").write_bytes(b"\xef\xbb\xbf" + good + good.replace(b"q-1", b"q-5"))
    return logs


def _read(path: Path, batch_bytes: int, monkeypatch, batched: list | None = None, deferred: list | None = None) -> tuple:
    monkeypatch.setattr(ingest_module, "BATCH_BYTES", batch_bytes)
    if deferred is not None:
        defer = ingest_module.Ingestor._defer

        def spy_defer(self, item):
            deferred.append(item.path)
            defer(self, item)

        monkeypatch.setattr(ingest_module.Ingestor, "_defer", spy_defer)
    if batched is not None:
        read_batch = ingest_module.Ingestor._read_batch

        def spy(self, items, envelope=""):
            done = read_batch(self, items, envelope)
            batched.append((len(items), done, envelope))
            return done

        monkeypatch.setattr(ingest_module.Ingestor, "_read_batch", spy)
    result = ingest([str(path)], CONFIG)
    monkeypatch.undo()
    reports = [
        (
            r.path,
            r.format,
            r.lines,
            r.parsed,
            r.records,
            r.blank,
            dict(r.rejected),
            r.examples,
            r.fields,
            r.first_ts,
            r.last_ts,
        )
        for r in result.files
    ]
    return result.table, result.rejects.sort("source", "line"), reports


@pytest.mark.parametrize("batch_bytes", [2048, 4096, 32768])
def test_batches_equal_file_by_file(tmp_path, monkeypatch, batch_bytes):
    logs = _mixed_dir(tmp_path)
    batched: list = []
    deferred: list = []
    table, rejects, reports = _read(logs, batch_bytes, monkeypatch, batched, deferred)
    alone_table, alone_rejects, alone_reports = _read(logs, 0, monkeypatch)  # a batch of one: file by file
    assert any(done and size > 1 for size, done, _ in batched)  # some files were parsed together
    if batch_bytes > 16384:  # files of envelopes count twice their bytes: only larger batches hold several
        assert any(done and size > 1 and envelope for size, done, envelope in batched)  # in one envelope too
    assert any(not done for _, done, _ in batched)  # a CRI log cut inside a line: its batch is read file by file
    assert not any(Path(item).name.startswith(("celery-worker", "sidekiq-a-sidekiq-6")) for item in deferred)  # read alone
    assert reports == alone_reports
    assert as_strings(table).equals(as_strings(alone_table))  # labels as text: each table has a pool of its own
    assert rejects.equals(alone_rejects)
    assert table.height > 0 and rejects.height > 0
    laravel = table.filter(pl.col("format") == "laravel-queue")
    assert laravel.height and laravel["worker_id"].null_count() == 0


def test_small_blocks_read_the_same(tmp_path, monkeypatch):
    """Blocks of a few kilobytes (reads in windows use 4 MB ones) cut files and batches elsewhere:
    the table, the rejects and every file's accounting are the same."""
    logs = _mixed_dir(tmp_path)
    big = logs / "big.log"
    big.write_bytes(b"".join(
        b'{"ts":"2026-07-21T10:%02d:%02dZ","event":"job_started","job_id":"b-%d","msg":"%s"}\n' % (i // 60 % 60, i % 60, i, b"x" * (i % 97))
        for i in range(3000)
    ))
    default = ingest([str(logs)], CONFIG)
    chunks: list[int] = []
    real_iter_chunks = ingest_module.iter_chunks

    def counted(stream, *args):
        for chunk in real_iter_chunks(stream, *args):
            chunks.append(len(chunk))
            yield chunk

    monkeypatch.setattr(ingest_module, "iter_chunks", counted)
    small = ingest([str(logs)], CONFIG, block_bytes=4096)
    monkeypatch.undo()
    assert len(chunks) > 20 and max(chunks) <= 2 * 4096  # the big file was read a few kilobytes at a time
    assert as_strings(small.table).equals(as_strings(default.table))
    assert small.rejects.sort("source", "line").equals(default.rejects.sort("source", "line"))
    assert [(r.path, r.lines, r.records, r.blank, dict(r.rejected)) for r in small.files] == \
        [(r.path, r.lines, r.records, r.blank, dict(r.rejected)) for r in default.files]


def test_windows_read_in_small_blocks(monkeypatch):
    from dupfind import windows

    seen: list = []
    init = ingest_module.Ingestor.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        seen.append(self.block_bytes)

    monkeypatch.setattr(ingest_module.Ingestor, "__init__", spy)
    survey = windows.survey_inputs([str(FORMATS / "ndjson-dirty" / "logs")], CONFIG, None, None)
    assert survey.table.height == 0 and seen == [windows.WINDOW_BLOCK_BYTES]
    ingest([str(FORMATS / "ndjson-dirty" / "logs")], CONFIG)
    assert seen[-1] is None  # one read: the default blocks


def test_files_of_a_batch_share_their_fields_and_never_change_each_others(tmp_path):
    """Small files with the same fields present share one `fields` value; a later batch that adds
    to one file's fields (a file read in two batches) leaves the others' as they were."""
    from dupfind.ingest import FileReport

    lines = [f'{{"ts":"2026-07-21T10:00:{i:02d}Z","event":"job_started","job_id":"s-{i}"}}\n' for i in range(3)]
    for i, line in enumerate(lines):
        (tmp_path / f"f{i}.log").write_text(line)
    files = ingest([str(tmp_path)], CONFIG).files
    assert files[0].fields == files[1].fields == files[2].fields and files[0].fields
    before = {column: list(paths) for column, paths in files[1].fields.items()}
    files[0].add_fields({"ts": ["time"], "queue": ["q"]})
    assert files[0].fields["ts"] == [*before["ts"], "time"] and files[0].fields["queue"] == ["q"]
    assert files[1].fields == before and files[2].fields == before

    report = FileReport(path="x.log")
    first = {"ts": ["a"]}
    report.add_fields(first)
    report.add_fields({"ts": ["a", "b", "b"], "job_id": []})
    assert report.fields == {"ts": ["a", "b"], "job_id": []} and first == {"ts": ["a"]}


def test_container_logs_with_partial_lines_are_parsed_together_as_one_by_one(tmp_path, monkeypatch):
    """Docker's json-file logs of several pods, a long line split into parts in some: parsed in one
    batch, each file's parts joined and counted as its own; a file that ends in a part (cut off
    while the runtime wrote a line) would join the next file's first line, so that batch is read
    file by file. Both as reading each file alone."""
    def docker(lines: list[tuple[str, bool]]) -> str:
        return "".join(orjson.dumps({"log": text + ("\n" if whole else ""), "stream": "stdout",
                                     "time": f"2026-07-21T10:00:{k:02d}.000000417Z"}).decode() + "\n"
                       for k, (text, whole) in enumerate(lines))

    def record(job: str, event: str, note: str = "") -> str:
        return orjson.dumps({"ts": "2026-07-21T10:00:00Z", "event": event, "job_id": job, "note": note}).decode()

    for ends_in_a_part in (False, True):
        logs = tmp_path / f"cut-{ends_in_a_part}"
        logs.mkdir()
        for n in range(4):
            long = record(f"j-{n}", "provider_request", "x" * 300)
            lines = [(record(f"j-{n}", "job_received"), True), (long[:120], False), (long[120:250], False), (long[250:], True),
                     (record(f"j-{n}", "job_succeeded"), True)]
            if ends_in_a_part and n == 1:
                lines.append((record(f"j-{n}", "job_acked")[:40], False))
            (logs / f"w{n}-json.log").write_text(docker(lines))
        batched: list = []
        table, rejects, reports = _read(logs, 1 << 20, monkeypatch, batched)
        alone_table, alone_rejects, alone_reports = _read(logs, 0, monkeypatch)
        assert batched == [(4, not ends_in_a_part, "docker")]
        assert reports == alone_reports and all(r[3] == r[2] - (r[0].endswith("w1-json.log") and ends_in_a_part) for r in reports)
        assert as_strings(table).equals(as_strings(alone_table)) and rejects.equals(alone_rejects)
        assert table.filter(pl.col("kind") == "side_effect").height == 4


def test_batches_of_long_lines_are_normalised_a_few_megabytes_at_a_time(tmp_path, monkeypatch):
    """Rows whose fields hold many bytes (a stack trace of 1,300 frames a line) are normalised in
    batches of NORMALISE_BATCH_BYTES, not NORMALISE_BATCH_ROWS: the same table, in more batches."""
    logs = _mixed_dir(tmp_path)
    trace = "\\n".join(f"    at Worker.step{k} (/app/worker.js:{k}:7)" for k in range(300))
    (logs / "traces.log").write_text("".join(
        f'{{"ts":"2026-07-21T10:{i // 60 % 60:02d}:{i % 60:02d}Z","event":"provider_error","job_id":"t-{i}",'
        f'"error":"Error: timeout\\n{trace}"}}\n' for i in range(400)
    ))
    normalize = ingest_module.normalize
    batches: list[int] = []

    def counted(raw, *args, **kwargs):
        batches.append(raw.height)
        return normalize(raw, *args, **kwargs)

    monkeypatch.setattr(ingest_module, "normalize", counted)
    default = ingest([str(logs)], CONFIG)
    by_rows = len(batches)
    batches.clear()
    monkeypatch.setattr(ingest_module, "NORMALISE_BATCH_BYTES", 1 << 20)  # a fifth of the traces' 5 MB
    small = ingest([str(logs)], CONFIG, block_bytes=256 << 10)
    assert len(batches) >= by_rows + 4 and max(batches) < 400
    assert as_strings(small.table).equals(as_strings(default.table))
    assert small.rejects.sort("source", "line").equals(default.rejects.sort("source", "line"))
