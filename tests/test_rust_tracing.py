"""Rust's tracing-subscriber logs: span fields as the record's, in files and in container logs."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from dupfind.grammar import with_pairs
from dupfind.normalize import LINE

from conftest import FIXTURES
from test_rotated_logs import _findings

SCENARIO = FIXTURES / "scenarios" / "tracing-visibility-timeout" / "logs"


def _line_time(line: str) -> datetime:
    text = json.loads(line)["timestamp"] if line.startswith("{") else line.split(" ", 1)[0]
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


SHAPES = {
    # the kubelet's file of the pod's container, and Docker's json-file: the runtime's time a little later
    "cri": lambda line, at: f"{at.strftime('%Y-%m-%dT%H:%M:%S.%f')}123Z stdout F {line}",
    "docker": lambda line, at: json.dumps({"log": line + "\n", "stream": "stdout", "time": at.strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"}),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_tracing_logs_in_a_container_log_give_the_findings_of_the_files(tmp_path, shape):
    for log in SCENARIO.iterdir():
        lines = log.read_text().splitlines()
        wrapped = [SHAPES[shape](line, _line_time(line) + timedelta(microseconds=40)) for line in lines]
        (tmp_path / log.name).write_text("\n".join(wrapped) + "\n")
    found = _findings(SCENARIO)
    assert {f[0] for f in found} >= {"DF101", "DF103"}
    assert _findings(tmp_path) == found


def test_pairs_of_several_groups_become_fields_the_first_group_first():
    frame = pl.DataFrame({
        LINE: [1, 2, 3],
        "msg": ["push sent", "job received", "no pairs"],
        "fields": [' provider="fcm" attempt=3', "", None],
        "spans": ['worker{worker=w-1}:process_job{job_id=push-8c1e0b72 queue="push" attempt=1}:', 'process_job{job_id="a\\"b"}:', None],
    })
    out = with_pairs(frame, ("fields", "spans"))
    assert out.columns[:4] == frame.columns[:4]
    rows = out.select(LINE, "provider", "attempt", "worker", "job_id", "queue").rows()
    assert rows == [
        (1, "fcm", "3", "w-1", "push-8c1e0b72", "push"),  # the event's attempt before the span's
        (2, None, None, None, 'a"b', None),  # a Debug string's escaped quote
        (3, None, None, None, None, None),
    ]


def test_a_pair_never_replaces_a_group_of_the_line():
    frame = pl.DataFrame({LINE: [1], "msg": ["job received"], "fields": [' msg="other" job_id=7']})
    out = with_pairs(frame, ("fields",))
    assert out.row(0, named=True) == {LINE: 1, "msg": "job received", "fields": ' msg="other" job_id=7', "job_id": "7"}


def test_only_pairs_whose_keys_are_aliases_become_fields():
    # A log whose pairs hold ever new keys (a request's headers, ids as keys) would make a column each.
    frame = pl.DataFrame({LINE: list(range(1, 2001)), "fields": [f" job_id=j-{n} k{n}=v" for n in range(1, 2001)]})
    out = with_pairs(frame, ("fields",), frozenset({"job_id"}))
    assert out.columns == [LINE, "fields", "job_id"] and out["job_id"][1999] == "j-2000"
    assert with_pairs(frame.head(3), ("fields",), frozenset({"attempt"})).columns == [LINE, "fields"]
