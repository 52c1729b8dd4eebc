"""The analyze stage: correlate, run every enabled rule, attribute causes, decide the verdict."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from dupfind.config import Config
from dupfind.copies import copies_warning
from dupfind.correlate import Correlation
from dupfind.findings import Finding, FindingBrief, severity_rank
from dupfind.ingest_result import IngestResult
from dupfind.render.formats_report import file_entries, totals_to_dict
from dupfind.rules_registry import Rule, detector_named
from dupfind.timefmt import iso_us

if TYPE_CHECKING:  # a report from the cache needs neither (a warm command imports less)
    from dupfind.analysis import AnalysisContext

SCHEMA_VERSION = "1.0"


@dataclass
class AnalysisReport:
    """Everything a renderer needs: inputs, summary, verdict, findings and the rules behind them."""

    inputs: IngestResult
    findings: list[Finding]
    rules: list[Rule]
    verdict: str
    verdict_reason: str
    summary: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    context: AnalysisContext | None = None
    baseline: dict[str, Any] | None = None  # set when findings known from an earlier run were left out

    @property
    def harmful(self) -> list[Finding]:
        return [f for f in self.findings if f.harmful]

    def findings_where(self, select: Callable[[str, str], bool]) -> list[Finding]:
        """The findings whose rule code and fingerprint `select` accepts, in report order; a cached
        report decodes only those."""
        return [f for f in self.findings if select(f.rule, f.fingerprint)]

    def findings_of(self, *rules: str) -> list[Finding]:
        """The findings of these rules (codes or code prefixes such as "DF3"), in report order."""
        return self.findings_where(lambda rule, _: rule.startswith(rules))

    def findings_without_evidence(self) -> list[Finding]:
        """Every finding, in report order; a cached report leaves out their evidence (decoding it
        is most of decoding a finding): for a view that shows the evidence of none, or of a few
        it then asks for with findings_where."""
        return self.findings

    def finding_index(self) -> list[FindingBrief]:
        """Each finding's rule, fingerprint, severity, harm and cause, in report order; a cached
        report decodes no finding for it."""
        return [FindingBrief.of(f) for f in self.findings]

    @property
    def finding_count(self) -> int:
        return len(self.findings)

    def root_causes(self) -> dict[str, int]:
        counts = Counter(f.cause or "unknown" for f in self.finding_index() if f.harmful)
        return dict(counts.most_common())

    def steps_of(self, rule: Rule) -> list[str]:
        """The remediation steps of a rule that fired: for the root causes of its findings above
        info, most frequent first, then its own (each finding's remediation lists its cause's)."""
        causes = Counter(f.cause for f in self.finding_index() if f.rule == rule.code and f.severity != "info" and f.cause)
        return rule.steps_for([cause for cause, _ in causes.most_common()])

    def fired_rules(self) -> list[Rule]:
        codes = {f.rule for f in self.finding_index()}
        return [r for r in self.rules if r.code in codes]

    def to_dict(self, findings: bool = True, as_written: bool = False) -> dict[str, Any]:
        """The JSON document; without `findings`, its last key holds an empty list (a renderer then
        writes the findings one at a time: machine.write_json_items); `as_written`, with parts
        given as the JSON text render.machine writes (formats_report.file_entries)."""
        by_rule = Counter(f.rule for f in self.findings)
        return {
            "schema": SCHEMA_VERSION,
            "verdict": self.verdict,
            "verdict_reason": self.verdict_reason,
            "inputs": {"files": file_entries(self.inputs, 2, as_written), "totals": totals_to_dict(self.inputs)},
            "summary": self.summary,
            "root_causes": self.root_causes(),
            "rules": [
                {"code": r.code, "name": r.name, "title": r.title, "severity": r.severity,
                 "enabled": r.enabled, "findings": by_rule.get(r.code, 0)}
                for r in self.rules
            ],
            "warnings": self.warnings,
            **({"baseline": self.baseline} if self.baseline is not None else {}),
            "findings": [f.to_dict() for f in self.findings] if findings else [],
        }


def _summary(ctx: AnalysisContext, result: IngestResult, findings: list[Finding]) -> dict[str, Any]:
    from dupfind.deploy_concentration import deploy_summary

    table = ctx.table
    effects = ctx.side_effects
    executions = ctx.executions
    return summary_of(
        findings,
        records=table.height,
        first_ts=table["ts"].min() if table.height else None,
        last_ts=table["ts"].max() if table.height else None,
        actions=ctx.counted_actions,
        executions=executions.height,
        workers=executions["worker_id"].n_unique() if executions.height else 0,
        deployments=table["deployment_id"].unique().to_list(),
        repeated=int(executions.group_by("action_id").len().filter(pl.col("len") > 1).height) if executions.height else 0,
        side_effect_requests=effects.height,
        timeouts=ctx.known_timeouts,
        deploys=deploy_summary(ctx),
    )


def summary_of(
    findings: list[Finding], *, records: int, first_ts, last_ts, actions: int, executions: int, workers: int,
    deployments, repeated: int, side_effect_requests: int, timeouts: dict[str, float], deploys: dict[str, Any],
) -> dict[str, Any]:
    """The report's summary from the counts of the records analysed and the findings."""
    return {
        "records": records,
        "first_ts": iso_us(first_ts) if first_ts is not None else None,
        "last_ts": iso_us(last_ts) if last_ts is not None else None,
        "actions": actions,
        "executions": executions,
        "workers": workers,
        "deployments": sorted(d for d in deployments if d is not None)[:50],
        "actions_with_repeated_executions": repeated,
        "side_effect_requests": side_effect_requests,
        **finding_figures(findings),
        "timeouts_s": timeouts,
        "deploys": deploys,
    }


def finding_figures(findings: list[Finding]) -> dict[str, Any]:
    """The summary's figures that come from the harmful findings."""
    harmful = [f for f in findings if f.harmful]
    return {
        "duplicated_actions": len({f.action_id for f in harmful}),
        "duplicated_side_effects": sum(int(f.figures.get("side_effects", 0)) - 1 for f in harmful),
        "duplicates_by_side_effect": dict(Counter(str(f.figures.get("side_effect")) for f in harmful).most_common()),
    }


def _verdict(ctx: AnalysisContext, findings: list[Finding]) -> tuple[str, str]:
    def repeated() -> int:
        return ctx.executions.group_by("action_id").len().filter(pl.col("len") > 1).height if ctx.executions.height else 0

    return verdict_of(findings, ctx.counted_actions, lambda: ctx.has_side_effect_records, repeated, ctx.executions.height)


def verdict_of(
    findings: list[Finding], actions: int, has_side_effect_records: Callable[[], bool], repeated: Callable[[], int],
    executions: int,
) -> tuple[str, str]:
    """The verdict and its reason, from the findings and what the records hold."""
    harmful = [f for f in findings if f.harmful]
    if harmful:
        actions = len({f.action_id for f in harmful})
        return "harmful_duplicates", f"{actions} action(s) had a side effect executed more than once."
    if actions == 0:
        return "insufficient_evidence", "no job records could be correlated: no job, event, idempotency or notification ids were found."
    if executions == 0 and not has_side_effect_records():
        # A producer's log without its workers': nothing ran, or was done, that could have been twice.
        return "insufficient_evidence", (
            f"{actions:,} action(s) were found but no execution or side effect of any (no record receives, runs "
            "or does a job): add the workers' logs."
        )
    possible = [f for f in findings if f.rule == "DF101"]
    if possible:
        return "insufficient_evidence", (
            f"{len(possible)} action(s) may have repeated a side effect, but the logs cannot settle it "
            "(requests timed out or no side-effect records were logged): log each provider request and its response with the job id."
        )
    if not has_side_effect_records():
        count = repeated()
        if count:
            return "insufficient_evidence", (
                f"{count} action(s) ran more than once, but no side-effect records (provider requests, sends) "
                "were found, so a repeat can only be possible harm: log each provider request with the job id."
            )
    return "no_harmful_duplicates", "no side effect was executed more than once."


def finding_order(f: Finding) -> tuple:
    """The report's order: most severe first, harmful before not, then by rule, time, fingerprint."""
    return (-severity_rank(f.severity), not f.harmful, f.rule, f.first_ts or 0, f.fingerprint)


def analyze(
    result: IngestResult,
    config: Config,
    rules: list[Rule],
    skew_s: float = 0.5,
    timeouts: dict[str, float] | None = None,
    max_jobs_per_value: int = 25,
    correlation: Correlation | None = None,
    keep_frames: bool = True,
) -> AnalysisReport:
    """Run the whole analysis on an ingested table (or on its `correlation`, already computed).

    Without `keep_frames`, the frames the detectors share (analysis.DETECTOR_FRAMES) are released
    before the findings' details are filled: for a report made of its findings alone, when no
    cache stores those frames for later commands (a view that reads them derives them again)."""
    if correlation is None:
        from dupfind.pipeline import correlate_inputs

        correlation = correlate_inputs(result.table, config, max_jobs_per_value, result.texts)
    from dupfind.analysis import AnalysisContext

    ctx = AnalysisContext(correlation, config, skew_s, {**config.timeouts, **(timeouts or {})})
    findings: list[Finding] = []
    for rule in rules:
        if rule.enabled:
            findings.extend(detector_named(rule.detector)(ctx, rule))
    # The verdict and summary read neither the order of the findings nor their details.
    verdict, reason = _verdict(ctx, findings)
    summary = _summary(ctx, result, findings)
    if not keep_frames:
        ctx.release_detector_frames()
    ctx.fill_details()
    findings.sort(key=finding_order)
    warnings = [w.text() for w in correlation.warnings]
    warnings += ctx.detector_warnings
    copied = copies_warning(result.copies)
    if copied is not None:
        warnings.append(copied)
    return AnalysisReport(result, findings, rules, verdict, reason, summary, warnings, ctx)


def with_findings(report: AnalysisReport, findings: list[Finding]) -> AnalysisReport:
    """The same analysis reporting only `findings`: summary and verdict recomputed from them."""
    ctx = report.context
    if ctx is None:  # merged from windows of time (dupfind.windows): its counts stay
        summary = {**report.summary, **finding_figures(findings)}
        verdict, reason = verdict_of(
            findings, summary["actions"], lambda: summary["side_effect_requests"] > 0,
            lambda: summary["actions_with_repeated_executions"], summary["executions"],
        )
        return AnalysisReport(report.inputs, findings, report.rules, verdict, reason, summary, report.warnings, None,
                              report.baseline)
    verdict, reason = _verdict(ctx, findings)
    return AnalysisReport(report.inputs, findings, report.rules, verdict, reason,
                          _summary(ctx, report.inputs, findings), report.warnings, ctx, report.baseline)
