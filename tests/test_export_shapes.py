"""The same JSON logs as kubectl, stern and journalctl print them give the findings they give as NDJSON."""

from __future__ import annotations

import csv
import re
from datetime import datetime, timedelta

import orjson
import pytest

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
    "aws-logs-tail": lambda pod, line, n: (
        f"{_runtime_time(line, 2000).strftime('%Y-%m-%dT%H:%M:%S.%f')}+00:00 ecs/{pod}/7f3c9a1e2b4d {line}"
    ),
    "splunk": lambda pod, line, n: orjson.dumps({"preview": False, "offset": n, "result": {
        "_bkt": "main~41~7C0E5A9B", "_cd": f"41:{88113 + 2 * n}", "_indextime": "1784628003", "_raw": line,
        "_serial": str(n), "_si": ["idx-1", "main"], "_sourcetype": "_json",
        "_time": _runtime_time(line, 0).isoformat(timespec="milliseconds"), "host": pod, "index": "main",
        "linecount": "1", "source": f"/var/log/containers/{pod}_prod_app.log", "sourcetype": "_json", "splunk_server": "idx-1",
    }}).decode(),
}
CASES = ["synth/lock-nonatomic", "scenarios/lock-get-then-set-race"]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("case", CASES)
def test_json_logs_in_an_export_shape_give_the_findings_of_the_ndjson(tmp_path, case, shape):
    """Before, each line was text with a leading time (or no time at all): no finding at all."""
    logs = FIXTURES / case / "logs"
    for log in sorted(logs.iterdir()):
        lines = log.read_text().splitlines()
        (tmp_path / log.name).write_text("".join(SHAPES[shape](log.stem, line, n) + "\n" for n, line in enumerate(lines)))
    whole = _findings(logs)
    assert whole and _findings(tmp_path) == whole


@pytest.mark.parametrize("case", CASES)
def test_json_logs_in_one_splunk_csv_export_give_the_findings_of_the_ndjson(tmp_path, case):
    """Every file's events in one Splunk Web CSV export (newest first, the host a column), the
    application's line in `_raw`: the findings of the NDJSON files."""
    logs = FIXTURES / case / "logs"
    rows = [
        {"_time": _runtime_time(line, 0).isoformat(timespec="milliseconds"), "host": log.stem, "source": f"/var/log/{log.name}",
         "sourcetype": "_json", "_raw": line}
        for log in sorted(logs.iterdir()) for line in log.read_text().splitlines()
    ]
    rows.sort(key=lambda row: row["_time"], reverse=True)
    with open(tmp_path / "splunk-results.csv", "w", newline="") as out:
        table = csv.DictWriter(out, fieldnames=list(rows[0]), quoting=csv.QUOTE_ALL)
        table.writeheader()
        table.writerows(rows)
    whole = _findings(logs)
    assert whole and _findings(tmp_path) == whole
