"""`python main.py --help`: every option says what it does and its default once, never `None`."""

from __future__ import annotations

import argparse

import pytest

from cli.parser import build_parser


def _helps() -> dict[str, str]:
    """Each option's help text as --help prints it (one line, defaults appended), by its first option string."""
    parser = build_parser()
    formatter = parser._get_formatter()
    return {
        a.option_strings[0]: " ".join(formatter._expand_help(a).split())
        for a in parser._actions
        if a.option_strings and not isinstance(a, argparse._HelpAction)
    }


def test_every_option_has_help_with_its_default_stated_once():
    parser = build_parser()
    flags = {a.option_strings[0] for a in parser._actions if isinstance(a, argparse._StoreTrueAction)}
    for option, text in _helps().items():
        assert text, f"{option} has no help"
        assert "None" not in text and "False" not in text, f"{option}: {text}"
        assert text.count("default") <= 1, f"{option} states its default twice: {text}"
        if option not in flags:  # a flag is off unless given
            assert "default" in text or "required" in text, f"{option} states no default: {text}"


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ("--seed", "(default: 0)"),
        ("--algos", "(default: fcfs,sjf,easy)"),
        ("--validation_seeds", "(default: 200,201,202,203,204)"),
        ("--num_jobs", "(default: the difficulty preset's: easy 300, medium 1000, hard 3000)"),
        ("--models_dir", "(default: models)"),
        ("--demo_policy", "(default: sjf)"),
        ("--total_steps", "(default: d3qn 120,000, sac 80,000, ppo 400,000)"),
    ],
)
def test_defaults_shown(option, expected):
    assert expected in _helps()[option]


def test_help_text_has_no_placeholder_defaults(capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "(default: None)" not in out and "(default: False)" not in out and "--models_dir" in out
