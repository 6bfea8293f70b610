"""One self-contained HTML page (report.html) from a results table, figures, a file list and the run's identity.

The page works offline: figures are embedded as data URIs (PNG, else SVG), nothing is fetched (no script, font,
stylesheet or image from elsewhere), and its CSS lays it out for a phone-width window as well as a desktop. The
same inputs give the same bytes.
"""

from __future__ import annotations

import base64
import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from metrics.csv_table import Table

EMBEDDED = {".png": "image/png", ".svg": "image/svg+xml"}
"""figure formats the page embeds, preferred first (a PDF-only figure is linked, not shown)"""

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; padding: 0.8em;
       max-width: 72em; line-height: 1.4; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ddd; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #555; }
pre, code { font-size: 0.85em; white-space: pre-wrap; word-break: break-all; background: #f6f6f6; }
pre { padding: 0.5em; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 30em), 1fr)); gap: 0.8em; }
"""


@dataclass(frozen=True)
class PageFigure:
    """A figure on the page: its caption and its files (one per format; the first PNG or SVG is embedded)."""

    caption: str
    paths: tuple[Path, ...]


@dataclass(frozen=True)
class Page:
    """What report.html shows, top to bottom."""

    title: str
    intro: str
    notes: str = ""
    """text shown after the intro, in the few Markdown forms `notes_html` reads (a report's verdicts)"""
    tables: tuple[tuple[str, Table], ...] = ()
    """(heading, table) pairs: the results"""
    figures: tuple[PageFigure, ...] = ()
    figures_note: str = ""
    """said where the figures would be (e.g. why there are none)"""
    files: tuple[tuple[str, str], ...] = ()
    """(relative path, what it holds) for every file of the folder"""
    command: str = ""
    identity: dict = field(default_factory=dict)
    """the run's identity record (run_config.json's `run`), shown as JSON"""


def _cell(text: str) -> str:
    try:
        float(text)
    except ValueError:
        return f"<td>{html.escape(text)}</td>"
    return f'<td class="num">{html.escape(text)}</td>'


def table_html(table: Table) -> str:
    """The table as HTML; a one-row table is written as (column, value) rows, which a phone shows without
    scrolling sideways."""
    if len(table.cells) and all(len(c) == 1 for c in table.cells):
        rows = "".join(
            f"<tr><th>{html.escape(n)}</th>{_cell(c[0])}</tr>\n"
            for n, c in zip(table.names, table.cells, strict=True)
        )
        return f'<div class="scroll"><table>\n{rows}</table></div>'
    head = "".join(f"<th>{html.escape(n)}</th>" for n in table.names)
    rows = "".join(
        "<tr>" + "".join(_cell(c) for c in row) + "</tr>\n" for row in zip(*table.cells, strict=True)
    )
    return f'<div class="scroll"><table>\n<tr>{head}</tr>\n{rows}</table></div>'


_INLINE = re.compile(r"\*\*(.+?)\*\*|`([^`]+)`")


def _inline(text: str) -> str:
    """`text` escaped, with **bold** and `code` spans marked up."""
    out, at = [], 0
    for m in _INLINE.finditer(text):
        out.append(html.escape(text[at : m.start()]))
        bold, code = m.groups()
        out.append(
            f"<strong>{_inline(bold)}</strong>" if bold is not None else f"<code>{html.escape(code)}</code>"
        )
        at = m.end()
    out.append(html.escape(text[at:]))
    return "".join(out)


def notes_html(text: str) -> str:
    """The Markdown that a report writes, as HTML: `## ` headings, paragraphs, `- ` items (nested by two
    spaces), **bold** and `code`. Table rows (`|`) and images (`![`) are left out: the page shows those itself."""
    parts: list[str] = []
    depth = 0  # lists open

    def close_to(level: int) -> None:
        nonlocal depth
        while depth > level:
            parts.append("</li></ul>")
            depth -= 1

    for line in text.splitlines():
        stripped = line.lstrip(" ")
        shown = stripped and not stripped.startswith(("|", "!["))
        if stripped.startswith("- "):
            level = min((len(line) - len(stripped)) // 2 + 1, depth + 1)  # (at most one level deeper)
            close_to(level)
            if depth == level:
                parts.append("</li>")
            else:
                parts.append("<ul>")
                depth += 1
            parts.append(f"<li>{_inline(stripped[2:])}")
        elif shown and depth and not stripped.startswith("## "):
            parts.append(f" {_inline(stripped)}")  # a list item's text, continued
        else:
            close_to(0)
            if stripped.startswith("## "):
                parts.append(f"<h2>{_inline(stripped[3:])}</h2>")
            elif shown:
                parts.append(f"<p>{_inline(stripped)}</p>")
    close_to(0)
    return "\n".join(parts)


def _figure_html(fig: PageFigure, folder: Path) -> str:
    links = " · ".join(
        f'<a href="{html.escape(p.relative_to(folder).as_posix())}">{html.escape(p.suffix[1:])}</a>'
        for p in fig.paths
    )
    shown = next((p for ext in EMBEDDED for p in fig.paths if p.suffix == ext), None)
    img = ""
    if shown is not None:
        data = base64.b64encode(shown.read_bytes()).decode("ascii")
        alt = html.escape(fig.caption, quote=True)
        img = f'<img src="data:{EMBEDDED[shown.suffix]};base64,{data}" alt="{alt}">'
    return f"<figure>{img}<figcaption>{html.escape(fig.caption)} ({links})</figcaption></figure>"


def render(page: Page, folder: Path) -> str:
    """The page as HTML text; figure paths are read (and linked) relative to `folder`."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(page.title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(page.title)}</h1>",
        f"<p>{html.escape(page.intro)}</p>",
    ]
    if page.notes:
        parts.append(notes_html(page.notes))
    for heading, table in page.tables:
        parts += [f"<h2>{html.escape(heading)}</h2>", table_html(table)]
    parts.append("<h2>Figures</h2>")
    if page.figures_note:
        parts.append(f"<p>{html.escape(page.figures_note)}</p>")
    if page.figures:
        parts.append(
            '<div class="grid">' + "\n".join(_figure_html(f, folder) for f in page.figures) + "</div>"
        )
    if page.command:
        parts += ["<h2>Command</h2>", f"<pre>{html.escape(page.command)}</pre>"]
    parts.append("<h2>Files in this folder</h2>")
    rows = "".join(
        f'<tr><td><a href="{html.escape(name)}">{html.escape(name)}</a></td><td>{html.escape(what)}</td></tr>\n'
        for name, what in page.files
    )
    parts.append(
        f'<div class="scroll"><table>\n<tr><th>file</th><th>what it holds</th></tr>\n{rows}</table></div>'
    )
    if page.identity:
        identity = json.dumps(page.identity, indent=2, sort_keys=True, default=str)
        parts += [
            "<h2>Run identity</h2>",
            "<details><summary>every option, input checksum and code version the results depend on</summary>",
            f"<pre>{html.escape(identity)}</pre></details>",
        ]
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_page(page: Page, path: Path) -> Path:
    """Write `page` as `path` (figures relative to its folder); returns the path."""
    path.write_text(render(page, path.parent), encoding="utf-8")
    return path
