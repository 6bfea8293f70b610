"""The generation loop every score-round learner shares (`--algo cem`, `--algo es`): candidates' objectives on
common training scenarios, simulated in worker processes; checkpoints, resume, stop signals, a time budget and
model selection on validation seeds. A learner (a `Method`) only says how it proposes candidates and updates its
search from their objectives.

The objective of a parameter vector: the mean over the generation's training scenarios of ln(its average JCT /
SJF's average JCT on that scenario) (lower is better; 0 = as good as SJF). Every candidate of a generation runs on
the same `scenarios` training scenarios (common random numbers: the generation's scenario seeds, from the run's
reserved training range, agents/run_control.py), drawn by `--train_mix` (scenario/mixtures.py), never the
evaluation seeds, compositions or later trace windows. The simulations of a generation run in `workers`
processes; the result does not depend on their number, and a run resumed from a checkpoint continues exactly as
the uninterrupted run would have.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from agents.checkpoint import (
    CHECKPOINT_FORMAT,
    INTERRUPTED_TAG,
    checkpoint_path,
    load_checkpoint,
    new_run_id,
    prune_periodic,
    save_checkpoint,
)
from agents.run_control import (
    CtrlC,
    TrainingInterrupted,
    TrainResult,
    remove_own_interrupted_checkpoint,
    training_episode_seed,
)
from agents.scorers import SCORES_ACTION, check_scorer_features, scorer_from_params
from config import MixConfig, RunConfig, UserError
from schedulers.score_features import FEATURE_NAMES, NUM_FEATURES

if TYPE_CHECKING:  # the training process only: a worker imports this module and needs no env or torch policy
    from agents.validation import BestKeeper


class Method(Protocol):
    """A search over the parameters of a scorer (agents/scorers.py, scorer_from_params)."""

    algo: str
    config: Any
    """its frozen config (CEMConfig, ESConfig): total_steps, scenarios, workers, minutes and its own settings"""

    def initial_search(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """The search's state before the first generation (named arrays, stored in the checkpoint's `search`)."""
        ...

    def propose(self, search: dict[str, np.ndarray], rng: np.random.Generator) -> np.ndarray:
        """This generation's candidates (rows); row 0 is the current model (its objective is the history's mean)."""
        ...

    def update(
        self, search: dict[str, np.ndarray], candidates: np.ndarray, objective: np.ndarray
    ) -> dict[str, np.ndarray]:
        """The next search state from the candidates' objectives (lower is better)."""
        ...

    def model(self, search: dict[str, np.ndarray]) -> np.ndarray:
        """The trained scorer's parameters in this state."""
        ...

    def scorer_entry(self, params: np.ndarray) -> dict[str, Any]:
        """The checkpoint's `scorer` entry for `params` (what agents/scorers.py, load_scorer, reads)."""
        ...


# ---- one simulation (here or in a worker process) ------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def _scenario(cfg: RunConfig, scenario_seed: int):
    """The training (or validation) scenario of `scenario_seed` (kept: every candidate of a generation runs on it)."""
    from scenario.mixtures import mixture_scenario

    return mixture_scenario(cfg, scenario_seed)


def avg_jct(cfg: RunConfig, scenario_seed: int, params: tuple[float, ...] | None) -> float:
    """Average JCT of the score rounds with cfg.algo's scorer of `params` (None: SJF) on the training scenario of
    `scenario_seed`."""
    from env.score_env import run_with_scorer
    from metrics.summary import summarize
    from schedulers import POLICIES

    sc = _scenario(cfg, scenario_seed)
    if params is None:
        sim = sc.simulator()
        sim.run(POLICIES["sjf"])
        result = sim.result("sjf", sc.seed)
    else:
        scorer = scorer_from_params(cfg, np.asarray(params, dtype=float))
        result = run_with_scorer(
            sc, scorer, round_s=cfg.policy.round_s, on_arrival=cfg.policy.round_on_arrival
        )
    return summarize(result).avg_jct_s


def log_ratios(jct: np.ndarray, sjf: np.ndarray) -> np.ndarray:
    """Objective per candidate: mean over scenarios of ln(jct / sjf) (jct: candidates x scenarios); a scenario
    where SJF finished nothing (no average) counts for no candidate."""
    usable = np.isfinite(sjf) & (sjf > 0)
    if not usable.any():
        return np.zeros(len(jct))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.log(jct[:, usable] / sjf[usable])
    return np.where(np.isfinite(ratios), ratios, np.inf).mean(axis=1)


class _Evaluator:
    """Runs (scenario seed, params) simulations in order, in this process or a spawned pool."""

    def __init__(self, cfg: RunConfig, workers: int):
        self.cfg, self.pool = cfg, None
        if workers > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            from interrupts import quiet_worker

            ctx = multiprocessing.get_context("spawn")
            self.pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=quiet_worker)

    def __call__(
        self, jobs: Sequence[tuple[int, tuple[float, ...] | None]], cfg: RunConfig | None = None
    ) -> list[float]:
        """avg_jct of each job under `cfg` (default: the run's)."""
        import agents.score_search as here  # looked up per call: tests replace avg_jct

        cfg = self.cfg if cfg is None else cfg
        if self.pool is None:
            return [here.avg_jct(cfg, seed, w) for seed, w in jobs]
        futures = [self.pool.submit(here.avg_jct, cfg, seed, w) for seed, w in jobs]
        return [f.result() for f in futures]

    def close(self, now: bool = False) -> None:
        if self.pool is None:
            return
        if now:  # a stop signal or a failed simulation: end the simulations under way
            for process in list((self.pool._processes or {}).values()):
                process.terminate()
        self.pool.shutdown(wait=True, cancel_futures=True)


# ---- checkpoints -------------------------------------------------------------------------------------------


def _record(
    cfg: RunConfig,
    method: Method,
    seed: int,
    state: dict[str, Any],
    total: int,
    run_id: str,
) -> dict[str, Any]:
    search = state["search"]
    return {
        "format": CHECKPOINT_FORMAT,
        "algo": cfg.algo,
        "config": dataclasses.asdict(method.config),
        "run_config": dataclasses.asdict(cfg),
        "obs_spec": {"window": None, "job_feature_dim": NUM_FEATURES, "context_dim": 0},
        "task": "scheduling",
        "action_space": {"type": SCORES_ACTION, "features": list(FEATURE_NAMES)},
        "seed": seed,
        "global_step": state["generation"],
        "episode": state["simulations"],
        "next_episode": state["generation"] * method.config.scenarios,
        "total_steps": total,
        "scorer": method.scorer_entry(method.model(search)),
        "search": {name: [float(x) for x in np.ravel(value)] for name, value in search.items()},
        "history": [list(map(float, h)) for h in state["history"]],
        "rng": {"numpy": state["rng"]},
        "run_id": run_id,
        "validation_history": [float(v) for v in state["validation_history"]],
    }


def check_budget(algo: str, c: Any) -> None:
    """UserError for a config's scenarios, minutes or workers out of range (named as the CLI's --<algo>_...)."""
    if c.scenarios < 1:
        raise UserError(f"--{algo}_scenarios must be >= 1 scenario per generation, got {c.scenarios}")
    if not (math.isfinite(c.minutes) and c.minutes >= 0):
        raise UserError(f"--{algo}_minutes must be >= 0 (0: no time limit), got {c.minutes}")
    if c.workers < 1:
        raise UserError(f"--{algo}_workers must be >= 1 process, got {c.workers}")


def resumed_state(path: str | Path, saved: dict[str, Any], method: Method) -> dict[str, Any]:
    """The loop's state that the scorer checkpoint `saved` (read from `path`) resumes: generation, simulations,
    search, history, validation history and generator state. A checkpoint of other score features, or whose state
    is missing, of another shape than `method`'s search or not finite, is a UserError naming the file (checked by
    cli/train.py before any work, so a damaged file is one error line, not a traceback)."""
    check_scorer_features(path, saved)
    shapes = {
        name: np.shape(value) for name, value in method.initial_search(np.random.default_rng(0)).items()
    }
    try:
        counts = [saved[key] for key in ("global_step", "episode")]
        if any(type(n) is not int or n < 0 for n in counts):
            raise ValueError(f"generation and simulation counts {counts} are not counts")
        search = {
            name: np.asarray(saved["search"][name], dtype=float).reshape(shape)
            for name, shape in shapes.items()
        }
        if not all(np.isfinite(value).all() for value in search.values()):
            raise ValueError("its search state holds NaN or infinite numbers")
        history = [tuple(float(x) for x in h) for h in saved["history"]]
        validation_history = [float(v) for v in saved.get("validation_history", ())]
        generator = np.random.default_rng(0)  # a state of another generator or shape raises ValueError here
        generator.bit_generator.state = saved["rng"]["numpy"]
    except (KeyError, TypeError, ValueError, IndexError) as err:
        shown = f"no {err}" if isinstance(err, KeyError) else str(err)
        raise UserError(
            f"{path}: not a resumable {method.algo} search ({type(err).__name__}: {shown[:160]}); resume from "
            "another checkpoint of the run, or start a fresh run"
        ) from None
    return dict(
        generation=counts[0],
        simulations=counts[1],
        search=search,
        history=history,
        validation_history=validation_history,
        rng=saved["rng"]["numpy"],
    )


def search_options(options: dict[str, Any]) -> dict[str, Any]:
    """The trainer's common keywords (cli/train.py) that train_search takes; the others (device, ...) concern the
    gradient learners."""
    names = ("total_steps", "models_dir", "run_dir", "resume", "checkpoint_every_episodes", "keep_checkpoints",
             "progress", "run_id", "eval_fn")  # fmt: skip
    return {k: v for k, v in options.items() if k in names}


def train_search(
    cfg: RunConfig,
    method: Method,
    seed: int,
    total_steps: int | None = None,
    models_dir: str = "models",
    run_dir: str = "logs/train",
    resume: str | None = None,
    checkpoint_every_episodes: int = 10,
    keep_checkpoints: int = 0,
    progress: bool = True,
    run_id: str | None = None,
    eval_fn: BestKeeper | None = None,
) -> TrainResult:
    """Run `method` for `total_steps` generations (counted across resumes; default its config's total_steps), or
    until the first generation that ends past config.minutes of this call (then the final model is the search
    there).

    Writes `<algo>_seed<S>_ep<G>.pt` every `checkpoint_every_episodes` generations, `<algo>_seed<S>_final.pt` at
    the end, and on a stop signal `<algo>_seed<S>_interrupted.pt` (the state after the last whole generation) before
    raising TrainingInterrupted. Checkpoint layout (agents/checkpoint.py's format, loadable with weights_only):
    format, algo, config (the method's), run_config, obs_spec {window None, job_feature_dim = the score features,
    context_dim 0}, task "scheduling", action_space {type "scores", features: the feature names in order}, seed,
    global_step (generations done), episode (training simulations run), next_episode, total_steps, scorer (the
    method's entry for its current model), search (the method's state, named flat lists), history (per generation:
    the current model's objective, the best candidate's, the median of the others), rng {numpy: the generator
    state}, run_id, validation_history (per generation: the new model's validation objective; [] without
    validation).

    Model selection (`eval_fn`, a BestKeeper with key "val_objective", given when cfg.validation_seeds is not
    empty): after each generation the new model runs on the validation scenarios (the configured scenario of each
    of cfg.validation_seeds, whatever --train_mix, as the slot learners' validation; the same every generation);
    its objective there is offered to the keeper, which
    keeps the best generation's checkpoint as `<algo>_seed<S>_best.pt` once the run completes. A generation counts
    only once its validation is done, so a resumed run selects as the uninterrupted one would.
    """
    run_start = time.perf_counter()
    # lazy: TensorBoard and tqdm load slowly, and only a training (not a worker, not a loaded scorer) needs them
    from torch.utils.tensorboard import SummaryWriter
    from tqdm import tqdm

    c = method.config
    rng = np.random.default_rng(seed)
    state: dict[str, Any] = {
        "generation": 0,
        "simulations": 0,
        "search": method.initial_search(rng),
        "history": [],
        "validation_history": [],
        "rng": rng.bit_generator.state,
    }
    if resume:
        saved = load_checkpoint(resume)
        run_id = saved.get("run_id") or run_id
        state.update(resumed_state(resume, saved, method))
        rng.bit_generator.state = state["rng"]
    run_id = run_id or new_run_id()
    total = c.total_steps if total_steps is None else total_steps
    writer = SummaryWriter(run_dir)
    written: list[str] = []

    def save(path: Path) -> None:
        save_checkpoint(path, _record(cfg, method, seed, state, total, run_id))
        written.append(str(path))

    evaluate = _Evaluator(cfg, c.workers)
    val_seeds = list(cfg.validation_seeds) if eval_fn is not None else []
    # validation scenarios are the configured scenario of each seed, as the slot learners' (agents/validation.py),
    # whatever the training mixture: fixed, apart from training, and what the report's learning curves compare
    val_cfg = dataclasses.replace(cfg, mix=MixConfig())
    val_sjf = np.zeros(0)
    setup_s = time.perf_counter() - run_start
    start_generation, start_time = state["generation"], time.perf_counter()
    bar = tqdm(
        total=total,
        initial=state["generation"],
        desc=cfg.algo,
        unit="gen",
        disable=not progress,
        dynamic_ncols=True,
    )
    failed = True
    with CtrlC("stopping after this generation to write a checkpoint") as ctrl_c:
        try:
            while state["generation"] < total and not ctrl_c.requested:
                g = state["generation"]
                if val_seeds and not len(val_sjf):  # SJF on the validation scenarios, once per call
                    val_sjf = np.asarray(evaluate([(s, None) for s in val_seeds], val_cfg), dtype=float)
                seeds = [training_episode_seed(seed, g * c.scenarios + j) for j in range(c.scenarios)]
                candidates = method.propose(state["search"], rng)
                jobs = [(s, None) for s in seeds] + [(s, tuple(w)) for w in candidates for s in seeds]
                values = np.asarray(evaluate(jobs), dtype=float)
                sjf = values[: len(seeds)]
                objective = log_ratios(values[len(seeds) :].reshape(len(candidates), len(seeds)), sjf)
                search = method.update(state["search"], candidates, objective)
                val = None
                if val_seeds:  # before the generation counts: a stop here drops it whole
                    model = tuple(method.model(search))
                    val_jct = np.asarray(evaluate([(s, model) for s in val_seeds], val_cfg), dtype=float)
                    val = float(log_ratios(val_jct[None, :], val_sjf)[0])
                state["search"] = search
                state["history"].append(
                    (float(objective[0]), float(objective.min()), float(np.median(objective[1:])))
                )
                state["generation"] = g + 1
                state["simulations"] += len(jobs)
                state["rng"] = rng.bit_generator.state
                for key, value in zip(("mean", "best", "median"), state["history"][-1], strict=True):
                    writer.add_scalar(f"objective/{key}", value, g + 1)
                if "std" in search:
                    writer.add_scalar("search/mean_std", float(search["std"].mean()), g + 1)
                if val is not None:
                    state["validation_history"].append(val)
                    writer.add_scalar("eval/val_objective", val, g + 1)
                    writer.add_scalar("eval/val_avg_jct_s", float(np.mean(val_jct)), g + 1)
                    eval_fn.offer(
                        val,
                        g + 1,
                        lambda: _record(cfg, method, seed, state, total, run_id),
                        val_avg_jct_s=float(np.mean(val_jct)),
                        validation_seeds=val_seeds,
                    )
                bar.update(1)
                bar.set_postfix(
                    mean_obj=f"{objective[0]:+.4f}", best=f"{objective.min():+.4f}", refresh=False
                )
                out_of_time = c.minutes > 0 and time.perf_counter() - run_start >= 60.0 * c.minutes
                if (g + 1) % checkpoint_every_episodes == 0 and g + 1 < total and not out_of_time:
                    save(checkpoint_path(models_dir, cfg.algo, seed, g + 1))
                    prune_periodic(models_dir, cfg.algo, seed, keep_checkpoints)
                if out_of_time:
                    break
            failed = False
        except KeyboardInterrupt:  # a second stop signal: the generation under way is dropped
            ctrl_c.requested = True
            failed = False
        finally:
            bar.close()
            evaluate.close(now=failed or ctrl_c.requested)
        if ctrl_c.requested and state["generation"] < total:
            interrupted = checkpoint_path(models_dir, cfg.algo, seed, INTERRUPTED_TAG)
            ctrl_c.saving(f"the checkpoint {interrupted}")
            save(interrupted)
            writer.close()
            raise TrainingInterrupted(str(interrupted), state["generation"], total, run_id, ctrl_c.signum)
        final = checkpoint_path(models_dir, cfg.algo, seed, None)
        ctrl_c.saving(f"the final checkpoint {final}")
        save(final)
    remove_own_interrupted_checkpoint(checkpoint_path(models_dir, cfg.algo, seed, INTERRUPTED_TAG), run_id)
    writer.close()
    wall_s = time.perf_counter() - run_start
    return TrainResult(
        algo=cfg.algo,
        seed=seed,
        global_step=state["generation"],
        episodes=state["simulations"],
        final_checkpoint=str(final),
        checkpoints=tuple(written),
        episode_returns=tuple(h[0] for h in state["history"][start_generation:]),
        wall_s=wall_s,
        steps_per_s=(state["generation"] - start_generation) / max(time.perf_counter() - start_time, 1e-9),
        run_dir=str(run_dir),
        run_id=run_id,
        setup_s=setup_s,
    )
