"""Every link between the project's markdown pages (README, BENCHMARKS, docs/, models/, the fixtures' notes) reaches a
file that exists and, with a `#fragment`, a heading of that page (GitHub's anchors); no network."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    {
        *ROOT.glob("*.md"),
        *ROOT.glob("docs/*.md"),
        *ROOT.glob("models/*.md"),
        *ROOT.glob("tests/fixtures/*/*.md"),
    }
)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")  # [text](target); images and code spans are not links
HEADING = re.compile(r"#{1,6} +(.*?) *#*$")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading's text: markup dropped, lowercase, punctuation but hyphens and spaces dropped,
    spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    return re.sub(r"[^\w\- ]", "", text.replace("`", "").lower()).replace(" ", "-")


def _prose_lines(page: Path) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings (a repeated one gets -1, -2, ... as on GitHub)."""
    times: dict[str, int] = {}
    found = set()
    for _, line in _prose_lines(page):
        match = HEADING.match(line)
        if match:
            base = anchor(match.group(1))
            found.add(f"{base}-{times[base]}" if base in times else base)
            times[base] = times.get(base, 0) + 1
    return found


def _paragraphs(page: Path) -> list[tuple[int, str]]:
    """(first line number, text) of each run of consecutive non-blank prose lines: a link's text, or a code span,
    may wrap onto the next line of its paragraph, never past it."""
    found: list[tuple[int, str]] = []
    last = 0
    for number, line in _prose_lines(page):
        if line.strip() and found and number == last + 1:
            found[-1] = (found[-1][0], f"{found[-1][1]}\n{line}")
        elif line.strip():
            found.append((number, line))
        last = number if line.strip() else 0
    return found


def _links(page: Path) -> list[tuple[int, str]]:
    """(line number, target) of each link of `page` outside code: the line is the target's."""
    found = []
    for first, text in _paragraphs(page):
        # a code span becomes blanks (its line breaks kept), so what it quotes is no link and line numbers hold
        prose = re.sub(r"`[^`]*`", lambda m: re.sub(r"[^\n]", " ", m.group()), text)
        found += [(first + prose.count("\n", 0, m.start(1)), m.group(1)) for m in LINK.finditer(prose)]
    return found


def broken_links(page: Path) -> list[str]:
    """`page:line: target` for each link of `page` to a missing file or heading (web addresses are not followed)."""
    found = []
    for number, target in _links(page):
        if re.match(r"[a-z][a-z+.-]*:", target):  # https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (fragment and linked.suffix == ".md" and fragment not in anchors(linked)):
            found.append(
                f"{page.relative_to(ROOT) if page.is_relative_to(ROOT) else page}:{number}: {target}"
            )
    return found


def test_the_pages_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in PAGES}
    assert {"README.md", "BENCHMARKS.md", "docs/README.md", "docs/cli.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_reaches_its_file_and_heading(page):
    assert broken_links(page) == []


def test_anchors_follow_githubs_rule():
    assert anchor("Appendix: history") == "appendix-history"
    assert (
        anchor("EASY: a lone arrival (2026-11-28, late morning)")
        == "easy-a-lone-arrival-2026-11-28-late-morning"
    )
    assert anchor("`--mode report` — held-out sets") == "--mode-report--held-out-sets"
    assert anchor("the simulator's [per-job](x.md) path ≥ 50k") == "the-simulators-per-job-path--50k"


def test_the_checker_finds_a_missing_file_a_missing_heading_and_a_repeated_one(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# Runs\n\n## Runs\n\n```\n[not a link](nowhere.md)\n```\n"
        "[a](#runs) [b](#runs-1) [c](#runs-2) [d](missing.md) [e](page.md#runs) `[f](gone.md)` [g](https://x.org/#y)\n"
    )
    assert broken_links(page) == [f"{page}:8: #runs-2", f"{page}:8: missing.md"]


def test_a_link_whose_text_wraps_onto_the_next_line_is_checked(tmp_path):
    """README and docs wrap at 120 columns, so a link's text often spans two lines; a code span may too."""
    page = tmp_path / "page.md"
    page.write_text(
        "# Runs\n\nsee [the runs\nabove](#runz) and `a [code\n](gone.md)` span\n\n[a\n\n](gone.md)\n"
    )
    assert broken_links(page) == [f"{page}:4: #runz"]
