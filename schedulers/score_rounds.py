"""Score rounds: a preemptive round mechanism driven by a score s(i, t) per active job i and GPU type t, from a
pluggable scorer (features -> scores, schedulers/score_features.py); with fixed hand-set weights it is the
`las_speed` heuristic.

Rule (docs/schedulers.md, Score rounds). Rounds start at multiples of `round_s` (default 360 s, Gavel's) from
t = 0; the policy asks for a WakeUp at the next boundary while any job is active.
- At a round boundary every active job (waiting or running) gets one row per GPU type it can use; the scorer
  scores the rows. Rows are walked in descending score (ties: a job's row for the type it runs on now first, then
  the lower job index, then the lower type index, i.e. the faster type). A row (i, t) is taken if job i has no
  row taken yet and type t still has room for it: each type's room starts at its GPUs x 1000 thousandths and a
  taken row uses GPUs x share of it (a gang takes all its GPUs or nothing; a row that does not fit is skipped and
  smaller ones after it may still fit). A running job whose restore is not over yet (a restart less than the
  restore overhead ago) is taken for its type before the walk: preempted again before doing any work, a job
  whose restore outlasts a round would never progress.
- Realisation: a running job taken for the type it runs on keeps its GPUs. Running jobs not taken, or taken for
  another type (a migration), are released; the jobs taken for a type they do not run on then start, in the
  walk's order, on sim/placement.py's placement restricted to that type (one that does not fit there, e.g. a
  gang on fragmented nodes, waits). A released job whose GPUs are still free afterwards keeps them after all
  (never preempted for nothing; released jobs in job-index order); the others are preempted (sim's Preempt:
  progress kept, restore overhead paid at the next start).
- Fill (work conservation): the jobs still waiting (preempted ones included) then start in the order of their
  best row wherever they fit now, on their placement-rule placement (any acceptable type).
- Rounds at arrivals (`on_arrival`, --round_on_arrival yes; off by default): an instant at which a job arrives
  and waits is a round too, walked and realised exactly as at a boundary (the boundaries stay at multiples of
  `round_s`), so a job that outranks a running one preempts it at once, as SRTF does, instead of at the next
  boundary.
- Otherwise between boundaries (a completion, or an arrival without `on_arrival`, while jobs wait) nothing is
  preempted: the waiting jobs that fit
  now start, filled as above; only their rows are scored, and not even those when a single job fits (no score can
  change its start).
The scorer is consulted exactly when rows are scored (`consult` says when), so a Gymnasium env can ask an agent
for the scores instead (env/score_env.py): `policy(view) = decide(view, c, scorer(c.rows.features))` with
`c = consult(view, round_s)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from schedulers.score_features import FEATURE_NAMES, NUM_FEATURES, Rows, active_rows, static_of, waiting_rows
from sim.cluster import FULL
from sim.placement import place
from sim.simulator import Decision, Preempt, View, WakeUp

ROUND_S = 360.0
"""round length (s): Gavel's default round (schedulers/gavel.py)"""

Scorer = Callable[[np.ndarray], np.ndarray]
"""features (rows x NUM_FEATURES, float64) -> one finite score per row (higher = taken first)"""

_tuple_new = tuple.__new__  # Decision(...) without the NamedTuple constructor's extra call


class LinearScorer:
    """s = features . weights, one weight per feature (`feature_names()` order).

    Evaluated column by column (elementwise), so a row's score does not depend on which other rows are scored
    with it: the same row scores identically in a round, in a fill and padded in the env's observation."""

    def __init__(self, weights: Sequence[float] | np.ndarray):
        w = np.asarray(weights, dtype=float)
        if w.shape != (NUM_FEATURES,):
            raise ValueError(
                f"a LinearScorer needs {NUM_FEATURES} weights ({', '.join(FEATURE_NAMES)}), got shape {w.shape}"
            )
        if not np.isfinite(w).all():
            raise ValueError(f"LinearScorer weights must be finite, got {w.tolist()}")
        self.weights = w
        self._terms = [(c, float(w[c])) for c in range(NUM_FEATURES) if w[c] != 0.0]

    @classmethod
    def from_named(cls, named: Mapping[str, float]) -> LinearScorer:
        """From {feature name: weight}; features not named weigh 0. An unknown name is a ValueError."""
        unknown = sorted(set(named) - set(FEATURE_NAMES))
        if unknown:
            raise ValueError(f"unknown feature(s) {', '.join(unknown)}; known: {', '.join(FEATURE_NAMES)}")
        return cls([float(named.get(name, 0.0)) for name in FEATURE_NAMES])

    def named(self) -> dict[str, float]:
        """{feature name: weight} of the nonzero weights."""
        return {FEATURE_NAMES[c]: w for c, w in self._terms}

    def __call__(self, features: np.ndarray) -> np.ndarray:
        out = np.zeros(len(features))
        for c, w in self._terms:
            out += features[:, c] * w
        return out

    def __repr__(self) -> str:
        return f"LinearScorer({self.named()})"


LAS_SPEED_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {
        "log_attained_gpu": -1.0,
        "log_rel_speed": 2.0,
        "runs_here": 0.5,
        "log_est_remaining": -0.25,
        "log_time_in_system": 0.2,
    }
)
"""las_speed's hand-set weights: least attained service first (GPU-seconds, on a log scale) and faster types
preferred (a job on a type of half its best speed ranks as if it had 4x the service), a little stickiness (a
running job keeps its type against a rival with up to 1.65x less service), a little of the remaining estimate
and of the time in system; chosen by a few small comparisons on training seeds (docs/schedulers.md)"""


class Consult(NamedTuple):
    """What the mechanism needs at one decision instant (`consult`)."""

    at_round: bool
    """True at a round boundary (walk, preemption, fill); False between boundaries (fill only)"""
    rows: Rows | None
    """the rows to score; None when no decision depends on scores"""
    fill_jobs: tuple[int, ...]
    """between boundaries: the waiting jobs that fit now (ascending); their rows are scored if there are >= 2"""
    next_round_s: float
    """the next boundary (the WakeUp the decisions end with while jobs are active)"""
    active: bool
    """some job waits or runs"""
    only_start: Decision | None = None
    """between boundaries, when exactly one waiting job fits: its start (no score can change it)"""


def consult(view: View, round_s: float = ROUND_S, on_arrival: bool = False) -> Consult:
    """Which rows the scorer must score now (see the module's rule); `on_arrival`: an instant at which a job
    arrived (and waits) is a round too."""
    now = view.now_s
    k = math.floor(now / round_s)
    at_round = k * round_s == now
    nxt = (k + 1) * round_s
    queue = view.queue
    if not (queue or view.running):
        return _tuple_new(Consult, (at_round, None, (), nxt, False, None))
    if on_arrival and not at_round and queue and view.jobs.arrival_s[next(reversed(queue))] == now:
        at_round = True  # the queue is in job-index (arrival) order: its last job is the latest arrival
    if at_round:
        return _tuple_new(Consult, (True, active_rows(view), (), nxt, True, None))
    free = view.free
    if free.free_milli_total <= 0:
        return _tuple_new(Consult, (False, None, (), nxt, True, None))
    shape = view.jobs.shape
    fits: dict[int, object] = {}
    fill = []
    for i in view.queue:
        s = shape[i]
        p = fits.get(id(s), fits)
        if p is fits:
            p = fits[id(s)] = place(free, *s)
        if p is not None:
            fill.append(i)
    if len(fill) == 1:
        i = fill[0]
        return _tuple_new(
            Consult, (False, None, (i,), nxt, True, _tuple_new(Decision, (i, fits[id(shape[i])])))
        )
    return _tuple_new(
        Consult, (False, waiting_rows(view, fill) if fill else None, tuple(fill), nxt, True, None)
    )


def decide(view: View, c: Consult, scores: np.ndarray | None) -> list:
    """The decisions (Preempt, Decision, then a WakeUp while jobs are active) for consult `c` given the scores of
    its rows (ignored when it has none). Scores must be finite, one per row (ValueError)."""
    wake = [_tuple_new(WakeUp, (c.next_round_s,))] if c.active else []
    rows = c.rows
    if rows is None:
        if c.only_start is not None:  # one job fits: it starts on its placement, whatever the scores
            wake.insert(0, c.only_start)
        return wake
    s = np.asarray(scores, dtype=float)
    if s.shape != (len(rows),):
        raise ValueError(f"expected {len(rows)} scores (one per row), got shape {s.shape}")
    if not np.isfinite(s).all():
        raise ValueError("scores must be finite (no NaN or infinity)")
    order = np.lexsort((rows.type_idx, rows.job, ~rows.runs_here, -s))
    if c.at_round:
        decisions = _round(view, rows, order)
    else:
        decisions = _fill(view, _jobs_in_order(rows, order), view.free.copy(), set(c.fill_jobs))
    decisions += wake
    return decisions


def _jobs_in_order(rows: Rows, order: np.ndarray) -> list[int]:
    """Each job once, in the order of its best row (its first in `order`)."""
    jobs = rows.job[order]
    _, first = np.unique(jobs, return_index=True)
    return jobs[np.sort(first)].tolist()


def _round(view: View, rows: Rows, order: np.ndarray) -> list:
    """The walk, its realisation and the fill at a round boundary."""
    jobs = rows.job.tolist()
    types = rows.type_idx.tolist()
    need = rows.demand_milli.tolist()
    here = rows.runs_here.tolist()
    left = [g * FULL for g in view.layout.type_num_gpus]
    smallest = min(need)
    running = view.running
    queue = view.queue
    num_jobs = len(queue) + len(running)  # every active job has rows at a boundary
    # running jobs still restoring keep their GPUs first: preempted again before doing any work, a job whose
    # restore outlasts a round would never progress
    locked = np.flatnonzero(rows.restoring).tolist() if rows.restoring.any() else []
    chosen: dict[int, int] = {jobs[r]: types[r] for r in locked}  # job -> type, in the walk's order
    kept: set[int] = set(chosen)  # running jobs taken for the type they run on
    for r in locked:
        left[types[r]] -= need[r]
    open_types = sum(1 for x in left if x >= smallest)
    starts: list[tuple[int, int]] = []  # the other rows taken, in the walk's order
    for r in order.tolist():
        j = jobs[r]
        if j in chosen:
            continue
        t = types[r]
        room = left[t] - need[r]
        if room >= 0:
            chosen[j] = t
            left[t] = room
            if here[r]:
                kept.add(j)
            else:
                starts.append((j, t))
            if len(chosen) == num_jobs:
                break
            if room < smallest:
                open_types -= 1
                if not open_types:
                    break
    if not queue and not starts and len(kept) == len(running):
        return []  # every running job keeps its GPUs and nobody waits
    placements = view.placements
    released = sorted(j for _, j in running if j not in kept) if len(kept) < len(running) else []
    st = static_of(view)
    trial = view.free.copy()
    for j in released:
        trial.give(placements[j])
    started: list = []
    done: set[int] = set()
    for j, t in starts:
        p = place(trial, *st.restricted_shape(j, t))
        if p is not None:
            trial.take(p)
            started.append(_tuple_new(Decision, (j, p)))
            done.add(j)
    preempted = []
    for j in released:
        p = placements[j]
        if j not in done and trial.fits(p):
            trial.take(p)  # its GPUs were not needed: it keeps them
        else:
            preempted.append(Preempt(j))
    candidates = {j for j in queue if j not in done}
    candidates.update(d.job for d in preempted if d.job not in done)
    decisions = preempted + started
    if candidates and trial.free_milli_total > 0:
        decisions += _fill(view, _jobs_in_order(rows, order), trial, candidates)
    return decisions


def _fill(view: View, ranked: list[int], trial, candidates: set[int]) -> list:
    """Start the `candidates` in `ranked` order on their placement (any acceptable type) where they fit on
    `trial` (changed in place)."""
    shape = view.jobs.shape
    out: list = []
    no_fit: set[int] = set()  # shapes that did not fit (room only shrinks during a fill)
    for j in ranked:
        if j not in candidates:
            continue
        s = shape[j]
        if id(s) in no_fit:
            continue
        p = place(trial, *s)
        if p is None:
            no_fit.add(id(s))
            continue
        trial.take(p)
        out.append(_tuple_new(Decision, (j, p)))
        candidates.discard(j)
        if not candidates or trial.free_milli_total <= 0:
            break
    return out


def make_score_policy(
    scorer: Scorer, round_s: float = ROUND_S, preempt: bool = True, on_arrival: bool = False
) -> Callable[[View], list]:
    """The score-round policy of `scorer` with rounds of `round_s` seconds. `preempt=False` (the non-preemptive
    ablation, `--score_preempt no`): no rounds at all; at every arrival and completion the waiting jobs that fit
    start in the order of their best row, as between boundaries, and nothing is ever preempted."""
    if not (math.isfinite(round_s) and round_s > 0):
        raise ValueError(f"round_s must be a finite number of seconds > 0, got {round_s}")

    def score_rounds(view: View) -> list:
        c = consult(view, round_s, on_arrival)
        return decide(view, c, None if c.rows is None else scorer(c.rows.features))

    def score_fill(view: View) -> list:
        # Between two events nothing that fits can appear (every fitting job started at the last one): no
        # wake-ups, and never a boundary's walk
        c = consult(view, math.inf)
        if c.rows is None:
            return [c.only_start] if c.only_start is not None else []
        return [d for d in decide(view, c, scorer(c.rows.features)) if type(d) is not WakeUp]

    return score_rounds if preempt else score_fill


las_speed = make_score_policy(LinearScorer.from_named(LAS_SPEED_WEIGHTS))
