"""`dupfind timeline`: window selection, the 80-column and 200-worker terminal views, JSON, offline HTML."""

from __future__ import annotations

import html.parser
import json
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import orjson
import pytest

from conftest import FIXTURES, run_cli

OVERLAP = FIXTURES / "synth" / "deploy-overlap" / "logs"
K8S = FIXTURES / "scenarios" / "k8s-sigterm-keep-polling" / "logs"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def _json(*args: str) -> dict:
    proc = run_cli("timeline", *args, "--format", "json")
    assert proc.returncode == 0, proc.stderr.decode()
    return orjson.loads(proc.stdout)


def _executions(window: dict) -> list[dict]:
    return [e for g in window["generations"] for w in g["workers"] for e in w["executions"]]


def test_default_is_each_deploy_that_replaced_a_generation():
    doc = _json(str(OVERLAP))
    assert doc["schema"] == "dupfind.timeline/1"
    assert [w["deploy"]["deploy"] for w in doc["windows"]] == ["v4.24.5"]
    window = doc["windows"][0]
    assert [g["generation"] for g in window["generations"]] == ["v4.24.4", "v4.24.5"]
    old = window["generations"][0]["workers"]
    assert {w["end_kind"] for w in old} == {"killed"} and all(w["stop"] for w in old)
    execs = _executions(window)
    cut = [e for e in execs if e["state"] == "interrupted"]
    assert len(cut) == 4 and all(e["duplicate"] for e in cut)
    repeats = [e for e in execs if e["repeat"]]
    assert len(repeats) == 4 and {e["worker"] for e in repeats} <= {
        w["worker"] for w in window["generations"][1]["workers"]
    }
    for e in execs:
        source, _, line = e["where"].rpartition(":")
        assert Path(source).is_file() and int(line) >= 1
        assert e["ids"]["job_id"]
    assert window["summary"]["duplicates_in_window"] == 4 and window["summary"]["duplicates_outside_window"] == 0
    assert window["overlap"]["seconds"] > 30


def test_deploy_and_around_select_windows():
    doc = _json(str(OVERLAP), "--deploy", "v4.24.4")
    assert doc["windows"][0]["deploy"]["previous"] is None
    doc = _json(str(OVERLAP), "--around", "2026-07-21T10:01:30Z", "--window", "60s")
    window = doc["windows"][0]
    assert (window["start"], window["end"]) == ("2026-07-21T10:01:00.000Z", "2026-07-21T10:02:00.000Z")
    for e in _executions(window):
        assert e["start"] <= window["end"] and e["end"] >= window["start"]


def test_without_deploys_the_busiest_duplicate_period_is_shown(tmp_path):
    source = FIXTURES / "synth" / "visibility-timeout" / "logs"
    for path in source.iterdir():
        if path.name != "deploy.log":
            shutil.copy(path, tmp_path / path.name)
    truth = orjson.loads((source.parent / "truth.json").read_bytes())
    doc = _json(str(tmp_path), "--window", "2m")
    (window,) = doc["windows"]
    assert window["reason"] == "busiest" and window["deploy"] is None
    start, end = (datetime.fromisoformat(window[k].replace("Z", "+00:00")) for k in ("start", "end"))
    assert end - start == timedelta(minutes=2)
    repeated = [
        datetime.fromisoformat(e["at"].replace("Z", "+00:00"))
        for a in truth["actions"]
        if a["duplicated"]
        for e in a["side_effects"][1:]
    ]
    inside = sum(start <= t <= end for t in repeated)
    # No other 2-minute window starting at a duplicate holds more of them (clock skew: 1 s slack).
    best = max(sum(t <= u <= t + timedelta(minutes=2) for u in repeated) for t in repeated)
    assert inside >= best - 1 and window["summary"]["duplicates_in_window"] >= best - 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["--deploy", "v9"], "--deploy 'v9' was not found"),
        (["--around", "yesterday-ish"], "--around"),
        (["--window", "ten minutes", "--around", "2026-07-21T10:00:00Z"], "--window"),
        (["--deploy", "v4.24.5", "--around", "2026-07-21T10:00:00Z"], "give one of them"),
    ],
)
def test_bad_options_are_one_line_errors(args, message):
    proc = run_cli("timeline", str(OVERLAP), *args)
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert proc.stdout == b""


def test_terminal_view_fits_80_columns():
    proc = run_cli("timeline", str(K8S), "--width", "80")
    assert proc.returncode == 0, proc.stderr.decode()
    text = proc.stdout.decode()
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    assert "\x1b" not in text
    rows = [line for line in lines if line.startswith("…")]
    assert len(rows) == 4
    old = [r for r in rows if "7d9f8c6b5" in r]
    assert all("S" in r[21:] and "?" in r[21:] for r in old), old
    assert "inferred from pod template hash" in text
    assert "3 of 3 duplicated side effect(s) happened within" in text


def _many_workers(folder: Path, workers: int = 200) -> None:
    """Two generations of 100 pods each; every old pod drains, a few take one job after SIGTERM."""
    folder.mkdir()
    t0 = datetime(2026, 3, 2, 14, 0, tzinfo=timezone.utc)
    ts = lambda s: (t0 + timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # noqa: E731
    deploy = [{"ts": ts(300), "event": "deploy_started", "deployment_id": "v2"}]
    half = workers // 2
    for i in range(workers):
        gen, pod = ("v1", f"worker-v1-{i:03d}") if i < half else ("v2", f"worker-v2-{i:03d}")
        start = 0 if gen == "v1" else 300 + (i - half) * 1.5
        lines = [{"ts": ts(start), "event": "worker_started", "worker_id": pod, "deployment_id": gen}]
        stop = 305 + i * 1.5 if gen == "v1" else None
        for j in range(6):
            begin = start + 20 + j * 97 + (i % 7)
            if stop is not None and begin > stop - 10:
                break
            job = f"job-{i}-{j}"
            base = {"worker_id": pod, "deployment_id": gen, "job_id": job, "attempt": 1}
            lines += [
                {"ts": ts(begin), "event": "job_received", **base},
                {"ts": ts(begin + 4), "event": "email_sent", **base},
                {"ts": ts(begin + 9), "event": "job_acked", **base},
            ]
        if stop is not None and i % 25 == 0:
            base = {"worker_id": pod, "deployment_id": gen, "job_id": f"job-{i}-late", "attempt": 1}
            lines += [
                {"ts": ts(stop + 2), "event": "job_received", **base},
                {"ts": ts(stop + 4), "event": "email_sent", **base},
                {"ts": ts(stop + 6), "event": "job_acked", **base},
            ]
        if stop is not None:
            lines.append({"ts": ts(stop), "event": "sigterm_received", "worker_id": pod, "deployment_id": gen})
            lines.append({"ts": ts(stop + 12), "event": "worker_exited", "worker_id": pod, "deployment_id": gen})
        (folder / f"{pod}.log").write_text("".join(json.dumps(x) + "\n" for x in sorted(lines, key=lambda x: x["ts"])))
    (folder / "deploy.log").write_text("".join(json.dumps(x) + "\n" for x in deploy))


def test_two_hundred_workers_are_aggregated(tmp_path):
    _many_workers(tmp_path / "logs")
    proc = run_cli("timeline", str(tmp_path / "logs"), "--width", "80", "--max-rows", "20")
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.decode().splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert len(lines) < 40
    assert sum("more workers" in line for line in lines) == 2
    # The workers that took a job after SIGTERM are the ones kept as rows of their own.
    doc = _json(str(tmp_path / "logs"))
    took = {w["worker"] for g in doc["windows"][0]["generations"] for w in g["workers"] if w["flags"]["after_stop"]}
    assert took and all(any(w[-3:] in line for line in lines) for w in took)


class _Collect(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.scripts, self._in_script = [], [], False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts.append(data)


def _render_html(tmp_path, logs: Path) -> tuple[str, dict]:
    out = tmp_path / "timeline.html"
    proc = run_cli("timeline", str(logs), "--html", str(out), "--format", "json")
    assert proc.returncode == 0, proc.stderr.decode()
    return out.read_text(), orjson.loads(proc.stdout)


def test_html_is_self_contained_and_carries_the_execution_details(tmp_path):
    page, doc = _render_html(tmp_path, K8S)
    parser = _Collect()
    parser.feed(page)
    for tag, attrs in parser.tags:
        assert not any(
            str(v).startswith(("http:", "https:", "//")) for k, v in attrs.items() if k in ("src", "href")
        ), (tag, attrs)
    assert tag != "link" and "@import" not in page and "url(" not in page
    data = next(t for t, a in parser.tags if t == "script" and a.get("id") == "timeline-data")
    embedded = json.loads(parser.scripts[0])
    assert data == "script" and embedded == doc
    execs = _executions(embedded["windows"][0])
    killed = [e for e in execs if e["state"] == "interrupted"]
    assert killed and all(e["where"].startswith(str(K8S)) for e in killed)
    assert "hover or click a bar" in page and "zoom in" in page


def test_html_neutralises_hostile_log_text(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    evil = "w</script><script>alert(1)</script>"
    rows = [
        {"ts": "2026-03-02T14:00:00Z", "event": "worker_started", "worker_id": evil, "deployment_id": "v1<b>"},
        {
            "ts": "2026-03-02T14:00:01Z",
            "event": "job_received",
            "worker_id": evil,
            "job_id": "j-1<img src=x onerror=alert(2)>",
        },
        {
            "ts": "2026-03-02T14:00:02Z",
            "event": "email_sent",
            "worker_id": evil,
            "job_id": "j-1<img src=x onerror=alert(2)>",
        },
        {
            "ts": "2026-03-02T14:00:03Z",
            "event": "job_acked",
            "worker_id": evil,
            "job_id": "j-1<img src=x onerror=alert(2)>",
        },
    ]
    (logs / "w.log").write_text("".join(json.dumps(r) + "\n" for r in rows))
    page, doc = _render_html(tmp_path, logs)
    assert "<script>alert(1)" not in page and "<img src=x" not in page and "<b>" not in page
    assert len(re.findall(r"<script", page)) == 2
    assert doc["windows"][0]["generations"][0]["workers"][0]["worker"] == evil


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian package chromium)")
def test_html_draws_every_execution_in_headless_chromium(tmp_path):
    page, doc = _render_html(tmp_path, OVERLAP)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
    url = (tmp_path / "timeline.html").as_uri()
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", url], capture_output=True, timeout=120).stdout.decode()
    bars = re.findall(r'<rect [^>]*data-exec="(\d+)"', dom)
    assert sorted(map(int, bars)) == sorted(e["id"] for e in _executions(doc["windows"][0]))
    assert dom.count('class="exec dup') == sum(e["duplicate"] for e in _executions(doc["windows"][0]))
    shot = tmp_path / "shot.png"
    subprocess.run(
        [CHROMIUM, *flags, "--window-size=1200,900", f"--screenshot={shot}", url], capture_output=True, timeout=120
    )
    assert shot.is_file() and shot.stat().st_size > 10_000


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian package chromium)")
def test_html_names_each_services_generation_in_headless_chromium(tmp_path):
    """Three services' versions: the page labels each generation with its service, as the terminal does."""
    _render_html(tmp_path, FIXTURES / "scenarios" / "kafka-fanout-two-services-control" / "logs")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", (tmp_path / "timeline.html").as_uri()],
                         capture_output=True, timeout=120, check=False).stdout.decode()
    labels = re.findall(r'<text [^>]*class="gen"[^>]*>([^<]*)</text>', dom)
    assert sorted(labels) == ["notifier 3.8.2 (2 workers)", "orders-api 5.2.1 (1 worker)", "search-indexer 1.14.0 (2 workers)"]


def _odd_text_logs(tmp_path: Path) -> Path:
    """One worker whose ids and names hold quotes, backslashes, control characters and non-ASCII
    text, and one action that carries five job ids (an entry lists four)."""
    logs = tmp_path / "odd"
    logs.mkdir()
    worker = 'pod "a"\\b\u00e9\U0001F600'
    rows = [{"ts": "2026-03-02T14:00:00Z", "event": "worker_started", "worker_id": worker, "deployment_id": "v1"}]
    for n, job in enumerate(["j\"1", "j\\2", "j\u00013\n", "j\u2028-4", "j5\U0001F4E7"]):
        at = f"2026-03-02T14:00:{2 * n + 1:02d}Z"
        common = {"worker_id": worker, "job_id": job, "idempotency_key": "ord-7:confirm"}
        rows += [{"ts": at, "event": "job_received", **common},
                 {"ts": at.replace(f"{2 * n + 1:02d}Z", f"{2 * n + 2:02d}Z"), "event": "email_sent", **common}]
    (logs / "w.log").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return logs


def _partial_ids_logs(tmp_path: Path) -> Path:
    """Jobs of which only some carry an order id: entries whose `ids` lack a key the others have."""
    logs = tmp_path / "partial"
    logs.mkdir()
    rows = [{"ts": "2026-03-02T14:00:00Z", "event": "worker_started", "worker_id": "w-1", "deployment_id": "v1"}]
    for n in range(4):
        at = f"2026-03-02T14:00:{2 * n + 1:02d}Z"
        common = {"worker_id": "w-1", "job_id": f"job-{n}", **({"order_id": f"ord-{n}"} if n % 2 else {})}
        rows += [{"ts": at, "event": "job_received", **common},
                 {"ts": at.replace(f"{2 * n + 1:02d}Z", f"{2 * n + 2:02d}Z"), "event": "email_sent", **common}]
    (logs / "w.log").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return logs


@pytest.mark.parametrize("folder", ["overlap", "k8s", "odd", "around", "partial"])
def test_json_from_polars_text_is_the_documents_json(tmp_path, folder):
    """`--format json` writes each execution's entry as text from polars (timeline_document with
    as_json); the other views read the document's dicts. Both must dump to the same bytes: an
    indented document with each entry on one line."""
    from dupfind.analyze import analyze
    from dupfind.config import load_config
    from dupfind.ingest import ingest
    from dupfind.rules_registry import load_rules
    from dupfind.timeline import entries_on_one_line, select_windows, timeline_document

    logs = {"overlap": OVERLAP, "k8s": K8S, "around": OVERLAP}.get(folder) or (
        _partial_ids_logs(tmp_path) if folder == "partial" else _odd_text_logs(tmp_path))
    config = load_config(None, None, None)
    report = analyze(ingest([str(logs)], config), config, load_rules(config))
    around = datetime(2026, 7, 21, 10, 1, 30, tzinfo=timezone.utc) if folder == "around" else None
    windows = select_windows(report, None, around, 1200.0 if around else 600.0)  # --window: 20m, and the default
    as_text = orjson.dumps(timeline_document(report, windows, as_json=True), option=orjson.OPT_INDENT_2)
    document = timeline_document(report, windows)
    as_dicts = orjson.dumps(entries_on_one_line(document), option=orjson.OPT_INDENT_2)
    assert as_text == as_dicts
    assert orjson.loads(as_text) == document
    lines = as_text.decode().split("\n")  # not splitlines: an id may hold U+2028, which orjson writes as is
    for entry in _executions(document["windows"][0]):
        [line] = [x for x in lines if x.lstrip().startswith('{"id":%d,' % entry["id"])]
        assert orjson.loads(line.rstrip(",")) == entry
    entries = _executions(orjson.loads(as_text)["windows"][0])
    if folder == "partial":  # some entries lack the order id
        assert sorted(sorted(e["ids"]) for e in entries) == [["job_id"]] * 2 + [["job_id", "order_id"]] * 2
    else:
        assert entries and all(e["ids"] for e in entries)
    if folder == "odd":
        assert entries[0]["ids"]["job_id"] == sorted(["j\"1", "j\\2", "j\u00013", "j\u2028-4", "j5\U0001F4E7"])[:4]
    cli = run_cli("timeline", str(logs), "--format", "json", "--no-cache",
                  *(["--around", "2026-07-21T10:01:30Z", "--window", "20m"] if around else []))
    assert cli.returncode == 0 and cli.stdout == as_text + b"\n"


@pytest.mark.parametrize("count", [0, 1, 3])
def test_a_document_written_a_window_at_a_time_is_its_whole_dump(count):
    """`--format json` writes each window as timeline_parts makes it (write_document_json): the
    bytes of the whole document's dump, one chunk a window."""
    from dupfind.timeline import write_document_json

    head = {"schema": "dupfind.timeline/1", "verdict": "harmful_duplicates"}
    views = [
        {"title": f"deploy v{i}", "generations": [{"workers": [
            {"worker": "w-1", "executions": [orjson.Fragment(f'{{"id":{i},"ids":{{"job_id":["j\u2028{i}"]}}}}'.encode())]},
            {"worker": "w-2", "executions": []},
        ]}], "summary": {"executions": i, "overlap_s": None}}
        for i in range(count)
    ]
    chunks: list[bytes] = []
    write_document_json(head, iter(views), chunks.append)
    assert b"".join(chunks) == orjson.dumps({**head, "windows": views}, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    assert len(chunks) == (count + 2 if count else 1)


@pytest.mark.parametrize("folder", ["overlap", "k8s"])
def test_the_terminal_view_draws_the_same_from_its_own_fields(folder):
    """The terminal view builds a document holding only what it draws of each execution
    (DRAWN_ENTRY_FIELDS), its bars worked out by polars (bar_width); drawn from the whole document
    it gives the same text, in color too, at any width, with workers summed in a row or not."""
    import io

    from rich.console import Console

    from dupfind.analyze import analyze
    from dupfind.config import load_config
    from dupfind.ingest import ingest
    from dupfind.render.timeline_text import DRAWN_ENTRY_FIELDS, bar_width, render_timeline
    from dupfind.rules_registry import load_rules
    from dupfind.timeline import select_windows, timeline_document

    logs = {"overlap": OVERLAP, "k8s": K8S}[folder]
    config = load_config(None, None, None)
    report = analyze(ingest([str(logs)], config), config, load_rules(config))
    windows = select_windows(report, None, None, 600.0)
    whole, drawn = timeline_document(report, windows), timeline_document(report, windows, entry_fields=DRAWN_ENTRY_FIELDS)
    assert _executions(drawn["windows"][0]) and all(set(e) == set(DRAWN_ENTRY_FIELDS) for e in _executions(drawn["windows"][0]))
    states = {(e["state"], e["duplicate"]) for w in whole["windows"] for e in _executions(w)}
    assert ("completed", True) in states or ("interrupted", False) in states  # bars of more than one kind

    def text(document: dict, color: bool, width: int = 100, max_rows: int = 40) -> str:
        console = Console(file=io.StringIO(), width=width, force_terminal=color,
                          color_system="truecolor" if color else None, highlight=False, soft_wrap=False)
        render_timeline(document, console, max_rows)
        return console.file.getvalue()

    for color in (False, True):
        assert text(drawn, color) == text(whole, color)
    for width, max_rows in ((100, 40), (100, 4), (57, 4), (181, 5)):
        cells = timeline_document(report, windows, entry_fields=DRAWN_ENTRY_FIELDS, bar_width=bar_width(width))
        assert all("cells" in w and "executions" not in w for g in cells["windows"][0]["generations"] for w in g["workers"])
        for color in (False, True):
            assert text(cells, color, width, max_rows) == text(whole, color, width, max_rows)
    if folder == "overlap":  # rows of workers summed drawn too
        assert "more workers" in text(whole, False, 100, 4)
    plain = run_cli("timeline", str(logs), "--no-cache")
    assert plain.returncode == 0 and plain.stdout.decode() == text(whole, False)


@pytest.mark.parametrize("window", [
    ("2026-07-21T09:59:57.045Z", "2026-07-21T10:09:57.045Z", 73),
    ("2026-07-21T09:59:57.000Z", "2026-07-21T09:59:58.337Z", 173),
    ("1969-12-31T23:59:00.001Z", "1970-01-01T00:01:00.999Z", 40),
])
def test_a_time_in_milliseconds_lands_in_the_column_of_its_text(window):
    """The terminal view places bars by `start_ms`/`end_ms`; a whole document's entries carry the
    texts: both give the same column, at every millisecond of the window and beyond its edges."""
    import random
    from datetime import datetime, timedelta, timezone

    from dupfind.render.timeline_text import _Scale

    scale = _Scale(*window)
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    first = (scale.start - epoch) // timedelta(milliseconds=1)
    last = (scale.end - epoch) // timedelta(milliseconds=1)
    span = last - first
    rng = random.Random(7)
    times = [first - 5, first, first + 1, last - 1, last, last + 5]
    times += [first + round(span * c / scale.width) + d for c in range(scale.width + 1) for d in (-1, 0, 1)]
    times += [rng.randint(first, last) for _ in range(2000)]
    for ms in times:
        text = (epoch + timedelta(milliseconds=ms)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        assert scale.col_ms(ms) == scale.col(text), (ms, text)


def test_an_actions_ids_are_its_first_four_distinct_values_in_their_order() -> None:
    """id_samples lists, per action and id column, the first four distinct values as the column
    orders them: by number for a column of numbers (10 after 9), by text for a coded column (codes
    sort as their texts), none for an action without one; each action once."""
    from types import SimpleNamespace

    import polars as pl

    from dupfind.analysis import AnalysisContext
    from dupfind.textcodes import Texts

    texts = Texts(pl.Series("text", ["a-1", "a-10", "a-2", "b-7", "z"]), ("event_id",))
    records = pl.LazyFrame({
        "action_id": [1, 1, 1, 1, 1, 1, 1, 2, 2, 3],
        "job_id": [13, 9, 10, None, 11, 9, 12, 5, 5, None],
        "event_id": pl.Series([4, 2, 0, 1, 1, 3, None, None, 3, None], dtype=pl.UInt32),
    })
    samples = AnalysisContext._id_samples(SimpleNamespace(texts=texts), records).sort("action_id")
    assert samples["action_id"].to_list() == [1, 2, 3]
    assert samples["id:job_id"].to_list() == [["9", "10", "11", "12"], ["5"], []]
    assert samples["id:event_id"].to_list() == [["a-1", "a-10", "a-2", "b-7"], ["b-7"], []]


@pytest.mark.parametrize("logs", [OVERLAP, K8S])
def test_the_ids_of_the_actions_a_view_shows_are_those_of_every_action(logs: Path) -> None:
    """A timeline works out the ids it lists only for the actions it shows (id_samples_of): the
    same rows as the frame of every action's."""
    import polars as pl

    from dupfind.analysis import AnalysisContext
    from dupfind.config import load_config
    from dupfind.ingest import ingest
    from dupfind.pipeline import correlate_inputs

    config = load_config(None, None, None)
    read = ingest([str(logs)], config)
    correlation = correlate_inputs(read.table, config, texts=read.texts)
    actions = AnalysisContext(correlation, config).id_samples["action_id"]
    assert actions.len() > 5
    shown = actions.sort().gather_every(3)
    alone = AnalysisContext(correlation, config).id_samples_of(shown).sort("action_id")
    every = AnalysisContext(correlation, config).id_samples.filter(pl.col("action_id").is_in(shown.implode()))
    assert alone.equals(every.sort("action_id")) and alone.height == shown.len()
    assert alone.columns == every.columns and len(alone.columns) > 2


def _consumer_lines(pod: str, version: str, start: float) -> list[dict]:
    """A consumer pod's start and a few runs, every line naming its version."""
    t0 = datetime(2026, 12, 8, 14, 0, tzinfo=UTC)
    def at(s: float) -> str:
        return (t0 + timedelta(seconds=start + s)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    rows = [{"ts": at(0), "event": "worker_started", "pod": pod, "version": version}]
    for i in range(3):
        base = {"pod": pod, "version": version, "job_id": f"{pod}-j{i}"}
        rows += [{"ts": at(1 + i), "event": "job_started", **base}, {"ts": at(1.2 + i), "event": "job_finished", **base}]
    return rows


def test_generations_of_several_services_are_named_by_service_even_where_their_versions_agree(tmp_path):
    """Two services that both run 2.0.0, and a third: three generations, each named by its service
    (before 2026-12-07 one `2.0.0` generation held both services' pods)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    pods = {"notifier-6f7d9c8b5-k2x4p": "2.0.0", "notifier-6f7d9c8b5-q8m2z": "2.0.0",
            "search-indexer-7c9b8d6f4-h5t2n": "2.0.0", "orders-api-5d8f7b6c9-x7vq2": "5.2.1"}
    for n, (pod, version) in enumerate(pods.items()):
        (logs / f"{pod}.log").write_text("".join(json.dumps(r) + "\n" for r in _consumer_lines(pod, version, n * 0.1)))
    done = run_cli("timeline", str(logs), "--format", "json", "--no-cache")
    assert done.returncode == 0, done.stderr
    [window] = json.loads(done.stdout)["windows"]
    assert sorted((g["service"], g["generation"], sorted(w["worker"] for w in g["workers"])) for g in window["generations"]) == [
        ("notifier", "2.0.0", ["notifier-6f7d9c8b5-k2x4p", "notifier-6f7d9c8b5-q8m2z"]),
        ("orders-api", "5.2.1", ["orders-api-5d8f7b6c9-x7vq2"]),
        ("search-indexer", "2.0.0", ["search-indexer-7c9b8d6f4-h5t2n"]),
    ]
    text = run_cli("timeline", str(logs), "--no-cache", env={"COLUMNS": "100"}).stdout.decode()
    assert "notifier 2.0.0 (2 workers)" in text and "search-indexer 2.0.0 (1 worker)" in text
    assert "3 generation(s) of 3 services, 4 worker(s)" in text
    summary = json.loads(run_cli("analyze", str(logs), "--format", "json", "--no-cache").stdout)["summary"]["deploys"]
    assert sorted((g["service"], g["generation"], g["workers"]) for g in summary["generations"]) == [
        ("notifier", "2.0.0", 2), ("orders-api", "5.2.1", 1), ("search-indexer", "2.0.0", 1),
    ]
