"""One self-contained HTML timeline (inline CSS and script, no network): zoom, scroll, hover and click details."""

from __future__ import annotations

import html
from functools import cache
from pathlib import Path

import orjson

_ASSETS = Path(__file__).resolve().parent / "assets"


_LEGEND = (
    ("#3a9d4a", "execution"), ("#d62728", "duplicated action"), ("#b04fc6", "cut short"), ("#e6a23c", "failed"),
    ("#4a7bd0", "stopped by a guard"), ("#e0a800", "stop signal"), ("#d62728", "killed / went silent"),
    ("#1f9bb4", "exited"), ("#1f77b4", "deploy window (darker: generations overlap)"),
)


@cache
def _asset(name: str) -> str:
    """The page's inline style and script, kept as files beside this module."""
    return (_ASSETS / name).read_text()


def _json_island(document: dict) -> str:
    """The data as JSON that cannot close its script element or open a comment."""
    text = orjson.dumps(document).decode()
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _summary_table(window: dict) -> str:
    s = window["summary"]
    rows = [
        ("window (UTC)", f"{window['start']} → {window['end']}"),
        ("generations", s["generations"]), ("workers", s["workers"]), ("executions", s["executions"]),
        ("generations consumed together", f"{s['overlap_s']:.0f} s" if s["overlap_s"] else "-"),
        ("taken after a stop signal", s["taken_after_stop"]), ("cut short", s["interrupted"]),
        ("duplicated side effects in this window", s["duplicates_in_window"]),
        ("duplicated side effects outside it", s["duplicates_outside_window"]),
    ]
    body = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows)
    return f'<table class="sum">{body}</table>'


def render_html(document: dict) -> str:
    windows = []
    for i, window in enumerate(document["windows"]):
        headline = window["summary"].get("concentration")
        windows.append(
            f'<section id="tl-{i}"><h2>{html.escape(window["title"])}</h2>'
            + (f"<p><b>{html.escape(headline)}</b></p>" if headline else "")
            + _summary_table(window)
            + '<div class="controls"><button class="zin">zoom in</button><button class="zout">zoom out</button>'
            '<button class="zreset">reset</button> <span class="meta">ctrl + wheel zooms; scroll sideways to pan; '
            "hover or click a bar for its ids, worker, attempt and evidence line</span></div>"
            '<div class="scroll"></div></section>'
        )
    legend = "".join(f'<span><i class="sw" style="background:{c}"></i>{html.escape(t)}</span>' for c, t in _LEGEND)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">"
        "<title>dupfind timeline</title>"
        f"<style>{_asset('timeline.css')}</style></head><body>"
        f"<h1>dupfind timeline</h1><p class=\"meta\">verdict: {html.escape(document['verdict'])}</p>"
        f'<div class="legend">{legend}</div>'
        + "".join(windows)
        + '<h2>Selected execution</h2><div id="details">click an execution bar</div><div id="tip"></div>'
        + f'<script id="timeline-data" type="application/json">{_json_island(document)}</script>'
        + f"<script>{_asset('timeline.js')}</script>"
        + "<noscript>The timeline drawing needs JavaScript; the data is embedded in this file as JSON.</noscript>"
        "</body></html>\n"
    )
