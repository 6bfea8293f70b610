"""The GPU autoscaling-under-budget task (GPUClusterAutoscale-v0): cloud prices, presets, reward and grader.

An agent rents cloud GPU nodes of each type (provision = turn on, with the boot time as provisioning delay;
release = turn off) while a heuristic scheduler runs the jobs of a workload on whatever is provisioned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from config import ClusterConfig, RunConfig, WorkloadConfig
from env.node_env import RECHECK_S, NodeManagerEnv
from scenario.build import Scenario
from sim.cluster import FULL
from sim.power import OFF, PowerModel
from sim.simulator import Simulator


@dataclass(frozen=True)
class CloudPrice:
    """On-demand price of one GPU of a type, from the per-instance list price / the instance's GPUs."""

    gpu_type: str
    usd_per_gpu_h: float
    source: str


# AWS EC2 On-Demand list prices, Linux, us-east-1, as published on aws.amazon.com/ec2/pricing/on-demand/
# (2024): instance $/h divided by its GPUs. P5 was repriced in June 2025; the 2024 list price is kept so the
# presets' figures stay comparable.
_CLOUD_PRICES = (
    CloudPrice("T4", 3.912 / 4, "g4dn.12xlarge, 4x T4, $3.912/h"),
    CloudPrice("A10", 5.672 / 4, "g5.12xlarge, 4x A10G, $5.672/h"),
    CloudPrice("V100-16GB", 24.48 / 8, "p3.16xlarge, 8x V100-16GB, $24.48/h"),
    CloudPrice("V100-32GB", 31.212 / 8, "p3dn.24xlarge, 8x V100-32GB, $31.212/h"),
    CloudPrice("A100-40GB", 32.7726 / 8, "p4d.24xlarge, 8x A100-40GB, $32.7726/h"),
    CloudPrice("A100-80GB", 40.9657 / 8, "p4de.24xlarge, 8x A100-80GB, $40.9657/h"),
    CloudPrice("H100", 98.32 / 8, "p5.48xlarge, 8x H100, $98.32/h (2024 list price)"),
)
CLOUD_PRICES: dict[str, CloudPrice] = {p.gpu_type: p for p in _CLOUD_PRICES}

PROVISION_S = 260.0
"""provisioning delay of a node (OFF -> ON): the server setup time measured by Gandhi et al., AutoScale, ACM
TOCS 30(4) 2012, Sec. 2 (the power model's boot_s default); cloud GPU instances take minutes as well"""
RELEASE_S = 0.0
"""a released node stops being billed at once (AWS bills per second until the stop request)"""


@dataclass(frozen=True)
class AutoscalePreset:
    """One difficulty of the autoscaling task. Money is in US dollars, times in seconds or hours as named."""

    cluster: str
    """the fleet that may be rented (cluster spec, sim/cluster_spec.py); every node starts released"""
    num_jobs: int
    load_factor: float
    """offered reference-GPU-seconds / (fleet GPUs x arrival window): sets the job rate"""
    horizon_h: float
    """the episode ends at this simulated time; jobs unfinished then earn nothing"""
    budget_usd_per_h: float
    """cap on the hourly on-demand price of all rented nodes: provisioning past it is masked"""
    synthetic_profile: str = "legacy"
    """the synthetic generator (config.WorkloadConfig): legacy arrivals span a few hours with runtimes of
    minutes to hours, so a horizon of half a day to a day sees every job (philly's heavy tails make some
    seeds' arrivals span weeks)"""
    value_usd_per_gpu_h: float = 8.0
    """value of one reference (A100) GPU-hour of completed work: above every type's on-demand price per unit
    of speed (T4 $4.89, A100-80GB $5.12, H100 $6.15, V100-32GB $7.80 per A100-hour of work), so busy nodes pay,
    idle ones lose money, and the types differ in margin"""
    sla_wait_s: float = 600.0
    """waiting up to this long after arrival is free"""
    sla_usd_per_gpu_h: float = 4.0
    """penalty per requested GPU-hour of waiting beyond sla_wait_s (about an A100's on-demand price: a job kept
    waiting costs its owner what renting for it would)"""


AUTOSCALE_PRESETS: dict[str, AutoscalePreset] = {
    "easy": AutoscalePreset(
        "2xA100-80GB:8,4xT4:4", num_jobs=60, load_factor=0.5, horizon_h=12.0, budget_usd_per_h=60.0
    ),
    "medium": AutoscalePreset(
        "2xH100:8,3xA100-80GB:8,4xV100-32GB:4,6xT4:4",
        num_jobs=150,
        load_factor=0.6,
        horizon_h=16.0,
        budget_usd_per_h=180.0,
    ),
    "hard": AutoscalePreset(
        "4xH100:8,6xA100-80GB:8,8xV100-32GB:8,8xT4:4,4xA10:4",
        num_jobs=400,
        load_factor=0.8,
        horizon_h=24.0,
        budget_usd_per_h=450.0,
    ),
}


def autoscale_config(preset: AutoscalePreset, base: RunConfig | None = None) -> RunConfig:
    """The RunConfig whose scenarios are the preset's workloads on its fleet (synthetic jobs)."""
    base = base or RunConfig()
    return replace(
        base,
        cluster=replace(base.cluster if base else ClusterConfig(), spec=preset.cluster),
        workload=replace(
            base.workload if base else WorkloadConfig(),
            workload_type="synthetic",
            num_jobs=preset.num_jobs,
            load_factor=preset.load_factor,
            synthetic_profile=preset.synthetic_profile,
        ),
    )


def node_price_usd_per_h(gpu_type: str, num_gpus: int) -> float:
    if gpu_type not in CLOUD_PRICES:
        raise ValueError(f"no cloud price for GPU type {gpu_type!r}; priced types: {', '.join(CLOUD_PRICES)}")
    return CLOUD_PRICES[gpu_type].usd_per_gpu_h * num_gpus


@dataclass(frozen=True)
class AutoscaleOutcome:
    """A finished autoscaling episode's objective and its grading anchors (US dollars)."""

    episode_return_usd: float
    """value of completed work - rental cost - SLA penalty over [0, horizon]"""
    trivial_return_usd: float
    """rent nothing: no value, no cost, every job waits until the horizon (score 0)"""
    bound_return_usd: float
    """an upper bound on any policy's return (score 1): sum over jobs of the best margin value - cost any
    accepted type could give it, if it can finish by the horizon at all; no idle time, no waiting"""


def grade(result: AutoscaleOutcome) -> float:
    """Score in [0, 1]: (return - trivial) / (bound - trivial), clipped; non-decreasing in the return.

    0 = no better than renting nothing; 1 = the upper bound (unreachable in practice: it assumes every job
    runs on its most profitable type from its arrival, with no boot wait and no idle node)."""
    span = result.bound_return_usd - result.trivial_return_usd
    gain = result.episode_return_usd - result.trivial_return_usd
    if not math.isfinite(result.episode_return_usd):
        return 0.0
    if abs(gain) <= 1e-9 * max(1.0, abs(result.trivial_return_usd)):
        gain = (
            0.0  # the trivial policy's own return, summed step by step, differs from the closed form by ulps
        )
    if span <= 0:
        return 1.0 if gain >= 0 else 0.0
    return float(min(1.0, max(0.0, gain / span)))


class GPUClusterAutoscaleEnv(NodeManagerEnv):
    """Rent GPU nodes of each type to serve a workload under an hourly budget.

    ## Description
    The fleet of the preset's cluster may be rented; every node starts released (OFF). Provisioning a node
    takes `PROVISION_S` (BOOTING), releasing is immediate. Jobs arrive as the synthetic workload of the preset
    and are started by `scheduler` (default easy) on the rented nodes. Everything else (action encoding,
    masks, decision points) is NodeManagerEnv's; see its docstring.

    ## Action Space
    `Discrete(2T + 1)`: 2t provisions one node of type t, 2t + 1 releases an idle one, 2T keeps. Provisioning
    is masked when the fleet's hourly price would exceed `budget_usd_per_h`.

    ## Observation Space
    `Box(0, 1, (2T * 11 + 8,))`: per action slot `SLOT_FEATURES` (unit_cost = node $/h / 100), then the
    base context and `time_left` (1 - now / horizon) and `spend_rate` (rented $/h / budget).

    ## Rewards
    In US dollars, per step: + value_usd_per_gpu_h x reference GPU-hours (runtime on an A100 x GPUs x share) of
    each job completed in the step, - the hourly price of every node not OFF (BOOTING and ON are billed) x
    the time, - sla_usd_per_gpu_h x requested GPUs x each queued job's waiting time beyond sla_wait_s in the
    step. The undiscounted return is exactly value of completed work - rental cost - SLA penalty over the
    episode (tests/test_autoscale_env.py); `outcome()` gives it with the grader's anchors.

    ## Starting State
    Every node OFF; `options["scenario_seed"]` picks the workload (else drawn from the reset seed).

    ## Episode End
    Terminates at the horizon, or earlier once every job has completed. Truncates after `max_steps` steps.

    ## Arguments
    `preset` (easy | medium | hard or an AutoscalePreset), `scheduler`, `recheck_s`, `max_steps`,
    `scenario` (a fixed Scenario for evaluation), `config` (a base RunConfig for the synthetic profile etc.).
    """

    initial_power_state = OFF
    task_context_features = ("time_left", "spend_rate")

    def __init__(
        self,
        preset: str | AutoscalePreset = "easy",
        scheduler: str = "easy",
        recheck_s: float = RECHECK_S,
        max_steps: int | None = None,
        scenario: Scenario | None = None,
        config: RunConfig | None = None,
    ):
        if isinstance(preset, str):
            if preset not in AUTOSCALE_PRESETS:
                raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(AUTOSCALE_PRESETS)}")
            preset = AUTOSCALE_PRESETS[preset]
        self.preset = preset
        self.power_model = PowerModel(boot_s=PROVISION_S, shutdown_s=RELEASE_S)
        super().__init__(autoscale_config(preset, config), scenario, scheduler, recheck_s, max_steps)

    def _prepare(self, sc: Scenario) -> None:
        super()._prepare(sc)
        layout = sc.layout
        self._node_price_per_s = [
            node_price_usd_per_h(layout.type_names[layout.node_type[n]], layout.node_num_gpus[n]) / 3600
            for n in range(layout.num_nodes)
        ]
        self._type_node_price_h = [
            node_price_usd_per_h(name, max(layout.node_num_gpus[n] for n in self._type_nodes[t]))
            for t, name in enumerate(layout.type_names)
        ]
        jt = self.sim.jobs
        p = self.preset
        self._gpus = [k * m / FULL for k, m in zip(jt.num_gpus, jt.milli, strict=True)]
        self._value = [
            p.value_usd_per_gpu_h * g * r / 3600 for g, r in zip(self._gpus, jt.runtime_s, strict=True)
        ]
        self._sla_from_s = [a + p.sla_wait_s for a in jt.arrival_s]
        self._rate_usd_per_s = 0.0  # rental price of the nodes not OFF, kept up to date in _accrue

    def _unit_cost(self, t: int) -> float:
        return self._type_node_price_h[t]

    def _unit_cost_feature(self, t: int) -> float:
        return min(1.0, self._type_node_price_h[t] / 100.0)

    def _rental_usd_per_s(self) -> float:
        price = self._node_price_per_s
        return sum(price[n] for n, s in enumerate(self._state) if s != OFF)

    def _can_power_on(self, t: int) -> bool:
        return (
            self._rental_usd_per_s() * 3600 + self._type_node_price_h[t]
        ) <= self.preset.budget_usd_per_h + 1e-9

    def _horizon_s(self) -> float:
        return self.preset.horizon_h * 3600

    def _accrue(self, t0_s: float, t1_s: float) -> float:
        cost = self._rental_usd_per_s() * (t1_s - t0_s)
        penalty_gpu_s = 0.0
        sla_from, gpus = self._sla_from_s, self._gpus
        for i in self.sim.queue:
            late = t1_s - max(t0_s, sla_from[i])
            if late > 0:
                penalty_gpu_s += gpus[i] * late
        return -cost - self.preset.sla_usd_per_gpu_h * penalty_gpu_s / 3600

    def _credit(self, completed: list[int]) -> float:
        value = self._value
        return sum(value[i] for i in completed)

    def _task_context(self) -> list[float]:
        return [
            max(0.0, 1.0 - self.sim.now_s / self._horizon_s()),
            min(1.0, self._rental_usd_per_s() * 3600 / self.preset.budget_usd_per_h),
        ]

    # -- grading ------------------------------------------------------------------------------------------

    def outcome(self) -> AutoscaleOutcome:
        """The episode's return with the grader's anchors (call once the episode is over)."""
        if self.sim is None:
            raise RuntimeError("outcome() before reset()")
        return AutoscaleOutcome(self.episode_return, *grading_anchors(self.scenario, self.preset))


def grading_anchors(sc: Scenario, preset: AutoscalePreset) -> tuple[float, float]:
    """(trivial return, upper-bound return) of the preset's task on scenario `sc`, in closed form.

    Trivial (rent nothing): every job that arrives before the horizon waits until it, so its penalty is
    sla_usd_per_gpu_h x GPUs x max(0, horizon - arrival - sla_wait_s) / 3600. Bound: a job can complete at the
    earliest at max(arrival, PROVISION_S) + runtime / speed on an accepted type; among the types on which it
    would finish by the horizon, its best margin is value - price per GPU-hour x GPUs x hours; the bound sums
    the positive best margins (rejected jobs and jobs that cannot finish count 0). Multi-node slowdown, packing
    and queueing only lower a real policy's return, so no policy exceeds the bound.
    """
    horizon = preset.horizon_h * 3600
    layout = sc.layout
    sim = Simulator(sc.workload, layout, sc.known_runtime_s, sc.multi_node_runtime_factor)
    jt = sim.jobs
    trivial = 0.0
    bound = 0.0
    for i, job in enumerate(jt.jobs):
        if sim.reject_reason[i] or job.arrival_s >= horizon:
            continue
        gpus = jt.num_gpus[i] * jt.milli[i] / FULL
        trivial -= (
            preset.sla_usd_per_gpu_h * gpus * max(0.0, horizon - job.arrival_s - preset.sla_wait_s) / 3600
        )
        value = preset.value_usd_per_gpu_h * gpus * jt.runtime_s[i] / 3600
        best = 0.0
        for t in jt.elig[i].types:
            speed = layout.type_speed[t]
            hours = jt.runtime_s[i] / speed / 3600
            if max(job.arrival_s, PROVISION_S) + hours * 3600 > horizon:
                continue
            margin = value - CLOUD_PRICES[layout.type_names[t]].usd_per_gpu_h * gpus * hours
            best = max(best, margin)
        bound += best
    return float(trivial), float(bound)


def episode_seeds(first: int, count: int) -> np.ndarray:
    """Scenario seeds `first .. first + count - 1` (held-out evaluation uses 100-109 as the docs do)."""
    return np.arange(first, first + count)
