"""The result cache of analyses of inputs read in windows of time (dupfind.windows)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from dupfind.sources import expand_inputs, identities

if TYPE_CHECKING:
    from datetime import datetime, timedelta

    from dupfind.analyze import AnalysisReport
    from dupfind.config import Config
    from dupfind.ingest import FileReport
    from dupfind.rules_registry import Rule
    from dupfind.windows import Spill

# A windowed analysis is stored as an analysis (result_cache.store_analysis) of an entry with no
# table: its key is that of the inputs' set with the overlap, its report fields carry the file
# reports and the ids a redactor protects besides the report's own.

_FILES, _FILTERED_OUT, _PROTECTED = "windowed_files", "windowed_filtered_out", "windowed_protected"


def _stored_fields() -> list[str]:
    from dataclasses import fields

    from dupfind.analyze import AnalysisReport
    from dupfind.pipeline import LIVE_REPORT_FIELDS

    return [f.name for f in fields(AnalysisReport) if f.name not in LIVE_REPORT_FIELDS]


def cache_ref(
    paths: list[str], config: Config, rules: list[Rule], skew_s: float, timeouts: dict[str, float],
    max_jobs_per_value: int, since: datetime | None, until: datetime | None, overlap: timedelta,
) -> tuple[Any, str, str] | None:
    """Where the windowed analysis of these inputs is cached: (cache, entry key, analysis key);
    None where the inputs cannot be keyed (standard input, a file that cannot be examined)."""
    from dupfind.cache import default_cache_dir
    from dupfind.result_cache import ResultCache

    root = default_cache_dir()
    keys = identities(expand_inputs(paths))
    if keys is None:
        return None
    digest = f"{config.digest()}/windows/{overlap.total_seconds()!r}"
    entry = ResultCache(root).set_key(keys, digest, since, until, max_jobs_per_value)
    return ResultCache(root), entry, ResultCache.analysis_key(entry, rules, skew_s, timeouts, config.timeouts)


def load_cached(ref: tuple[Any, str, str], rules: list[Rule]) -> tuple[AnalysisReport, list[str]] | None:
    """The stored windowed analysis and its protected ids, or None (a damaged entry is deleted)."""
    from dupfind.ingest import IngestResult, empty_rejects
    from dupfind.pipeline import cached_report_class
    from dupfind.result_cache import _report_from_state

    cache, entry, key = ref
    hit = cache.load_analysis(entry, key)
    if hit is None:
        return None
    try:
        stored = _stored_state(hit)
        files = [_report_from_state(state) for state in stored.pop(_FILES)]
        inputs = IngestResult(pl.DataFrame(), files, empty_rejects(), stored.pop(_FILTERED_OUT))
        protected = stored.pop(_PROTECTED)
        # Decoded when used, and then only those asked for (decoding all 25,480 findings of a 5M-line
        # export took 5 s); the first is decoded now, which checks the stored findings' checksum.
        hit["findings"](_first_only(), False)
        report = cached_report_class()(inputs=inputs, findings=hit["findings"], rules=rules, context=None, **stored)
        report.__dict__["_finding_count"] = hit["count"]
        report.__dict__["_finding_index"] = hit["index"]
    except Exception:  # noqa: BLE001 (anything wrong with an entry means analysing again)
        cache.discard_analysis(entry, key)
        return None
    return report, protected


def _first_only():
    """A findings selection that takes the first finding it is asked about."""
    taken: list[bool] = []

    def select(rule: str, fingerprint: str) -> bool:
        if taken:
            return False
        taken.append(True)
        return True

    return select


def load_cached_files(ref: tuple[Any, str, str]) -> list[FileReport] | None:
    """The file reports (each input's span) of the stored windowed analysis, without decoding its
    findings (2 s at 5M lines), or None."""
    from dupfind.result_cache import _report_from_state

    cache, entry, key = ref
    hit = cache.load_analysis(entry, key)
    if hit is None:
        return None
    try:
        return [_report_from_state(state) for state in _stored_state(hit)[_FILES]]
    except Exception:  # noqa: BLE001 (anything wrong with an entry means analysing again)
        cache.discard_analysis(entry, key)
        return None


def _stored_state(hit: dict) -> dict:
    """A stored windowed analysis' report fields, checked to be this version's."""
    stored = dict(hit["report"])
    if sorted(stored) != sorted([*_stored_fields(), _FILES, _FILTERED_OUT, _PROTECTED]):
        raise ValueError("another report layout")
    return stored


def load_cached_value(ref: tuple[Any, str, str], kind: str, params: Any) -> tuple[bool, Any]:
    """A value derived from a stored windowed analysis (the stats of its windows): (found, value)."""
    from dupfind.result_cache import ResultCache

    cache, entry, key = ref
    return cache.load_value(entry, ResultCache.value_key(key, kind, params))


def store_cached_value(ref: tuple[Any, str, str], kind: str, params: Any, value: Any) -> None:
    from dupfind.result_cache import ResultCache

    cache, entry, key = ref
    if _entry_folder(cache, entry):
        cache.store_value(entry, ResultCache.value_key(key, kind, params), value)


def store_cached(ref: tuple[Any, str, str], report: AnalysisReport, protected: list[str]) -> None:
    cache, entry, key = ref
    fields = {name: getattr(report, name) for name in _stored_fields()}
    fields[_FILES] = [f.to_state() for f in report.inputs.files]
    fields[_FILTERED_OUT] = report.inputs.filtered_out
    fields[_PROTECTED] = protected
    if _entry_folder(cache, entry):
        cache.store_analysis(entry, key, report.findings, fields)
        cache.prune()


def store_spill(ref: tuple[Any, str, str], spill: Spill) -> None:
    """Keep the survey's spill beside the windowed analysis: later reads of a time (the timeline's)
    take their records from it instead of parsing the files again."""
    cache, entry, _ = ref
    if _entry_folder(cache, entry):
        spill.keep(cache.sets / entry / "spill")
    else:
        spill.remove()


def stored_spill(ref: tuple[Any, str, str]) -> Spill | None:
    """The spill kept beside the windowed analysis, or None."""
    from dupfind.windows import Spill

    cache, entry, _ = ref
    return Spill.stored(cache.sets / entry / "spill")


def _entry_folder(cache: Any, entry: str) -> bool:
    """The folder a windowed analysis and its values are stored in (an entry without a table)."""
    try:
        (cache.sets / entry / "analyses").mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return True
