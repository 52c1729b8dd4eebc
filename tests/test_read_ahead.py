"""Reading ahead from the result cache: a warm view gets on a second thread exactly what it would
have read itself, once, and a read that fails fails where it is taken (a damaged frame is rebuilt)."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dupfind.background
from dupfind.analysis import AnalysisContext
from dupfind.cli import app
from dupfind.config import load_config
from dupfind.pipeline import analysis_context, load_correlated
from dupfind.result_cache import CachedCorrelation, ContextFacts, ReadAhead, SetEntry
from dupfind.schema import as_strings

from conftest import FIXTURES

SCENARIO = FIXTURES / "synth" / "deploy-overlap" / "logs"


def test_each_read_is_taken_once_and_fails_where_it_is_taken():
    gate = threading.Event()

    def slow() -> str:
        assert gate.wait(10)
        return "read ahead"

    def broken() -> str:
        raise ValueError("damaged")

    ahead = ReadAhead({"slow": slow, "broken": broken, "quick": lambda: "quick"})
    threading.Timer(0.05, gate.set).start()
    assert ahead.take("slow", lambda: "read now") == "read ahead"  # taken before it was read: waited for
    with pytest.raises(ValueError, match="damaged"):
        ahead.take("broken", lambda: "read now")
    assert ahead.take("quick", lambda: "read now") == "quick"
    assert ahead.take("quick", lambda: "read again") == "read again"  # once
    assert ahead.take("never asked", lambda: "read now") == "read now"


@pytest.fixture
def warm(tmp_path, monkeypatch):
    """A copy of the scenario with its result cache filled by `analyze`, and its configuration."""
    logs = tmp_path / "logs"
    shutil.copytree(SCENARIO, logs)
    monkeypatch.setenv("DUPFIND_CACHE_DIR", str(tmp_path / "cache"))
    result = CliRunner().invoke(app, ["analyze", str(logs), "--format", "json"], catch_exceptions=False)
    dupfind.background.wait()
    assert result.exit_code == 0
    return logs, load_config(cwd=Path("/"))


def _readers(monkeypatch) -> dict[tuple[str, str], str]:
    """Which thread read each frame and fact from the cache."""
    readers: dict[tuple[str, str], str] = {}
    read_now, load = SetEntry._read_now, ContextFacts._load

    def reading(self, name):
        readers["frame", name] = threading.current_thread().name
        return read_now(self, name)

    def loading(self, name):
        readers["fact", name] = threading.current_thread().name
        return load(self, name)

    monkeypatch.setattr(SetEntry, "_read_now", reading)
    monkeypatch.setattr(ContextFacts, "_load", loading)
    return readers


def test_a_warm_context_reads_ahead_what_it_is_told(warm, monkeypatch):
    logs, config = warm
    cold = AnalysisContext(load_correlated([str(logs)], config, use_cache=False).correlation, config, 0.5, config.timeouts)
    loaded = load_correlated([str(logs)], config)
    assert isinstance(loaded.correlation, CachedCorrelation)
    ctx = analysis_context(loaded, config, 0.5, config.timeouts)
    readers = _readers(monkeypatch)
    ctx.read_ahead("executions", "side_effects", "no_such_fact")
    assert as_strings(ctx.executions).equals(as_strings(cold.executions))  # labels in pools of their own
    assert as_strings(ctx.side_effects).equals(as_strings(cold.side_effects))
    assert ctx.actions.equals(cold.actions)  # not asked for: read when used
    assert readers == {("frame", "executions"): "dupfind-read-ahead", ("fact", "side_effects"): "dupfind-read-ahead",
                       ("fact", "no_such_fact"): "dupfind-read-ahead", ("frame", "actions"): "MainThread"}


def test_a_damaged_frame_read_ahead_is_rebuilt(warm):
    logs, config = warm
    cold = load_correlated([str(logs)], config, use_cache=False).correlation
    loaded = load_correlated([str(logs)], config)
    [executions] = Path(loaded.correlation._entry.path).glob("executions.arrow")
    executions.write_bytes(executions.read_bytes()[:-100] + b"x" * 100)
    ctx = analysis_context(loaded, config, 0.5, config.timeouts)
    ctx.read_ahead("executions")
    assert as_strings(ctx.executions).equals(as_strings(cold.executions))  # labels in pools of their own
    assert as_strings(ctx.table).equals(as_strings(cold.table_with(*cold.apart_names)))  # the cache holds every column


def test_a_context_without_the_cache_reads_nothing_ahead(warm, monkeypatch):
    logs, config = warm
    ctx = analysis_context(load_correlated([str(logs)], config, use_cache=False), config, 0.5, config.timeouts)
    readers = _readers(monkeypatch)
    ctx.read_ahead("executions", "side_effects")
    assert ctx.executions.height and ctx.side_effects.height
    assert readers == {}
