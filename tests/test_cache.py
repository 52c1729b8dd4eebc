"""The per-file table cache: warm runs equal cold ones, and nothing stale or corrupt is trusted."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import polars as pl
import pytest

from dupfind.cache import TableCache
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.schema import as_strings
from dupfind.sources import expand_inputs, listings_kept
from dupfind.textcodes import Texts

from conftest import FIXTURES, rename_worker_keeping_size_and_mtime

SCENARIO = FIXTURES / "synth" / "double-publish" / "logs"


@pytest.fixture
def logs(tmp_path):
    target = tmp_path / "logs"
    shutil.copytree(SCENARIO, target)
    return target


def _indexes(cache_dir: Path) -> list[Path]:
    """The index of each directory of inputs: which pack holds each stored file's rows."""
    return sorted(p for p in cache_dir.glob("dirs/*.json"))


def _stored(cache_dir: Path) -> dict[str, dict]:
    """Each stored file's entry in its directory's index, by file name."""
    return {name: entry for index in _indexes(cache_dir) for name, entry in orjson.loads(index.read_bytes())["files"].items()}


def _rewrite_entries(cache_dir: Path, change) -> None:
    """Each index with its entries (by file name) as `change(entries)` leaves them."""
    for index in _indexes(cache_dir):
        data = orjson.loads(index.read_bytes())
        change(data["files"])
        index.write_bytes(orjson.dumps(data))


def _packs(cache_dir: Path) -> list[Path]:
    return sorted(p for p in (cache_dir / "packs").glob("*") if not p.name.startswith(".tmp-"))


def _run(logs: Path, cache_dir: Path, config=None):
    config = config or load_config(cwd=Path("/"))
    cache = TableCache(cache_dir, config.digest())
    return ingest([str(logs)], config, cache=cache), cache


def test_warm_run_equals_cold_run(logs, tmp_path):
    cold, cache = _run(logs, tmp_path / "cache")
    assert cache.hits == 0 and cache.misses == len(cold.files)
    warm, cache = _run(logs, tmp_path / "cache")
    assert cache.hits == len(cold.files) and cache.misses == 0
    assert as_strings(warm.table).equals(as_strings(cold.table))  # each table has its own pool of labels
    assert warm.rejects.sort("source", "line").equals(cold.rejects.sort("source", "line"))
    assert warm.totals() == cold.totals()
    for a, b in zip(cold.files, warm.files):
        assert (a.path, a.format, a.lines, a.records, dict(a.rejected), a.fields, a.first_ts) == (
            b.path, b.format, b.lines, b.records, dict(b.rejected), b.fields, b.first_ts)


def _ingest_storing_later(logs: Path, tmp_path: Path, monkeypatch, before_each_store, meanwhile=None):
    """ingest with store_later as the command line runs it: the files' store deferred until the
    output (dupfind.background.run_deferred), `before_each_store()` called as each file is stored,
    `meanwhile()` after ingest returns and before the deferred work runs. The cold result."""
    import dupfind.background
    import dupfind.cache

    real_store = dupfind.cache.TableCache.store

    def store(self, *args):
        before_each_store()
        return real_store(self, *args)

    monkeypatch.setattr(dupfind.cache.TableCache, "store", store)
    config = load_config(cwd=Path("/"))
    dupfind.background.defer_until_output()
    try:
        cold = ingest([str(logs)], config, cache=TableCache(tmp_path / "cache", config.digest()), store_later=True)
        if meanwhile is not None:
            meanwhile()
    finally:
        dupfind.background.run_deferred()
    return cold


def test_files_are_stored_after_the_output_and_the_other_cache_writes(logs, tmp_path, monkeypatch):
    """With store_later (the command line), ingest returns before its files are stored: they are
    written once the output is out (dupfind.background.run_deferred), after the cache writes
    deferred meanwhile (the set, the analysis), and then serve a warm run equal to the cold one."""
    import dupfind.background

    order: list[str] = []

    def meanwhile() -> None:
        dupfind.background.defer(order.append, "set")  # deferred after the files, written before them
        assert order == [] and not (tmp_path / "cache").exists()

    cold = _ingest_storing_later(logs, tmp_path, monkeypatch, lambda: order.append("files"), meanwhile)
    assert order == ["set", "files"]  # every file parsed, in one pack
    assert len(_packs(tmp_path / "cache")) == 1 and len(_stored(tmp_path / "cache")) == len(cold.files)
    warm, cache = _run(logs, tmp_path / "cache")
    assert cache.hits == len(cold.files) and cache.misses == 0
    assert as_strings(warm.table).equals(as_strings(cold.table))  # each table has its own pool of labels


def test_changed_file_is_parsed_again_others_are_served(logs, tmp_path):
    _run(logs, tmp_path / "cache")
    victim = sorted(logs.glob("worker-*.log"))[0]
    lines = victim.read_bytes().splitlines(keepends=True)
    victim.write_bytes(b"".join(lines[:-5]))
    warm, cache = _run(logs, tmp_path / "cache")
    assert cache.misses == 1 and cache.hits == len(warm.files) - 1
    report = next(f for f in warm.files if f.path == str(victim))
    assert report.lines == len(lines) - 5
    cold = ingest([str(logs)], load_config(cwd=Path("/")))  # the files as they are now
    assert as_strings(warm.table).equals(as_strings(cold.table))
    # The others' rows came from the pack of every file: their dictionary keeps only what is used.
    assert warm.texts.values.equals(Texts.of(warm.text_table(), warm.texts.columns).values)
    assert warm.texts.values.equals(cold.texts.values)


@pytest.mark.parametrize("content", [b"\n" * 50, b"\x00\x01binary\n" * 20, b"not a log line\n" * 5],
                         ids=["blank-lines", "binary", "every-line-rejected"])
def test_a_cached_file_without_records_is_served_beside_a_changed_file(logs, tmp_path, content):
    """A file with no record (blank lines, a binary file, every line rejected) is stored as an
    empty part of its pack; served beside a file parsed again, its empty rows joined the others
    (their file ranks in another type: the command failed with an internal error)."""
    export = tmp_path / "export"
    export.mkdir()
    victim = Path(shutil.copy(min(logs.glob("worker-*.log")), export))
    (export / "empty-of-records.log").write_bytes(content)
    _run(export, tmp_path / "cache")
    victim.write_bytes(victim.read_bytes() + victim.read_bytes().splitlines(keepends=True)[0])  # a log still written
    warm, cache = _run(export, tmp_path / "cache")
    assert (cache.hits, cache.misses) == (1, 1)  # the file without records served, the other parsed again
    cold = ingest([str(export)], load_config(cwd=Path("/")))
    assert as_strings(warm.table).equals(as_strings(cold.table))
    assert warm.totals() == cold.totals()


def test_files_served_from_part_of_a_pack_keep_no_text_of_the_rest(logs, tmp_path):
    """A pack holds every file a run parsed; a later run that needs only some of them keeps only
    the texts their rows use (the codes of the others' ids never reach its dictionary)."""
    extra = logs / "worker-extra.log"
    extra.write_text('{"ts":"2026-07-21T10:00:01.000Z","level":"info","event":"job_started",'
                     '"job_id":"job-only-in-extra","msg":"a message only extra.log has","worker_id":"w-extra"}\n')
    garbage = logs / "garbage.log"
    garbage.write_text("not a log line\n\x1b[31mnor this\n")  # rejects and no rows
    _run(logs, tmp_path / "cache")
    with_extra, _ = _run(logs, tmp_path / "cache")
    assert "job-only-in-extra" in with_extra.texts.values.to_list()
    assert with_extra.rejects.filter(pl.col("source") == str(garbage)).height == 2
    garbage.unlink()  # a file of the pack with rejects only, not read any more
    without_garbage, cache = _run(logs, tmp_path / "cache")
    assert cache.misses == 0 and without_garbage.rejects.filter(pl.col("source") == str(garbage)).height == 0
    extra.unlink()
    warm, cache = _run(logs, tmp_path / "cache")
    assert cache.misses == 0 and cache.hits == len(warm.files) and len(_packs(tmp_path / "cache")) == 1
    cold = ingest([str(logs)], load_config(cwd=Path("/")))
    assert as_strings(warm.table).equals(as_strings(cold.table))
    assert warm.texts.values.equals(cold.texts.values)
    assert not {"job-only-in-extra", "a message only extra.log has"} & set(warm.texts.values.to_list())
    assert warm.rejects.sort("source", "line").equals(cold.rejects.sort("source", "line"))


def test_a_directory_index_gathers_the_files_of_several_runs(logs, tmp_path):
    """Files of one directory parsed by different runs share its index: each store merges its
    entries with those still valid, and drops those of files that are gone; another directory
    has an index of its own."""
    config = load_config(cwd=Path("/"))
    root = tmp_path / "cache"
    names = sorted(p.name for p in logs.iterdir())
    some = [str(logs / name) for name in names[:2]]
    ingest(some, config, cache=TableCache(root, config.digest()))
    assert sorted(_stored(root)) == names[:2]
    _, cache = _run(logs, root)
    assert cache.hits == 2 and cache.misses == len(names) - 2
    assert sorted(_stored(root)) == names and len(_indexes(root)) == 1 and len(_packs(root)) == 2
    _, cache = _run(logs, root)
    assert cache.hits == len(names)

    (logs / names[0]).unlink()
    extra = logs / "zz-extra.log"
    extra.write_bytes((logs / names[1]).read_bytes())
    _, cache = _run(logs, root)
    assert cache.misses == 1 and sorted(_stored(root)) == sorted([*names[1:], extra.name])

    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(logs / names[1], other / names[1])
    _, cache = _run(other, root)
    assert cache.misses == 1 and len(_indexes(root)) == 2


def test_two_runs_storing_into_one_index_at_once_lose_entries_never_rows(logs, tmp_path, monkeypatch):
    """Each run reads the index, adds its entries and replaces it whole: of two runs that read it
    before either wrote, the last write wins. The other's files are then parsed again, never
    served wrong rows."""
    config = load_config(cwd=Path("/"))
    root = tmp_path / "cache"
    names = sorted(p.name for p in logs.iterdir())
    ingest([str(logs / names[0])], config, cache=TableCache(root, config.digest()))
    monkeypatch.setattr(TableCache, "_read_index", staticmethod(lambda index, directory: {}))  # read before
    ingest([str(logs / names[1])], config, cache=TableCache(root, config.digest()))
    monkeypatch.undo()
    assert sorted(_stored(root)) == [names[1]]
    warm, cache = _run(logs, root)
    assert cache.hits == 1 and cache.misses == len(names) - 1
    assert as_strings(warm.table).equals(as_strings(ingest([str(logs)], config).table))


def test_a_file_written_between_its_key_and_its_read_is_not_stored(logs, tmp_path):
    """A file is keyed as the command lists its inputs, before it is read. Written in between, it
    is not stored under the key of what it was: put back as it was (bytes and mtime), it is parsed
    again, not served the rows it had meanwhile."""
    config = load_config(cwd=Path("/"))
    cache = TableCache(tmp_path / "cache", config.digest())
    victim = min(logs.glob("worker-*.log"))
    original, stat = victim.read_bytes(), victim.stat()
    with listings_kept():  # as a command does: its identities are taken when it lists its inputs
        keys = {src.path: src.identity() for src in expand_inputs([str(logs)])}
        victim.write_bytes(original + original.splitlines(keepends=True)[-1])  # its last line again
        ingest([str(logs)], config, cache=cache)
    assert len(_stored(tmp_path / "cache")) == len(keys) - 1 and victim.name not in _stored(tmp_path / "cache")
    victim.write_bytes(original)
    os.utime(victim, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    warm, cache = _run(logs, tmp_path / "cache")
    assert cache.misses == 1 and cache.hits == len(keys) - 1
    cold = ingest([str(logs)], config)
    assert as_strings(warm.table).equals(as_strings(cold.table)) and warm.totals() == cold.totals()


def test_a_file_rewritten_at_its_size_with_its_mtime_put_back_is_parsed_again(logs, tmp_path):
    _run(logs, tmp_path / "cache")
    rename_worker_keeping_size_and_mtime(min(logs.glob("worker-*.log")))
    warm, cache = _run(logs, tmp_path / "cache")
    assert cache.misses == 1 and cache.hits == len(warm.files) - 1
    cold = ingest([str(logs)], load_config(cwd=Path("/")))
    assert as_strings(warm.table).equals(as_strings(cold.table))


def test_packs_beyond_their_size_bound_go_least_recently_used_first(tmp_path, monkeypatch):
    import dupfind.cache as cache_module

    exports = []
    for name in ("a", "b", "c"):  # the same logs in three places: three sets of files, three packs
        shutil.copytree(SCENARIO, tmp_path / name)
        exports.append(tmp_path / name)
    root = tmp_path / "cache"

    def packs() -> dict[str, int]:
        return {p.name: sum(f.stat().st_size for f in p.iterdir())
                for p in (root / "packs").iterdir() if not p.name.startswith(".")}

    _run(exports[0], root)
    (first, size), = packs().items()
    monkeypatch.setattr(cache_module, "PACKS_MAX_BYTES", int(size * 2.5))  # room for two
    _run(exports[1], root)
    (second,) = set(packs()) - {first}
    warm, cache = _run(exports[0], root)  # read: the first pack is now the most recently used
    assert cache.hits == len(warm.files) and set(packs()) == {first, second}
    _run(exports[2], root)
    assert first in packs() and second not in packs() and len(packs()) == 2
    again, cache = _run(exports[1], root)  # its pack is gone: parsed again, the same rows
    assert cache.misses == len(again.files) and len(packs()) == 2
    cold = ingest([str(exports[1])], load_config(cwd=Path("/")))
    assert as_strings(again.table).equals(as_strings(cold.table))


def test_a_file_has_one_key_by_whichever_path_it_is_reached(tmp_path, monkeypatch):
    """The key names the file (its resolved path, size and mtime): through a linked directory, a
    link to it, a relative path or `..` after a link, the same key; another file, another key."""
    (tmp_path / "real" / "sub").mkdir(parents=True)
    target = tmp_path / "real" / "f.log"
    target.write_text("one\n")
    (tmp_path / "f.log").write_text("two\n")
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    (tmp_path / "deeper").symlink_to(tmp_path / "real" / "sub")
    (tmp_path / "real" / "link.log").symlink_to(target)
    monkeypatch.chdir(tmp_path)
    cache = TableCache(tmp_path / "cache", "digest")
    key = cache.key(target)
    same = [Path("real/f.log"), tmp_path / "alias" / "f.log", Path("alias/f.log"), tmp_path / "real" / "link.log",
            Path("deeper/../f.log"), Path("./real/sub/../f.log"), Path(f"../{tmp_path.name}/real/f.log")]
    assert key is not None and [cache.key(p) for p in same] == [key] * len(same)
    assert cache.key(tmp_path / "f.log") not in (None, key)
    assert cache.key(tmp_path / "missing.log") is None
    assert cache.key(str(target)) == key and cache.key("real/f.log") == key  # a path as text
    listed = expand_inputs([str(tmp_path / "alias")])  # f.log (link.log names the same file: read once)
    assert [Path(src.path).name for src in listed] == ["f.log"]
    assert [cache.key_for(src.identity()) for src in listed] == [key]
    assert expand_inputs(["-"])[0].identity() is None and cache.key_for(None) is None  # standard input has no key
    target.write_text("one, longer\n")
    assert cache.key(target) != key


def test_file_reports_come_back_from_json_exactly():
    """The caches write file reports as JSON (FileReport.to_state): read back, each is equal, with
    the same types (a Counter, times in their zone), and a report of other fields is refused."""
    from dupfind.ingest import FileReport

    dirty = [FIXTURES / "formats" / "ndjson-dirty" / "logs", SCENARIO]
    reports = ingest([str(p) for p in dirty], load_config(cwd=Path("/"))).files
    assert any(r.rejected for r in reports) and all(r.first_ts is not None for r in reports)
    for report in reports:
        back = FileReport.from_state(orjson.loads(orjson.dumps(report.to_state())))
        assert back == report and type(back.rejected) is type(report.rejected)
        assert back.first_ts.tzinfo == report.first_ts.tzinfo and back.last_ts.utcoffset() == report.last_ts.utcoffset()
    moved = FileReport.from_state(orjson.loads(orjson.dumps(reports[0].to_state())), "elsewhere.log")
    assert moved.path == "elsewhere.log" and moved.lines == reports[0].lines
    with pytest.raises(ValueError):
        FileReport.from_state({**reports[0].to_state(), "extra": 1})


def test_config_change_invalidates(logs, tmp_path):
    _run(logs, tmp_path / "cache")
    config_file = tmp_path / "dupfind.toml"
    config_file.write_text('[ingest]\nassume_tz = "Europe/Berlin"\n')
    _, cache = _run(logs, tmp_path / "cache", load_config(config_file))
    assert cache.hits == 0


def test_corrupt_entries_are_ignored_and_rebuilt(logs, tmp_path):
    cold, _ = _run(logs, tmp_path / "cache")
    stored = _stored(tmp_path / "cache")
    names = sorted(stored)
    assert len(names) == len(cold.files) >= 4 and len(_packs(tmp_path / "cache")) == 1 and len(_indexes(tmp_path / "cache")) == 1

    def damage(entries: dict) -> None:
        entries[names[0]] = "{"
        entries[names[1]][1] = "0" * 32  # a pack that is not there

    _rewrite_entries(tmp_path / "cache", damage)
    reports_file = _packs(tmp_path / "cache")[0] / "reports.json"
    reports = orjson.loads(reports_file.read_bytes())
    reports[stored[names[2]][2]]["records"] += 1  # the pack holds fewer of its rows than its report says
    reports_file.write_bytes(orjson.dumps(reports))
    warm, cache = _run(logs, tmp_path / "cache")
    assert cache.misses == 3 and cache.hits == len(cold.files) - 3
    assert as_strings(warm.table).equals(as_strings(cold.table))  # each table has its own pool of labels
    _, cache = _run(logs, tmp_path / "cache")
    assert cache.misses == 0 and len(_packs(tmp_path / "cache")) == 2  # the three, stored again

    _indexes(tmp_path / "cache")[0].write_bytes(b'{"dir": "/elsewhere", "files": {}}')  # another directory's
    warm, cache = _run(logs, tmp_path / "cache")
    assert cache.misses == len(cold.files) and as_strings(warm.table).equals(as_strings(cold.table))
    _indexes(tmp_path / "cache")[0].write_bytes(b"garbage")
    warm, cache = _run(logs, tmp_path / "cache")
    assert cache.misses == len(cold.files)
    _, cache = _run(logs, tmp_path / "cache")
    assert cache.misses == 0 and len(_stored(tmp_path / "cache")) == len(cold.files)

    for damage in ("not arrow at all", "texts of another pack", "reports not JSON"):
        first = tmp_path / "cache" / "packs" / _stored(tmp_path / "cache")[names[0]][1]
        held = sum(entry[1] == first.name for entry in _stored(tmp_path / "cache").values())
        if damage == "not arrow at all":
            (first / "table.arrow").write_bytes(b"not arrow at all")
        elif damage == "texts of another pack":  # fewer texts than the rows' codes need
            pl.DataFrame({"text": ["a"]}).write_ipc(first / "texts.arrow")
        else:
            (first / "reports.json").write_bytes(b"{not json")
        warm, cache = _run(logs, tmp_path / "cache")
        assert held and cache.misses == held and not first.exists(), damage
        assert as_strings(warm.table).equals(as_strings(cold.table))
        _, cache = _run(logs, tmp_path / "cache")
        assert cache.misses == 0


def test_unwritable_cache_never_breaks_a_run(logs, tmp_path):
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory should be")
    result, cache = _run(logs, blocker)
    assert result.table.height > 0 and cache.hits == 0


def test_cli_says_once_when_the_cache_directory_cannot_keep_anything(cli, tmp_path, logs):
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory should be")
    uncached = cli("analyze", str(logs), "--format", "json", "--no-cache")
    for env in ({"DUPFIND_CACHE_DIR": str(blocker)}, {"DUPFIND_CACHE_DIR": str(blocker / "below")}):
        run = cli("analyze", str(logs), "--format", "json", env=env)
        assert run.returncode == 0 and orjson.loads(run.stdout) == orjson.loads(uncached.stdout)
        notes = [line for line in run.stderr.decode().splitlines() if "cache directory" in line]
        assert len(notes) == 1 and env["DUPFIND_CACHE_DIR"] in notes[0], run.stderr
        assert ("is not a directory" if env["DUPFIND_CACHE_DIR"] == str(blocker) else "cannot be created") in notes[0]
    quiet = cli("stats", str(logs), "--format", "json", "--no-cache", env={"DUPFIND_CACHE_DIR": str(blocker)})
    assert quiet.returncode == 0 and b"cache directory" not in quiet.stderr
    fresh = cli("analyze", str(logs), "--format", "json", env={"DUPFIND_CACHE_DIR": str(tmp_path / "new" / "cache")})
    assert fresh.returncode == 0 and b"cache directory" not in fresh.stderr and (tmp_path / "new" / "cache").is_dir()
    hostile = tmp_path / "c\x1b[31m"
    hostile.write_text("")
    shown = cli("analyze", str(logs), "--format", "json", env={"DUPFIND_CACHE_DIR": str(hostile)})
    assert b"\x1b" not in shown.stderr and b"c\\x1b[31m" in shown.stderr


def test_a_nearly_full_cache_disk_is_said_once_at_the_start_or_after_the_writes(tmp_path, monkeypatch, capsys):
    import dupfind.cache as cache_module
    from dupfind import cli_common

    free = {"bytes": 10 << 30}
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(cache_module.shutil, "disk_usage", lambda path: usage._replace(free=free["bytes"]))
    monkeypatch.setenv("DUPFIND_CACHE_DIR", str(tmp_path / "cache"))
    assert cache_module.cache_dir_problem(tmp_path / "cache") is None and (tmp_path / "cache").is_dir()
    cli_common._note_unusable_cache()
    cli_common.note_cache_after_run()
    assert capsys.readouterr().err == ""  # room enough, before and after
    cli_common._note_unusable_cache()
    free["bytes"] = 4096  # the run's writes filled the disk
    cli_common.note_cache_after_run()
    cli_common.note_cache_after_run()
    err = capsys.readouterr().err
    assert err.count("dupfind: note:") == 1 and "has 4 KiB free on its disk" in err and str(tmp_path / "cache") in err
    cli_common._note_unusable_cache()  # full from the start: said then, not again after
    cli_common.note_cache_after_run()
    assert capsys.readouterr().err.count("has 4 KiB free") == 1
    free["bytes"] = cache_module.LOW_SPACE_BYTES
    assert cache_module.cache_dir_problem(tmp_path / "cache") is None


def test_cli_uses_the_cache_dir_and_no_cache(cli, tmp_path, logs):
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cli-cache")}
    first = cli("analyze", str(logs), "--format", "json", env=env)
    assert first.returncode == 0
    assert any((tmp_path / "cli-cache").glob("packs/*/table.arrow")) and _indexes(tmp_path / "cli-cache")
    second = cli("analyze", str(logs), "--format", "json", env=env)
    assert orjson.loads(second.stdout) == orjson.loads(first.stdout)
    uncached = cli("analyze", str(logs), "--format", "json", "--no-cache", env={"DUPFIND_CACHE_DIR": str(tmp_path / "other")})
    assert orjson.loads(uncached.stdout) == orjson.loads(first.stdout)
    assert not (tmp_path / "other").exists()
    os.utime(next(logs.iterdir()), None)  # touched: same bytes, new mtime -> parsed again, same answer
    third = cli("analyze", str(logs), "--format", "json", env=env)
    assert orjson.loads(third.stdout) == orjson.loads(first.stdout)


def test_a_time_window_reads_through_the_cache_but_never_stores_its_rows(logs, tmp_path):
    """--since/--until drop records batch by batch, so a windowed run must not store a file's
    rows (they are only the window's); it may read entries a full run stored."""
    config = load_config(cwd=Path("/"))
    full = ingest([str(logs)], config).table
    first, last = full["ts"].min(), full["ts"].max()
    since, until = first + (last - first) * 0.3, first + (last - first) * 0.6

    def windowed(cache_dir: Path | None):
        cache = TableCache(cache_dir, config.digest()) if cache_dir else None
        return ingest([str(logs)], config, since=since, until=until, cache=cache), cache

    cold, _ = windowed(None)
    assert 0 < cold.table.height < full.height
    assert cold.filtered_out == full.height - cold.table.height
    assert cold.table["ts"].min() >= since and cold.table["ts"].max() <= until
    # Per-file reports still describe every record of the file, not the window.
    assert min(f.first_ts for f in cold.files) == first and max(f.last_ts for f in cold.files) == last
    assert sum(f.records for f in cold.files) == full.height

    after_window, cache = windowed(tmp_path / "cache")
    assert cache.hits == 0 and not any((tmp_path / "cache").rglob("table.arrow"))
    assert as_strings(after_window.table).equals(as_strings(cold.table))

    _run(logs, tmp_path / "cache")  # a full run stores every file
    from_entries, cache = windowed(tmp_path / "cache")
    assert cache.hits == len(cold.files)
    assert as_strings(from_entries.table).equals(as_strings(cold.table)) and from_entries.filtered_out == cold.filtered_out
    assert from_entries.texts.values.equals(cold.texts.values)  # only the texts of the rows in the window


def test_a_stopped_store_writes_nothing_and_the_files_are_parsed_again(logs, tmp_path, monkeypatch):
    """Ctrl-C before the deferred store (dupfind.background.stop): no pack and no pointer is
    written, later commands store again, and the next run parses every file."""
    import dupfind.background

    cold = _ingest_storing_later(logs, tmp_path, monkeypatch, lambda: None, dupfind.background.stop)
    dupfind.background.wait()
    assert not _indexes(tmp_path / "cache") and not (tmp_path / "cache" / "packs").exists()
    assert not dupfind.background.stopping()  # a later command's stores run again
    warm, cache = _run(logs, tmp_path / "cache")
    assert cache.hits == 0 and cache.misses == len(cold.files)
    assert as_strings(warm.table).equals(as_strings(cold.table))  # each table has its own pool of labels
    _, cache = _run(logs, tmp_path / "cache")
    assert cache.hits == len(cold.files)


def test_an_interrupted_store_leaves_no_half_written_entry(tmp_path, monkeypatch):
    """Ctrl-C (raised by polars in the storing thread) in the middle of an entry: its staging
    folder is removed and the interrupt goes on; an unwritable directory still only means no entry."""
    import polars as pl

    config = load_config(cwd=Path("/"))
    cache = TableCache(tmp_path / "cache", config.digest())
    calls = []

    def interrupted(self, *args, **kwargs):
        calls.append(1)
        raise KeyboardInterrupt

    monkeypatch.setattr(pl.DataFrame, "write_ipc", interrupted)
    from dupfind.ingest import FileReport

    with pytest.raises(KeyboardInterrupt):
        cache.store({"ab" + "0" * 30: FileReport(path="x.log")}, pl.DataFrame({"source": ["x.log"]}),
                    pl.Series("text", ["a"]), pl.DataFrame({"source": ["x.log"]}))
    assert calls and not [p for p in (tmp_path / "cache").rglob("*") if p.is_file() or p.name.startswith(".tmp-")]


@pytest.mark.parametrize("on_main_thread", [True, False])
def test_ctrl_c_in_the_files_store_stops_the_writes_and_reaches_the_command(logs, tmp_path, monkeypatch, on_main_thread):
    """Ctrl-C while the parsed files are stored: the other cache writes are told to stop, and on
    the main thread (the store deferred after the report) the interrupt goes on, so that the
    command exits 130 and says so; polars raising it in another thread is only a stop."""
    import threading

    from dupfind import background
    from dupfind.assembly import PackRows
    from dupfind.ingest import _store_in_cache

    config = load_config(cwd=Path("/"))
    result = ingest([str(logs)], config)
    cache = TableCache(tmp_path / "cache", config.digest())
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(TableCache, "store", interrupted)
    keys = {f.path: cache.identity(f.path) for f in result.files}
    args = (cache, keys, {f.path: f for f in result.files}, PackRows(result.table), result.texts, result.rejects,
            dict(result.table.schema))
    raised = []

    def store():
        try:
            _store_in_cache(*args)
        except KeyboardInterrupt:
            raised.append(True)

    try:
        if on_main_thread:
            store()
        else:
            thread = threading.Thread(target=store)
            thread.start()
            thread.join()
        assert background.stopping() and raised == ([True] if on_main_thread else [])
    finally:
        background.wait()  # clears the stop


def test_indexes_and_packs_unused_for_a_month_are_pruned(logs, tmp_path):
    """The result cache's daily pruning removes directory indexes and packs no run used for
    FILE_ENTRY_MAX_AGE_S; a run that uses them keeps them (it touches both)."""
    import time

    from dupfind.result_cache import FILE_ENTRY_MAX_AGE_S, ResultCache

    cold, _ = _run(logs, tmp_path / "cache")
    old = time.time() - FILE_ENTRY_MAX_AGE_S - 3600
    for entry in [*_indexes(tmp_path / "cache"), *_packs(tmp_path / "cache")]:
        os.utime(entry, (old, old))
    _, cache = _run(logs, tmp_path / "cache")  # used again: recent
    assert cache.hits == len(cold.files)
    ResultCache(tmp_path / "cache")._prune_file_entries()
    assert len(_stored(tmp_path / "cache")) == len(cold.files) and len(_packs(tmp_path / "cache")) == 1

    for entry in [*_indexes(tmp_path / "cache"), *_packs(tmp_path / "cache")]:
        os.utime(entry, (old, old))
    (tmp_path / "cache" / ".pruned").unlink()  # pruned at most once a day
    ResultCache(tmp_path / "cache")._prune_file_entries()
    assert not _indexes(tmp_path / "cache") and not _packs(tmp_path / "cache")
    _, cache = _run(logs, tmp_path / "cache")
    assert cache.misses == len(cold.files)
