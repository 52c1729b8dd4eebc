"""Reading lines: every line of a chunk is counted, and the alias keys of a block are found wherever they occur."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dupfind.ingest as ingest_module
from dupfind.config import load_config
from dupfind.ingest import JSON_SUB_BLOCK, ingest

CONFIG = load_config(cwd=Path("/"))
LINES = 2 * JSON_SUB_BLOCK + 7  # large enough for the sliced scan


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_sliced_scan_equals_one_scan(monkeypatch, threads):
    monkeypatch.setattr(ingest_module.pl, "thread_pool_size", lambda: threads)
    texts = pl.Series([f'{{"n": {i}, "note": "job_id"}}' for i in range(LINES)])
    texts = texts.scatter([0, JSON_SUB_BLOCK, LINES - 1], ['{"user_id": "u"}', '{"a": "\\u0062"}', '{"job_id": "j"}'])
    patterns = ['"user_id"', '"job_id"', "\\u0062"]
    assert ingest_module._contains_any(texts, patterns).equals(texts.str.contains_any(patterns))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(['"', "\\", "u", "0", "2", "d", "D", ".", "-", "_", "*", "(", "[", "$", "^", "|", "job_id", "é"]), max_size=12).map("".join), max_size=20),
       st.lists(st.text(alphabet=st.sampled_from(['"', "\\", "u", "0", "2", "d", ".", "-", "*", "(", "[", "$", "^", "|", "+", "?", "{"]), min_size=1, max_size=5), min_size=1, max_size=6))
def test_the_scan_is_a_literal_search_for_any_pattern(lines, patterns):
    """Patterns are literals, regular-expression characters included (the scan is one alternation)."""
    texts = pl.Series(lines, dtype=pl.String)
    assert ingest_module._contains_any(texts, patterns).to_list() == texts.str.contains_any(patterns).to_list()


def test_the_scan_finds_every_alias_key_and_escape() -> None:
    parser = ingest_module.LineParser(CONFIG)
    patterns = [f'"{k}"' for k in sorted(parser.json_keys)] + parser.key_escapes
    texts = pl.Series([f'{{{p}: 1}}' for p in patterns] + ['{"none": "of them"}'])
    assert ingest_module._contains_any(texts, patterns).to_list() == [True] * len(patterns) + [False]


@pytest.mark.parametrize("threads", [1, 2])
def test_a_key_on_one_line_of_a_large_block_is_read(tmp_path, monkeypatch, threads):
    """Keys the sampled lines lack, on the first line, in the middle and on the last line of a block
    the key scan cuts in slices, reach the table."""
    monkeypatch.setattr(ingest_module.pl, "thread_pool_size", lambda: threads)
    rows = [{"ts": f"2026-03-02T14:{i // 600 % 60:02d}:{i // 10 % 60:02d}Z", "event": "heartbeat", "worker_id": "w1"}
            for i in range(LINES)]
    rows[0]["order_id"] = "ord-first"
    rows[LINES // 2]["tenant_id"] = "t-middle"
    rows[-1]["job_id"] = "job-last"
    (tmp_path / "w.log").write_text("".join(json.dumps(r) + "\n" for r in rows))
    table = ingest([str(tmp_path)], CONFIG).text_table()
    assert table.height == LINES
    found = {c: table[c].cast(pl.String).drop_nulls().to_list() for c in ("order_id", "tenant_id", "job_id")}
    assert found == {"order_id": ["ord-first"], "tenant_id": ["t-middle"], "job_id": ["job-last"]}


@pytest.mark.parametrize("chunk", [b"", b"\n", b"a", b"a\nb", b"a\nb\n", b"\n\n", b"\xef\xbb\xbf", b"x\r\n\xff\xfe\ny", b"\xff\n"])
def test_decoded_lines_are_every_line_of_the_chunk(chunk):
    """Line accounting reads the count from the decoded frames rather than counting newlines again."""
    lines, undecodable = ingest_module._decode_lines(chunk, 1)
    assert lines.height + undecodable.height == ingest_module._line_count(chunk)
    assert sorted([*lines["line"], *undecodable["line"]]) == list(range(1, ingest_module._line_count(chunk) + 1))


@pytest.mark.parametrize("other_bad_line", [None, 70, 9000])
@pytest.mark.parametrize("escape, kept", [
    ("\\ud83d", False),  # a lone high surrogate: a JavaScript logger cut a string inside an emoji
    ("\\ude00", False),  # a lone low one
    ("\\ud83d\\ude00", True),  # a pair (Python's json.dumps writes an emoji so)
    ("C:\\\\udev", True),  # a backslash, then text
])
def test_a_surrogate_escape_is_judged_alike_wherever_it_sits(tmp_path, escape, kept, other_bad_line):
    """polars reads a lone surrogate as a NUL where orjson refuses the line: the line is rejected
    whether or not another bad line shares its sub-block, and a pair is read as its character."""
    lines = [
        f'{{"ts":"2026-07-21T10:00:{i // 1000 % 60:02d}.{i % 1000:03d}Z","event":"job_started","job_id":"q-{i}","worker_id":"w-1"}}'
        for i in range(1, 10_001)
    ]
    lines[49] = lines[49][:-1] + f',"msg":"sent {escape}"}}'
    if other_bad_line:
        lines[other_bad_line - 1] = '{"ts":"2026-07-21T10:00:00.070Z","event":"job_started","job_id":"q-x",}'  # ends with }
    (tmp_path / "w.log").write_text("\n".join(lines) + "\n")
    result = ingest([str(tmp_path)], CONFIG)
    table = result.text_table()
    row = table.filter(pl.col("line") == 50)
    if kept:
        assert row["message"].to_list() == ["sent " + json.loads(f'"{escape}"')]
    else:
        assert row.height == 0
        assert result.rejects.filter(pl.col("line") == 50)["reason"].to_list() == ["invalid_json"]
    assert table.height == 10_000 - (not kept) - bool(other_bad_line)


@pytest.mark.parametrize("envelope, own, expected", [
    # Loki's text output to the second, a worker in India (+05:30): the record's time in that zone
    ("2026-11-29T07:16:09Z", "2026-11-29 12:46:09,727", "2026-11-29T07:16:09.727000+00:00"),
    # logged in one second, shipped in the next
    ("2026-11-29T07:16:10Z", "2026-11-29 12:46:09,998", "2026-11-29T07:16:09.998000+00:00"),
    # in Nepal (+05:45), the envelope printed in the engineer's zone
    ("2026-11-29T08:16:09+01:00", "2026-11-29 13:01:09,402", "2026-11-29T07:16:09.402000+00:00"),
    # shipped 9 minutes late: no zone is that far from the envelope's time; the envelope's is taken
    ("2026-11-29T07:25:09Z", "2026-11-29 12:46:09,727", "2026-11-29T07:25:09+00:00"),
    # an envelope's time with a fraction is taken as before (CloudWatch's, the journal's)
    ("2026-11-29T07:16:09.731Z", "2026-11-29 12:46:09,727", "2026-11-29T07:16:09.731000+00:00"),
])
def test_a_record_time_without_a_zone_is_read_in_the_zone_of_an_envelope_to_the_second(tmp_path, envelope, own, expected):
    log = tmp_path / "logcli.log"
    log.write_text(f'{envelope} {{pod="notifier-celery-5f7b9c6d8-m2x4q"}}  [{own}: INFO/MainProcess] '
                   "Task notify.send_email[3b9f2c1e-7a4d-4e8b-9c6a-5d1f0e2b3a4c] received\n")
    result = ingest([str(log)], load_config(cwd=Path("/")))
    assert result.files[0].format == "loki-text" and result.table.height == 1
    assert result.table["ts"][0].isoformat() == expected
    assert result.files[0].naive_ts == 0
