"""A few text lines are given only to the grammars Python's `re` finds a pattern of in them
(grammar._claiming): what the grammars make of them is what all of them make."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import FIXTURES

import dupfind.grammar as grammar_module
from dupfind.config import load_config
from dupfind.grammar import FEW_LINES, parse_grammar_lines
from dupfind.presets import ANSI_ESCAPE

CONFIG = load_config(None)
GRAMMARS = [p for p in CONFIG.presets if p.is_grammar]


def _text_blocks() -> list[tuple[str, list[str]]]:
    """Every fixture log's first FEW_LINES lines that are not JSON, as one block each."""
    blocks = []
    for path in sorted(FIXTURES.rglob("logs/**/*")):
        if not path.is_file() or path.suffix in (".gz", ".zst", ".xz", ".bz2", ".zip", ".tar", ".tgz"):
            continue
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            continue
        text = [line for line in lines if line.strip() and not line.lstrip().startswith("{")][:FEW_LINES]
        if text:
            blocks.append((str(path.relative_to(FIXTURES)), text))
    return blocks


BLOCKS = _text_blocks()


def _rows(lines: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"line": range(1, len(lines) + 1), "text": lines}).with_columns(
        clean=pl.col("text").str.replace_all(ANSI_ESCAPE, ""))


def _made(result) -> tuple:
    return ([(preset.name, frame.to_dicts()) for frame, preset in result.raws], result.context, result.context_lines,
            result.rest["line"].to_list(), None if result.continuing is None else result.continuing.to_list())


def test_the_fixtures_give_the_comparison_text_of_many_grammars():
    claimed = {p.name for _, lines in BLOCKS for p in grammar_module._claiming(GRAMMARS, lines)}
    assert len(BLOCKS) > 40 and len(claimed) >= len(GRAMMARS) // 2


@pytest.mark.parametrize("name,lines", BLOCKS, ids=[name for name, _ in BLOCKS])
def test_the_grammars_make_of_few_lines_what_all_of_them_make(name, lines, monkeypatch):
    rows = _rows(lines)
    chosen = parse_grammar_lines(rows, GRAMMARS, keys=None)
    monkeypatch.setattr(grammar_module, "FEW_LINES", 0)
    every = parse_grammar_lines(rows, GRAMMARS, keys=None)
    assert _made(chosen) == _made(every)


def test_a_traceback_in_a_json_file_is_given_to_no_grammar(monkeypatch):
    lines = ["Traceback (most recent call last):", '  File "/app/worker/handlers.py", line 142, in perform',
             "psycopg2.errors.SerializationFailure: could not serialize access due to concurrent update"]
    assert grammar_module._claiming(GRAMMARS, lines) == []
    tried: list[str] = []
    original = pl.Expr.str

    class Counting:  # each grammar's record pattern is asked of polars once when it is tried
        def __get__(self, expr, owner=None):
            namespace = original.__get__(expr, owner)
            contains = namespace.contains

            def counted(pattern, *args, **kwargs):
                tried.append(pattern)
                return contains(pattern, *args, **kwargs)
            namespace.contains = counted
            return namespace
    monkeypatch.setattr(pl.Expr, "str", Counting())
    result = parse_grammar_lines(_rows(lines), GRAMMARS)
    assert result.raws == [] and result.rest.height == 3
    assert not {p.line for p in GRAMMARS} & set(tried)


def test_a_framework_line_among_them_keeps_its_grammar():
    celery = "[2026-03-02 14:00:01,120: INFO/MainProcess] Task mailer.send_email[5f1c] received"
    lines = ["Traceback (most recent call last):", celery]
    assert [p.name for p in grammar_module._claiming(GRAMMARS, lines)] == ["celery"]
    result = parse_grammar_lines(_rows(lines), GRAMMARS)
    assert [preset.name for _, preset in result.raws] == ["celery"] and result.rest["line"].to_list() == [1]
