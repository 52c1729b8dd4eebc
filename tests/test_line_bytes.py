"""The JSON reader fed from the bytes the lines were read from reads what it reads from the texts joined again."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_ingest_batches import _mixed_dir
from test_ingest_threads import _snapshot

from dupfind.config import load_config
from dupfind.ingest import LineParser, ingest
from dupfind.line_bytes import LineBytes
from dupfind.schema import as_strings

CONFIG = load_config(cwd=Path("/"))

# Lines as `str.split("\n")` leaves them: any text but a newline, wide characters and the BOM too.
text_line = st.text(alphabet=st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(text_line, min_size=1, max_size=60), final_newline=st.booleans(), data=st.data())
def test_any_subset_joins_to_the_kept_texts(lines, final_newline, data):
    raw = "\n".join(lines).encode() + (b"\n" if final_newline else b"")
    texts = pl.Series("text", lines, dtype=pl.String)
    keep = pl.Series(data.draw(st.lists(st.booleans(), min_size=len(lines), max_size=len(lines))))
    kept = LineBytes.split_from(raw, texts).filter(keep)
    again = kept.filter(pl.Series([True] * int(keep.sum()), dtype=pl.Boolean))
    expected = "\n".join(t for t, k in zip(lines, keep.to_list()) if k).encode()
    for subset in (kept, again):
        joined = subset.joined()
        if joined is not None:  # with the final newline as read when every line is kept
            assert joined == expected or (keep.all() and final_newline and joined == expected + b"\n")
    if keep.all():
        assert kept.joined() is raw  # every line kept: the bytes as read, no copy


def test_scattered_lines_are_left_to_the_joined_texts():
    lines = [f'{{"n":{i}}}' if i % 2 else "plain text" for i in range(2000)]
    texts = pl.Series("text", lines)
    keep = texts.str.starts_with("{")
    assert LineBytes.split_from("\n".join(lines).encode(), texts).filter(keep).joined() is None  # 1000 runs


def _both_ways(paths: list[str], monkeypatch, **options) -> tuple[tuple, tuple, int]:
    """The ingest snapshot read from the lines' bytes, the same with the texts joined again, and
    how many blocks the bytes served (each checked to be those texts, joined)."""
    served = []
    read_json = LineParser._read_json

    def checked(self, texts, schema=None, payload=None):
        if payload is not None:
            assert bytes(payload).removesuffix(b"\n") == texts.str.join("\n").cast(pl.Binary).item()
            served.append(1)
        return read_json(self, texts, schema, payload)

    monkeypatch.setattr(LineParser, "_read_json", checked)
    from_bytes = _snapshot(ingest(paths, CONFIG, **options))
    monkeypatch.undo()
    monkeypatch.setattr(LineBytes, "joined", lambda self: None)
    from_texts = _snapshot(ingest(paths, CONFIG, **options))
    monkeypatch.undo()
    return from_bytes, from_texts, sum(served)


def _assert_same(a: tuple, b: tuple) -> None:
    assert as_strings(a[0]).equals(as_strings(b[0]))
    assert a[1].equals(b[1])
    assert a[2] == b[2]
    assert a[3] == b[3]


def test_mixed_logs_read_the_same_from_their_bytes(tmp_path, monkeypatch):
    logs = _mixed_dir(tmp_path)
    good = '{"ts":"2026-07-21T10:00:%02dZ","event":"job_started","job_id":"c-%d"}'
    # Line endings of Windows, a traceback between records, a record cut short, a line too long.
    # Its own jobs: records that mixed.log holds too would be counted once (dupfind.copies).
    (logs / "crlf.log").write_bytes("\r\n".join(good.replace("c-", "r-") % (i, i) for i in range(30)).encode() + b"\r\n")
    traceback = 'Traceback (most recent call last):\n  File "w.py", line 3, in run\nValueError: x\n'
    (logs / "mixed.log").write_text("".join(good % (i, i) + "\n" + (traceback if i % 7 == 0 else "") for i in range(60))
                                    + '{"ts":"2026-07-21T10:01:00Z","event":"job_st\n' + '{"pad":"' + "x" * 2_000_000 + '"}\n')
    for options in ({}, {"block_bytes": 700}):
        from_bytes, from_texts, served = _both_ways([str(logs)], monkeypatch, **options)
        _assert_same(from_bytes, from_texts)
        # (_mixed_dir's second copy of each fixture log adds rows only where the file's name names its worker.)
        assert served >= 3 and from_bytes[0].height > 150 and from_bytes[1].height > 10
    reports = {Path(r[0]).name: r for r in from_bytes[2]}
    assert reports["crlf.log"][2:5] == (30, 30, 30)  # lines, parsed, records
    # Each of the 9 tracebacks after a JSON record (the runtime's: dupfind.crashes) is a record of
    # its own, its other 18 lines go on with it.
    assert reports["mixed.log"][2:5] == (89, 87, 69)
    assert reports["mixed.log"][6] == {"invalid_json": 1, "line_too_long": 1}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(st.lists(st.one_of(
        st.builds(lambda s, j: f'{{"ts":"2026-07-21T10:00:{s:02d}Z","event":"job_started","job_id":"p-{j}"}}',
                  st.integers(0, 59), st.integers(0, 9)),
        st.sampled_from(["", "   ", "plain text here", '{"ts":"2026-07-21T10:00:00Z","event":"job_', "\ufeff{}", '{"a":1}  ',
                         '\t{"ts":"2026-07-21T10:00:09Z","event":"job_acked","job_id":"p-1"}', '{"b":"é✓"}\r']),
    ), min_size=1, max_size=25), min_size=1, max_size=4),
    bom=st.booleans(), block_bytes=st.sampled_from([None, 300]),
)
def test_generated_logs_read_the_same_from_their_bytes(tmp_path_factory, monkeypatch, files, bom, block_bytes):
    root = tmp_path_factory.mktemp("bytes")
    for index, lines in enumerate(files):
        data = "\n".join(lines).encode() + b"\n"
        (root / f"w-{index}.log").write_bytes((b"\xef\xbb\xbf" if bom and index == 0 else b"") + data)
    from_bytes, from_texts, _ = _both_ways([str(root)], monkeypatch, block_bytes=block_bytes)
    _assert_same(from_bytes, from_texts)

