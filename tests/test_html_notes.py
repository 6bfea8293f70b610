"""report.html's text from a report's Markdown (metrics/html_page.py `notes_html`): a hand-written case of every
form a report writes, escaping, and well-formed nesting on Hypothesis-made lists."""

from __future__ import annotations

from html.parser import HTMLParser

from hypothesis import given
from hypothesis import strategies as st

from metrics.html_page import notes_html


def test_every_form_a_report_writes_by_hand():
    text = "\n".join(
        [
            "Models: `models/x` (a < b & c).",
            "",
            "**Not held out**: `best`.",
            "| set | policy |",
            "| --- | --- |",
            "## Quality target",
            "",
            "- **cem (final)**: 0 of 3 → NOT met.",
            "  - seed 0: medium 2.2 % (NOT met)",
            "  - seed 1: hard",
            "    continued",
            "- es",
            "![curves](c.png) (`c.csv`)",
            "after",
        ]
    )
    assert notes_html(text).split("\n") == [
        "<p>Models: <code>models/x</code> (a &lt; b &amp; c).</p>",
        "<p><strong>Not held out</strong>: <code>best</code>.</p>",
        "<h2>Quality target</h2>",
        "<ul>",
        "<li><strong>cem (final)</strong>: 0 of 3 → NOT met.",
        "<ul>",
        "<li>seed 0: medium 2.2 % (NOT met)",
        "</li>",
        "<li>seed 1: hard",
        " continued",
        "</li></ul>",
        "</li>",
        "<li>es",
        "</li></ul>",
        "<p>after</p>",
    ]


class _Nesting(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.open.append(tag)

    def handle_endtag(self, tag) -> None:
        assert self.open and self.open.pop() == tag, tag


line = st.one_of(
    st.tuples(st.integers(0, 3), st.text("ab<&`*", min_size=1, max_size=6)).map(
        lambda x: "  " * x[0] + "- " + x[1]
    ),
    st.sampled_from(["", "## h", "plain", "| a |", "![f](f.png)", "  more"]),
)


@given(st.lists(line, max_size=25))
def test_any_mix_of_items_paragraphs_and_headings_is_well_nested_and_keeps_every_item(lines):
    page = notes_html("\n".join(lines))
    parser = _Nesting()
    parser.feed(page)
    assert parser.open == []
    assert page.count("<li>") == sum(x.lstrip(" ").startswith("- ") for x in lines)
