"""The dispatcher's jobs file: attributes, identities, and file:line errors for bad lines."""

from __future__ import annotations

import pytest

from dispatch.jobsfile import (
    JobsFileError,
    job_id,
    parse_duration_s,
    parse_jobs_file,
    parse_jobs_text,
    parse_size_mib,
)


def test_the_issue_example_parses_with_its_attributes():
    text = """
# a comment, then a blank line

[vram=18G] python train.py --config a.yaml
[vram=30G gpus=2 est=2h] torchrun --nproc_per_node=2 train_big.py
[vram=8G retries=2 timeout=3h] python sweep.py --seed 3
python eval.py                                  # no declaration: an idle GPU, alone
"""
    a, b, c, d = parse_jobs_text(text, "jobs.txt")
    assert (a.line, a.command, a.vram_mib, a.gpus, a.est_s) == (
        4,
        "python train.py --config a.yaml",
        18 * 1024,
        1,
        None,
    )
    assert (b.vram_mib, b.gpus, b.est_s) == (30 * 1024, 2, 7200.0)
    assert (c.vram_mib, c.retries, c.timeout_s) == (8 * 1024, 2, 3 * 3600.0)
    assert d.vram_mib is None and d.command.startswith("python eval.py") and d.line == 7


@pytest.mark.parametrize(
    ("text", "mib"),
    [
        ("18G", 18432),
        ("18GiB", 18432),
        ("18gb", 18432),
        ("1.5G", 1536),
        ("512M", 512),
        ("512MiB", 512),
        ("700", 700),
    ],
)
def test_sizes_are_mib_or_gib(text, mib):
    assert parse_size_mib(text) == mib


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("30s", 30.0), ("90m", 5400.0), ("2h", 7200.0), ("1h30m", 5400.0), ("1d", 86400.0)],
)
def test_durations(text, seconds):
    assert parse_duration_s(text) == seconds


def test_identity_is_the_command_hash_and_its_occurrence_not_the_line():
    first = parse_jobs_text("python a.py\npython b.py\npython a.py\n", "f")
    moved = parse_jobs_text("# new comment\n[vram=4G] python a.py\npython b.py\npython a.py\n", "f")
    assert [s.job_id for s in first] == [s.job_id for s in moved]
    assert first[0].job_id == job_id("python a.py", 1) and first[2].job_id == job_id("python a.py", 2)
    assert first[0].job_id != first[2].job_id


def test_a_shell_test_in_brackets_is_a_command():
    (spec,) = parse_jobs_text("[ -f done ] || python a.py\n", "f")
    assert spec.command == "[ -f done ] || python a.py" and spec.vram_mib is None


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("[vram=lots] python a.py", "jobs.txt:2: vram: 'lots' is not a size"),
        ("[colour=red] python a.py", "jobs.txt:2: unknown attribute 'colour'"),
        ("[gpus=0] python a.py", "jobs.txt:2: gpus: 0 must be >= 1"),
        ("[gpus=2 gpus=3] python a.py", "jobs.txt:2: attribute 'gpus' given twice"),
        ("[vram=4G python a.py", "jobs.txt:2: the attribute list has no closing ']'"),
        ("[vram=4G]", "jobs.txt:2: no command after the attributes"),
        ("[est=soon] python a.py", "jobs.txt:2: est: 'soon' is not a duration"),
        ("[timeout=-5] python a.py", "jobs.txt:2: timeout: '-5': a duration must be > 0"),
    ],
)
def test_bad_lines_give_file_and_line(line, message):
    with pytest.raises(JobsFileError) as e:
        parse_jobs_text(f"python ok.py\n{line}\n", "jobs.txt")
    assert str(e.value).startswith(message)


def test_a_file_that_is_not_utf8_names_its_line(tmp_path):
    path = tmp_path / "jobs.txt"
    path.write_bytes(b"python a.py\npython \xff.py\n")
    with pytest.raises(JobsFileError, match=r"jobs.txt:2: not UTF-8"):
        parse_jobs_file(path)
