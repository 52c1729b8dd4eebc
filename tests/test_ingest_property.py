"""Property: for arbitrary bytes and lines, nothing crashes and every line is accounted for."""

from __future__ import annotations

import gzip
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dupfind.config import load_config
from dupfind.errors import DupfindError
from dupfind.ingest import ingest

CONFIG = load_config(cwd=Path("/"))

json_like = st.builds(
    lambda ts, ev, jid: f'{{"ts":{ts},"event":{ev},"job_id":{jid}}}',
    st.sampled_from(['"2026-07-21T10:00:00Z"', "1784628543", '"bad"', "null", '"2026-07-21 10:00:00,5"']),
    st.sampled_from(['"job_started"', '"x"', "1", "{}", '"\\u001b[2J"']),
    st.sampled_from(['"q-1"', "7", "null", "[1]"]),
)
line = st.one_of(
    json_like,
    st.text(max_size=80),
    st.sampled_from(["", "  ", "{", "[1,2]", '"s"', "2026-07-21T10:00:00Z a=1 b=2", "k=v", "{\"log\":\"x\\n\",\"time\":\"t\"}"]),
)


def _check(path: Path) -> None:
    try:
        result = ingest([str(path)], CONFIG)
    except DupfindError as exc:
        # The one defined refusal: nothing at all to read (empty after decompression).
        assert "empty" in str(exc)
        return
    for report in result.files:
        assert report.lines == report.parsed + report.blank + report.rejected_total
        assert report.records <= report.parsed
    assert result.table.height == sum(r.records for r in result.files)
    assert result.rejects.height == sum(r.rejected_total for r in result.files) or any(
        "binary_file" in r.rejected for r in result.files
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(line, min_size=1, max_size=40))
def test_lines_add_up(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("prop") / "input.log"
    data = "\n".join(lines).encode("utf-8", errors="surrogatepass")
    if not data.strip(b"\n") and not data:
        data = b"\n"
    path.write_bytes(data or b"\n")
    _check(path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(min_size=1, max_size=2000), compress=st.booleans(), cut=st.integers(0, 100))
def test_arbitrary_bytes_never_crash(tmp_path_factory, data, compress, cut):
    path = tmp_path_factory.mktemp("bytes") / "input.bin"
    if compress:
        packed = gzip.compress(data)
        data = packed[: max(1, len(packed) * cut // 100)]
    path.write_bytes(data)
    _check(path)
