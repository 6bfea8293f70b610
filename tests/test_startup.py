"""What a small command loads and writes: `import main` and a heuristic eval without figures import none of the
heavy packages (they are imported only on the paths that use them), and `--plots none` leaves out exactly the
PNG files. (Their speed is measured by bench/bench_startup.py, not here.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cli.checks import check_command_line, given_options
from cli.parser import build_parser, config_from_args
from main import main

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("matplotlib", "pandas", "torch", "gymnasium", "scipy")
SMALL_EVAL = ["--mode", "eval", "--algo", "fcfs", "--num_jobs", "30", "--difficulty", "easy", "--no_progress"]


def _heavy_modules_after(code: str) -> list[str]:
    """The HEAVY packages a fresh interpreter has imported after running `code` in the project folder."""
    probe = f"{code}\nimport sys\nprint('heavy:' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    last = proc.stdout.splitlines()[-1]
    assert last.startswith("heavy:"), proc.stdout
    return [m for m in last.removeprefix("heavy:").split(",") if m]


def test_import_main_imports_no_heavy_package():
    assert _heavy_modules_after("import main") == []


@pytest.mark.parametrize("algo", ["fcfs", "easy"])
def test_a_heuristic_eval_without_figures_imports_no_heavy_package(tmp_path, algo):
    argv = [*SMALL_EVAL, "--algo", algo, "--plots", "none", "--log_dir", str(tmp_path / "run")]
    assert _heavy_modules_after(f"import main\nassert main.main({argv!r}) == 0") == []
    assert (tmp_path / "run" / "jobs.csv").is_file()


def test_the_probe_sees_a_heavy_import():
    """The probe above can fail: a run with figures imports matplotlib."""
    assert _heavy_modules_after("import metrics.plots") == ["matplotlib"]


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "run_config.json"
    }


@pytest.mark.parametrize(
    "argv",
    [
        SMALL_EVAL,
        ["--mode", "compare", "--algos", "fcfs,sjf", "--seeds", "0,1", *SMALL_EVAL[4:8]],
        [*SMALL_EVAL, "--power", "idle_off:600"],
    ],
    ids=["eval", "compare", "eval-power"],
)
def test_plots_none_writes_every_file_but_the_pngs_and_pages_with_the_same_bytes(tmp_path, argv):
    argv = [*argv, "--no_progress"] if "--no_progress" not in argv else argv
    assert main([*argv, "--log_dir", str(tmp_path / "png")]) == 0
    assert main([*argv, "--plots", "none", "--log_dir", str(tmp_path / "none")]) == 0
    with_png, without = _files(tmp_path / "png"), _files(tmp_path / "none")
    pngs = {name for name in with_png if name.endswith(".png")}
    assert pngs and not any(name.endswith(".png") for name in without)
    # report.html shows the figures (embedded) and the command (--plots none): both runs write one, which differ
    pages = {name for name in with_png if name.endswith("report.html")}
    assert pages and pages == {name for name in without if name.endswith("report.html")}
    same = {name: data for name, data in without.items() if name not in pages}
    assert same == {name: data for name, data in with_png.items() if name not in pngs | pages}


def test_plots_none_records_the_same_run():
    """--plots changes which figures are drawn, not the results: the run's identity (and folder) is the same."""
    from cli.run_folder import run_identity

    parse = build_parser().parse_args
    configs = [config_from_args(parse([*SMALL_EVAL, "--plots", p])) for p in ("png", "none")]
    assert configs[0].plots == "png" and configs[1].plots == "none"
    assert run_identity(configs[0], {}) == run_identity(configs[1], {})


def test_plots_in_training_is_a_warning():
    argv = ["--mode", "train", "--algo", "d3qn", "--plots", "none"]
    cfg = config_from_args(build_parser().parse_args(argv))
    warnings = check_command_line(cfg, given_options(build_parser(), argv))
    assert any(w.startswith("--plots ignored") for w in warnings)


@pytest.mark.parametrize("mode", ["eval", "compare"])
def test_how_to_draw_figures_with_plots_none_is_a_warning(mode):
    """--plot_formats, --plot_span and --timeline_window shape figures that --plots none does not draw: said,
    not silently dropped."""
    argv = ["--mode", mode, "--plots", "none", "--plot_formats", "svg", "--plot_span", "full"]
    warnings = check_command_line(
        config_from_args(build_parser().parse_args(argv)), given_options(build_parser(), argv)
    )
    assert "--plot_formats, --plot_span ignored: --plots none draws no figures" in warnings
    drawn = ["--mode", mode, "--plot_formats", "svg"]
    cfg = config_from_args(build_parser().parse_args(drawn))
    assert not any("ignored" in w for w in check_command_line(cfg, given_options(build_parser(), drawn)))


@pytest.mark.parametrize(
    ("plots", "said"),
    [
        (["--plots", "none"], "--plot_formats ignored: --plots none draws no figures"),
        (
            [],
            "--plot_formats, --plot_span, --timeline_window ignored: a report draws its learning curves as PNG",
        ),
    ],
)
def test_a_reports_warning_about_figure_options_says_what_it_draws(plots, said):
    """A report draws its learning curves as PNG, or with --plots none nothing: the warning says which."""
    argv = ["--mode", "report", *plots, "--plot_formats", "svg"]
    warnings = check_command_line(
        config_from_args(build_parser().parse_args(argv)), given_options(build_parser(), argv)
    )
    assert [w for w in warnings if "ignored" in w] == [said]


def test_plots_takes_png_or_none(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*SMALL_EVAL, "--plots", "svg"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.startswith("error: argument --plots: invalid choice")
