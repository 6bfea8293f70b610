"""The learned power manager's task (GPUClusterPower-v0): energy cost under electricity prices plus a JCT cost.

An agent decides how many nodes of each GPU type are on while a heuristic scheduler runs the jobs; power states,
the power model and price curves are sim/power.py's and sim/prices.py's, so the energy is the one summary.csv
reports for the same run.
"""

from __future__ import annotations

from config import RunConfig
from env.node_env import RECHECK_S, NodeManagerEnv
from scenario.build import Scenario
from sim.cluster import FULL
from sim.power import OFF, ON, PowerModel
from sim.prices import J_PER_MWH, PriceCurve, synthetic_curve

JCT_WEIGHT_EUR_PER_JOB_H = 0.10
"""lambda: EUR per job-hour in the system (waiting or running). The default is about what one idle 8-GPU A100
node costs per hour with the default power model at the synthetic curve's mean price ((300 W + 8 x 50 W) x
PUE 1.58 = 1.11 kW x 90 EUR/MWh = EUR 0.0995/h), so keeping an idle node on for an hour breaks even with
saving one job-hour of JCT"""
PRICE_SCALE_EUR_PER_MWH = 250.0  # price features are price / this, clipped to [0, 1]
PRICE_LOOKAHEAD_H = (1, 3, 6)


class GPUClusterPowerEnv(NodeManagerEnv):
    """Decide which GPU nodes are powered while a heuristic schedules the jobs; pay for energy and for JCT.

    ## Description
    The cluster and workload come from `config` as for the scheduling task (any workload or cluster option).
    Every node starts ON; the power model (`power_model`, sim/power.py: GPU idle/full-load watts, node base
    power, PUE, boot and shutdown times) and the price curve (`prices`, sim/prices.py; default the synthetic
    diurnal curve) are the ones `--power` runs use. Jobs are started by `scheduler` (fcfs, sjf or easy; default
    easy) on the nodes that are ON. Action encoding, masks and decision points are NodeManagerEnv's.

    ## Action Space
    `Discrete(2T + 1)`: 2t boots one OFF node of type t, 2t + 1 shuts down one idle ON node of type t (a busy
    node cannot be turned off: masked), 2T keeps the current setting until the next decision point.

    ## Observation Space
    `Box(0, 1, (2T * 11 + 11,))`: per action slot `SLOT_FEATURES` (unit_cost = the node's facility kW at full
    load / 10), then the base context, then `price_now`, `price_1h`, `price_3h`, `price_6h` (EUR/MWh / 250 at
    now and 1, 3, 6 hours ahead) and `power_frac` (facility power now / all nodes at full load).

    ## Rewards
    Per step, in euros: -(energy cost + lambda x JCT cost) accrued over the simulated time the step covers:
    facility power (W) x the integral of the price curve / 3.6e9 J per MWh, plus
    `jct_weight_eur_per_job_h` (lambda, default `JCT_WEIGHT_EUR_PER_JOB_H` = EUR 0.10 per job-hour) x jobs in
    the system x hours. Power is constant between events and the price piecewise constant, so the integral is
    exact and the undiscounted return is exactly -(total energy cost) - lambda x sum(JCT) / 3600 over the
    episode. Energy counts over summary.csv's window, from the first arrival on, so a finished episode's
    energy cost is metrics/energy.py's `cost_eur` for the same run (tests/test_node_envs.py checks both that
    and an independent integration of the run's power log).

    ## Starting State
    Every node ON and idle; `options["scenario_seed"]` picks the scenario (else drawn from the reset seed).

    ## Episode End
    Terminates once every accepted job has completed (energy is counted up to that instant, the last
    completion, where summary.csv's window closes), or when jobs wait
    with nothing pending and no node can be turned on. Truncates after `max_steps` steps.

    ## Arguments
    `config` (RunConfig), `scenario` (a fixed Scenario to replay), `scheduler`, `power_model`, `prices`,
    `jct_weight_eur_per_job_h`, `recheck_s`, `max_steps`.
    """

    initial_power_state = ON
    task_context_features = ("price_now", "price_1h", "price_3h", "price_6h", "power_frac")

    def __init__(
        self,
        config: RunConfig | None = None,
        scenario: Scenario | None = None,
        scheduler: str = "easy",
        power_model: PowerModel | None = None,
        prices: PriceCurve | None = None,
        jct_weight_eur_per_job_h: float = JCT_WEIGHT_EUR_PER_JOB_H,
        recheck_s: float = RECHECK_S,
        max_steps: int | None = None,
    ):
        if not (isinstance(jct_weight_eur_per_job_h, (int, float)) and jct_weight_eur_per_job_h >= 0):
            raise ValueError(
                f"jct_weight_eur_per_job_h must be a number >= 0, got {jct_weight_eur_per_job_h!r}"
            )
        self.power_model = power_model or PowerModel()
        self.prices = prices or synthetic_curve()
        self.jct_weight_eur_per_job_h = float(jct_weight_eur_per_job_h)
        super().__init__(config, scenario, scheduler, recheck_s, max_steps)

    def _prepare(self, sc: Scenario) -> None:
        super()._prepare(sc)
        layout = sc.layout
        m = self.power_model
        gpu = [m.gpu(name) for name in layout.type_names]
        # IT watts of each node when powered but idle (ON, BOOTING, SHUTTING_DOWN) and OFF
        self._node_idle_w = [
            m.node_base_w + layout.node_num_gpus[n] * gpu[layout.node_type[n]].idle_w
            for n in range(layout.num_nodes)
        ]
        # extra IT watts per busy milli-GPU of each type (linear in the busy share)
        self._type_dyn_w_per_milli = [(g.max_w - g.idle_w) / FULL for g in gpu]
        self._type_full_kw = [
            m.pue * (m.node_base_w + max(layout.node_num_gpus[n] for n in nodes) * gpu[t].max_w) / 1000
            for t, nodes in enumerate(self._type_nodes)
        ]
        self._max_facility_w = m.pue * sum(
            m.node_base_w + layout.node_num_gpus[n] * gpu[layout.node_type[n]].max_w
            for n in range(layout.num_nodes)
        )
        self._busy_milli = [0] * self.num_types
        jobs = sc.workload.jobs
        self._energy_from_s = min(j.arrival_s for j in jobs) if jobs else 0.0
        self.energy_cost_eur = 0.0
        self.jct_cost_eur = 0.0

    def _schedule(self) -> None:
        before = set(self._running)
        super()._schedule()
        for i in self._running - before:
            p = self.sim.placements[i]
            self._busy_milli[p.type_idx] += p.milli * len(p.gpus)

    def _credit(self, completed: list[int]) -> float:
        for i in completed:
            p = self.sim.placements[i]
            self._busy_milli[p.type_idx] -= p.milli * len(p.gpus)
        return 0.0

    def facility_w(self) -> float:
        """Facility power now (IT power x PUE), W."""
        m = self.power_model
        it = 0.0
        for n, s in enumerate(self._state):
            it += m.off_w if s == OFF else self._node_idle_w[n]
        for t, milli in enumerate(self._busy_milli):
            it += milli * self._type_dyn_w_per_milli[t]
        return m.pue * it

    def _accrue(self, t0_s: float, t1_s: float) -> float:
        f = self.prices.price_integral
        a = max(t0_s, self._energy_from_s)  # summary.csv's window opens at the first arrival
        energy = self.facility_w() * (float(f(t1_s)) - float(f(a))) / J_PER_MWH if t1_s > a else 0.0
        jct = self.jct_weight_eur_per_job_h * self.sim.jobs_in_system * (t1_s - t0_s) / 3600
        self.energy_cost_eur += energy
        self.jct_cost_eur += jct
        return -(energy + jct)

    def _unit_cost(self, t: int) -> float:
        return self._type_full_kw[t]

    def _unit_cost_feature(self, t: int) -> float:
        return min(1.0, self._type_full_kw[t] / 10.0)

    def _task_context(self) -> list[float]:
        now = self.sim.now_s
        price = self.prices.price_at
        return [
            min(1.0, price(now) / PRICE_SCALE_EUR_PER_MWH),
            *(min(1.0, price(now + h * 3600) / PRICE_SCALE_EUR_PER_MWH) for h in PRICE_LOOKAHEAD_H),
            self.facility_w() / self._max_facility_w,
        ]
