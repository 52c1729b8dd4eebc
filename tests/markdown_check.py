"""Render Markdown the way GitHub (cmark-gfm) and GitLab-like GFM (markdown-it-py) do, and check it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

import cmarkgfm
from markdown_it import MarkdownIt

GITLAB_LIKE = MarkdownIt("gfm-like")  # CommonMark + GFM tables, strikethrough and linkify
# What GitHub and GitLab turn into mentions and references after parsing (outside code).
REFERENCE = re.compile(r"(?<![\w\u2060])[@#!~%$&](?=[A-Za-z0-9])")


@dataclass
class Rendered:
    """A GitHub rendering reduced to what the tests look at."""

    tables: list[list[list[str]]] = field(default_factory=list)  # table -> rows -> cell texts
    links: list[str] = field(default_factory=list)
    tags: set[str] = field(default_factory=set)
    text_outside_code: list[str] = field(default_factory=list)
    headings: list[tuple[int, str]] = field(default_factory=list)


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out = Rendered()
        self._code = 0
        self._cell: list[str] | None = None
        self._heading: tuple[int, list[str]] | None = None

    def handle_starttag(self, tag, attrs):
        self.out.tags.add(tag)
        if tag == "a":
            self.out.links.append(dict(attrs).get("href", ""))
        elif tag == "code":
            self._code += 1
        elif tag == "table":
            self.out.tables.append([])
        elif tag == "tr":
            self.out.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif re.fullmatch(r"h[1-6]", tag):
            self._heading = (int(tag[1]), [])

    def handle_endtag(self, tag):
        if tag == "code":
            self._code -= 1
        elif tag in ("td", "th") and self._cell is not None:
            self.out.tables[-1][-1].append("".join(self._cell))
            self._cell = None
        elif re.fullmatch(r"h[1-6]", tag) and self._heading:
            self.out.headings.append((self._heading[0], "".join(self._heading[1])))
            self._heading = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._heading is not None:
            self._heading[1].append(data)
        if not self._code:
            self.out.text_outside_code.append(data)


def github(markdown: str) -> Rendered:
    collector = _Collector()
    collector.feed(cmarkgfm.github_flavored_markdown_to_html(markdown))
    return collector.out


def assert_renders_safely(markdown: str) -> Rendered:
    """Both renderers: tables keep their shape, and nothing becomes a link, an image, HTML or a reference."""
    rendered = github(markdown)
    assert not rendered.links, rendered.links
    assert not rendered.tags & {"img", "script", "iframe", "a", "del", "s", "strike"}, rendered.tags
    assert "raw HTML omitted" not in cmarkgfm.github_flavored_markdown_to_html(markdown)
    for table in rendered.tables:
        widths = {len(row) for row in table}
        assert len(widths) == 1, f"a table row has a different number of cells: {table}"
    text = "".join(rendered.text_outside_code)
    assert not REFERENCE.search(text), REFERENCE.findall(text)
    tokens = GITLAB_LIKE.parse(markdown)
    stack = list(tokens)
    while stack:
        token = stack.pop()
        assert token.type not in ("html_block", "html_inline", "link_open", "image", "s_open"), token
        stack.extend(token.children or [])
    # The same tables, cell for cell, in the GitLab-like rendering.
    header_cells, rows = [], []
    for token in tokens:
        if token.type == "tr_open":
            rows.append(0)
        elif token.type in ("th_open", "td_open"):
            rows[-1] += 1
        elif token.type == "table_close":
            header_cells.append(set(rows))
            rows = []
    assert all(len(widths) == 1 for widths in header_cells), header_cells
    assert len(header_cells) == len(rendered.tables)
    return rendered
