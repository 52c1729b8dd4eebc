"""Machine renderers: one JSON document, or one finding per NDJSON line."""

from __future__ import annotations

from typing import IO

import orjson

from dupfind.analyze import AnalysisReport

_OPTIONS = orjson.OPT_NON_STR_KEYS


def render_json(report: AnalysisReport, out: IO[bytes]) -> None:
    out.write(orjson.dumps(report.to_dict(), option=_OPTIONS | orjson.OPT_INDENT_2) + b"\n")


def render_ndjson(report: AnalysisReport, out: IO[bytes]) -> None:
    for finding in report.findings:
        out.write(orjson.dumps(finding.to_dict(), option=_OPTIONS) + b"\n")
