"""MaskablePPO (sb3-contrib) behind the project's training contract: our checkpoint files, validation, Ctrl-C, resume.

sb3-contrib runs the PPO loop; this module supplies what the D3QN/SAC trainer supplies for them: the training
scenarios of each vectorized env (`EpisodeStream`), a per-slot scoring actor (`SlotPolicy`, the same `SlotScorer`
D3QN and SAC use), checkpoints in agents/checkpoint.py's layout (`algo: "ppo"`), validation of each checkpoint,
Ctrl-C (`_interrupted.pt`) and `--resume`.

Discounting is by simulated time, as for D3QN and SAC: a step that took dt seconds (info["elapsed_s"]) is
discounted by gamma^(dt / discount_tau_s) in GAE (`time_discounted_gae`, run by `_rollout_buffer_class`'s buffer,
which the training callback fills with each step's discount); discount_tau_s = 0 is SB3's per-step GAE. Rewards
are divided by a running std of that discounted return (`RewardScaler`) so the value loss stays near 1.

Random numbers: SB3 draws actions from torch's global generator and shuffles minibatches with numpy's global one.
Both are seeded from the run's seed inside `_isolated_global_rngs`, which restores the caller's global states
afterwards (nothing outside the run sees them change), and their states are stored in every checkpoint, so a run
is deterministic for a seed and a resume continues the same streams.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from agents.checkpoint import (
    CHECKPOINT_FORMAT,
    INTERRUPTED_TAG,
    checkpoint_path,
    env_record,
    load_checkpoint,
    new_run_id,
    prune_periodic,
    save_checkpoint,
)
from agents.networks import ObsSpec
from agents.policy import AgentPolicy
from agents.ppo_policy import policy_class
from config import PPOConfig, UserError, a_or_an
from interrupts import ignore_stop_signals

VEC_ENVS = ("dummy", "subproc")


class EpisodeStream(gym.Env):
    """Slot `slot` of `num_slots` vectorized envs: every reset starts the next training scenario of this slot's
    own sequence, episodes slot, slot + num_slots, slot + 2 num_slots, ... of the run (scenario seed
    `training_episode_seed(seed, index)`), whatever seed the vector env passes. `next_index` is the index its next
    reset plays; a resume starts each slot at the index it had reached (an episode already begun is skipped).
    `make_env(scenario_seed)` builds the episode's env (GPUClusterEnv, or one replaying a training-mix scenario)."""

    metadata = {"render_modes": []}

    def __init__(
        self, make_env: Callable[[int], gym.Env], seed: int, slot: int, num_slots: int, next_index: int
    ):
        from agents.run_control import training_episode_seed

        self._seed_of = lambda index: training_episode_seed(seed, index)
        self.make_env, self.slot, self.num_slots, self.next_index = make_env, slot, num_slots, next_index
        self._env: gym.Env | None = make_env(self._seed_of(next_index))
        self._fresh = True  # the env built above has not been reset yet
        self.observation_space = self._env.observation_space
        self.action_space = self._env.action_space
        self.obs_spec = ObsSpec.from_env(self._env)
        self._return = 0.0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        scenario_seed = self._seed_of(self.next_index)
        if not self._fresh:
            self._env.close()
            self._env = self.make_env(scenario_seed)
        self._fresh = False
        self.next_index += self.num_slots
        self._return = 0.0
        return self._env.reset(seed=scenario_seed, options={"scenario_seed": scenario_seed})

    def step(self, action):
        obs, reward, terminated, truncated, info = self._env.step(action)
        self._return += float(reward)
        if terminated or truncated:
            info = dict(info, episode_return=self._return)
        return obs, reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        return self._env.unwrapped.action_masks()

    def close(self) -> None:
        if self._env is not None:
            self._env.close()


def step_discounts(elapsed_s: list[float | None], gamma: float, discount_tau_s: float) -> np.ndarray:
    """Each env's discount for the step just taken: gamma^(elapsed_s / discount_tau_s), or gamma per step when
    discount_tau_s is 0 (then elapsed_s is not needed). float64, one per env."""
    if discount_tau_s == 0:
        return np.full(len(elapsed_s), gamma, dtype=np.float64)
    for dt in elapsed_s:
        if dt is None or not dt >= 0:
            raise ValueError(
                f"time-based discounting (discount_tau_s={discount_tau_s}) needs each step's elapsed simulated "
                f"seconds (info['elapsed_s'] >= 0), got {dt!r}"
            )
    return gamma ** (np.asarray(elapsed_s, dtype=np.float64) / discount_tau_s)


def time_discounted_gae(
    rewards_TN: np.ndarray,
    values_TN: np.ndarray,
    discounts_TN: np.ndarray,
    episode_starts_TN: np.ndarray,
    last_values_N: np.ndarray,
    dones_N: np.ndarray,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """(advantages_TN, returns_TN) of a rollout of T steps in N envs: GAE with a discount per step.

    delta_t = r_t + d_t V(s_t+1) (1 - done_t) - V(s_t) and A_t = delta_t + d_t lambda (1 - done_t) A_t+1, where d_t
    is step t's discount (gamma^(elapsed_s / tau) for time-based discounting) and lambda applies once per step;
    returns = A + V (the TD(lambda) return). With every d_t = gamma this is SB3's
    RolloutBuffer.compute_returns_and_advantage operation for operation, in float32 as SB3 (tested equal).
    """
    advantages_TN = np.zeros_like(rewards_TN, dtype=np.float32)
    discount_TN = discounts_TN.astype(np.float32)
    trace_TN = (discounts_TN * gae_lambda).astype(np.float32)
    last_gae_N = np.zeros(rewards_TN.shape[1], dtype=np.float32)
    for t in reversed(range(rewards_TN.shape[0])):
        if t == rewards_TN.shape[0] - 1:
            next_non_terminal_N = 1.0 - dones_N.astype(np.float32)
            next_values_N = last_values_N
        else:
            next_non_terminal_N = 1.0 - episode_starts_TN[t + 1]
            next_values_N = values_TN[t + 1]
        delta_N = rewards_TN[t] + discount_TN[t] * next_values_N * next_non_terminal_N - values_TN[t]
        last_gae_N = delta_N + trace_TN[t] * next_non_terminal_N * last_gae_N
        advantages_TN[t] = last_gae_N
    return advantages_TN, advantages_TN + values_TN


def _rollout_buffer_class():
    """TimeDiscountedRolloutBuffer, defined on first use (imports sb3-contrib)."""
    global _BUFFER
    if _BUFFER is not None:
        return _BUFFER
    from sb3_contrib.common.maskable.buffers import MaskableRolloutBuffer

    class TimeDiscountedRolloutBuffer(MaskableRolloutBuffer):
        """MaskableRolloutBuffer with each step's discount (`discounts[pos]`, written by the training callback
        before SB3 adds the step; gamma where nothing was written) and GAE by `time_discounted_gae`."""

        def reset(self) -> None:
            self.discounts = np.full((self.buffer_size, self.n_envs), self.gamma, dtype=np.float64)
            super().reset()

        def compute_returns_and_advantage(self, last_values: torch.Tensor, dones: np.ndarray) -> None:
            self.advantages, self.returns = time_discounted_gae(
                self.rewards,
                self.values,
                self.discounts,
                self.episode_starts,
                last_values.clone().cpu().numpy().flatten(),
                dones,
                self.gae_lambda,
            )

    _BUFFER = TimeDiscountedRolloutBuffer
    return TimeDiscountedRolloutBuffer


_BUFFER = None


def ppo_config_from_dict(config: Mapping[str, Any]) -> PPOConfig:
    """The PPOConfig a checkpoint stores; one written before PPO's time-based discounting (no `discount_tau_s`) discounted
    per env step and used raw rewards, so it gets discount_tau_s = 0, normalize_reward = False and keeps its gamma."""
    return PPOConfig(**(LEGACY_PPO_FIELDS | dict(config)))


LEGACY_PPO_FIELDS = {"discount_tau_s": 0.0, "normalize_reward": False}
"""PPOConfig fields a checkpoint from before time-based discounting lacks, with the values that run used"""


class RewardScaler:
    """Divides rewards by the running standard deviation of each env's time-discounted return
    G <- d_prev G + r (reset at every episode's end), as SB3's VecNormalize does with a per-step gamma (same
    running-moments update, epsilon 1e-8, no clipping: a clipped reward would make a long WAIT look cheap).
    The moments go into checkpoints; a resume restarts the returns with its fresh episodes."""

    EPSILON = 1e-8

    def __init__(self, num_envs: int, state: Mapping[str, float] | None = None):
        from stable_baselines3.common.running_mean_std import RunningMeanStd

        self.moments = RunningMeanStd(shape=())
        if state is not None:
            self.moments.mean = np.float64(state["mean"])
            self.moments.var = np.float64(state["var"])
            self.moments.count = float(state["count"])
        self.returns_N = np.zeros(num_envs)
        self.prev_discount_N = np.zeros(num_envs)

    def scale(self, rewards_N: np.ndarray, discounts_N: np.ndarray, dones_N: np.ndarray) -> np.ndarray:
        """The rewards of one vector step divided by the updated running std (the running returns advance)."""
        self.returns_N = self.prev_discount_N * self.returns_N + rewards_N
        self.moments.update(self.returns_N)
        self.prev_discount_N = np.where(dones_N, 0.0, discounts_N)
        self.returns_N[dones_N] = 0.0
        return rewards_N / np.sqrt(self.moments.var + self.EPSILON)

    def state(self) -> dict[str, float]:
        return {
            "mean": float(self.moments.mean),
            "var": float(self.moments.var),
            "count": float(self.moments.count),
        }


@contextmanager
def _isolated_global_rngs() -> Iterator[None]:
    """Run SB3 (which draws from the global torch, numpy and random generators) without changing the caller's
    global states."""
    np_state, py_state = np.random.get_state(), random.getstate()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            np.random.set_state(np_state)
            random.setstate(py_state)


def _global_rng_state() -> dict[str, Any]:
    """The global generators' states as plain values (loadable with torch.load(weights_only=True))."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    return {
        "torch_global": torch.get_rng_state(),
        "numpy_global": {"keys": keys.tolist(), "pos": int(pos), "has_gauss": int(has_gauss), "gauss": gauss},
    }


def _set_global_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch_global"].cpu())
    g = state["numpy_global"]
    np.random.set_state(
        ("MT19937", np.array(g["keys"], dtype=np.uint32), g["pos"], g["has_gauss"], g["gauss"])
    )


def _in_worker(make: Callable[[], gym.Env]) -> gym.Env:
    """A subprocess env's factory: the worker ignores stop signals (interrupts.py), then builds its env."""
    ignore_stop_signals()
    return make()


def train_ppo(
    make_env: Callable[[int], gym.Env],
    cfg: Any,
    seed: int,
    total_steps: int | None = None,
    device: str = "auto",
    models_dir: str = "models",
    run_dir: str = "logs/train",
    resume: str | None = None,
    checkpoint_every_episodes: int = 50,
    keep_checkpoints: int = 0,
    progress: bool = True,
    eval_fn: Callable[[AgentPolicy], Mapping[str, float]] | None = None,
    run_id: str | None = None,
    num_threads: int = 1,
):
    """Train MaskablePPO until `total_steps` env steps (counted across resumes, rounded up to whole rollouts).

    Same contract as agents.trainer.train (TrainResult, checkpoint names, eval_fn after every checkpoint, Ctrl-C
    or another stop signal -> `ppo_seed<S>_interrupted.pt` + TrainingInterrupted, a completed run removes its own
    interrupted checkpoint, keep_checkpoints). Checkpoints are written at rollout boundaries (after an update) once `checkpoint_every_episodes`
    more episodes have finished; a rollout cut short by Ctrl-C is discarded (its steps stay counted). A resume
    restores the policy, optimizer, update count and global RNG states, and restarts every env on a fresh episode.
    """
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
    from torch.utils.tensorboard import SummaryWriter
    from tqdm import tqdm

    from agents.run_control import (
        CtrlC,
        TrainingInterrupted,
        TrainResult,
        flatten,
        remove_own_interrupted_checkpoint,
        resolve_device,
    )

    run_start = time.perf_counter()
    ppo_cfg, run_cfg = _split(cfg)
    resumed = load_checkpoint(resume) if resume else None
    if resumed is not None:
        if resumed["algo"] != "ppo":
            raise ValueError(f"{resume} holds {a_or_an(resumed['algo'])} agent, not ppo")
        ppo_cfg = ppo_config_from_dict(resumed["config"])
        seed, run_id = resumed["seed"], resumed.get("run_id") or run_id
    run_id = run_id or new_run_id()
    total_steps = total_steps if total_steps is not None else ppo_cfg.total_steps
    if not ppo_cfg.discount_tau_s >= 0:
        raise ValueError(f"discount_tau_s must be >= 0 seconds (0 = per step), got {ppo_cfg.discount_tau_s}")
    if ppo_cfg.vec_env not in VEC_ENVS:
        raise ValueError(f"vec_env must be one of {', '.join(VEC_ENVS)}, got {ppo_cfg.vec_env!r}")
    dev = resolve_device(device)
    if dev.type == "cpu":
        torch.set_num_threads(num_threads)

    n = ppo_cfg.num_envs
    starts = list(range(n)) if resumed is None else list(resumed["next_episode"])
    env_fns = [_stream_factory(make_env, seed, i, n, starts[i]) for i in range(n)]
    if ppo_cfg.vec_env == "subproc":  # a stop signal to the process group stops this process only, which then
        env_fns = [functools.partial(_in_worker, fn) for fn in env_fns]  # checkpoints and closes the workers
    vec_env = SubprocVecEnv(env_fns) if ppo_cfg.vec_env == "subproc" else DummyVecEnv(env_fns)
    spec = vec_env.get_attr("obs_spec")[0]
    writer = SummaryWriter(run_dir)
    hparams = {
        "algo": "ppo",
        "seed": seed,
        "total_steps": total_steps,
        "device": str(dev),
        "resume": str(resume),
    }
    hparams |= flatten("", dataclasses.asdict(ppo_cfg), {})
    table = "\n".join(f"|{key}|{value}|" for key, value in hparams.items())
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + table, 0)
    if run_cfg is not None:
        run_table = "\n".join(f"|{key}|{value}|" for key, value in flatten("", run_cfg, {}).items())
        writer.add_text("run_config", "|param|value|\n|-|-|\n" + run_table, 0)

    written: list[str] = []
    eval_history: list[tuple[int, dict[str, float]]] = []
    state = {"episodes": 0 if resumed is None else resumed["episode"]}
    episode_returns: list[float] = []
    recent: deque[float] = deque(maxlen=20)

    with _isolated_global_rngs():
        torch.manual_seed(seed)
        np.random.seed(seed % 2**32)
        model = MaskablePPO(
            policy_class(),
            vec_env,
            learning_rate=ppo_cfg.learning_rate,
            n_steps=ppo_cfg.n_steps,
            batch_size=ppo_cfg.batch_size,
            n_epochs=ppo_cfg.n_epochs,
            gamma=ppo_cfg.gamma,
            gae_lambda=ppo_cfg.gae_lambda,
            rollout_buffer_class=_rollout_buffer_class(),
            clip_range=ppo_cfg.clip_range,
            ent_coef=ppo_cfg.ent_coef,
            vf_coef=ppo_cfg.vf_coef,
            max_grad_norm=ppo_cfg.max_grad_norm,
            policy_kwargs={"spec": spec, "hidden": ppo_cfg.hidden},
            verbose=0,
            device=dev,
        )
        # SB3's default logger (verbose=0, no tensorboard_log) makes an empty folder in the system temp dir per
        # run; ours writes tensorboard itself (the SummaryWriter above), so SB3 gets a logger with no outputs
        model.set_logger(Logger(folder=None, output_formats=[]))
        if resumed is not None:
            if ObsSpec(**resumed["obs_spec"]) != spec:
                raise UserError(
                    f"--resume {resume} was trained on {resumed['obs_spec']}, but this env gives {spec}"
                )
            model.policy.load_state_dict(resumed["agent"]["networks"]["policy"])
            model.policy.optimizer.load_state_dict(resumed["agent"]["optimizers"]["policy"])
            model.num_timesteps = resumed["global_step"]
            model._n_updates = resumed["agent"]["schedule"]["num_updates"]
            _set_global_rng_state(resumed["rng"])

        scaler = None
        if ppo_cfg.normalize_reward:
            scaler = RewardScaler(n, None if resumed is None else resumed["agent"]["reward_scale"])

        def save(path: Path, validate: bool = True) -> None:
            next_episode = [int(x) for x in vec_env.get_attr("next_index")]
            save_checkpoint(
                path,
                {
                    "format": CHECKPOINT_FORMAT,
                    "algo": "ppo",
                    "config": dataclasses.asdict(ppo_cfg),
                    "run_config": run_cfg,
                    **env_record(run_cfg, spec),
                    "seed": seed,
                    "global_step": int(model.num_timesteps),
                    "episode": state["episodes"],
                    "next_episode": next_episode,
                    "total_steps": total_steps,
                    "agent": {
                        "networks": {"policy": model.policy.state_dict()},
                        "optimizers": {"policy": model.policy.optimizer.state_dict()},
                        "schedule": {"num_updates": int(model._n_updates)},
                        "reward_scale": None if scaler is None else scaler.state(),
                    },
                    "schedule_values": {},
                    "rng": _global_rng_state(),
                    "replay": None,
                    "run_id": run_id,
                },
            )
            written.append(str(path))
            if eval_fn is not None and validate:
                policy = AgentPolicy(
                    "ppo",
                    dataclasses.asdict(ppo_cfg),
                    spec,
                    model.policy,
                    dev,
                    int(model.num_timesteps),
                    str(path),
                )
                model.policy.set_training_mode(False)
                scores = {key: float(value) for key, value in eval_fn(policy).items()}
                for key, value in scores.items():
                    writer.add_scalar(f"eval/{key}", value, model.num_timesteps)
                eval_history.append((int(model.num_timesteps), scores))

        bar = tqdm(
            total=total_steps,
            initial=int(model.num_timesteps),
            desc="training",
            unit="step",
            disable=not progress,
            dynamic_ncols=True,
        )
        next_save = [(state["episodes"] // checkpoint_every_episodes + 1) * checkpoint_every_episodes]

        class Loop(BaseCallback):
            """Counts episodes, logs, writes periodic checkpoints between updates, stops on Ctrl-C."""

            def _on_step(self) -> bool:
                infos = self.locals["infos"]
                discounts = step_discounts(
                    [info.get("elapsed_s") for info in infos], ppo_cfg.gamma, ppo_cfg.discount_tau_s
                )
                buffer = self.model.rollout_buffer
                buffer.discounts[buffer.pos] = discounts
                rewards = self.locals["rewards"]  # the array SB3 then stores: changed in place
                if scaler is not None:
                    # float32 first, as the buffer stores them: dummy (float32) and subproc (float64) envs agree
                    raw = rewards.astype(np.float32).astype(np.float64)
                    rewards[:] = scaler.scale(raw, discounts, self.locals["dones"]).astype(np.float32)
                if ppo_cfg.discount_tau_s:
                    # SB3 adds gamma x V(last obs) to the reward of a truncated step; make it that step's discount
                    for i, (info, done) in enumerate(zip(infos, self.locals["dones"], strict=True)):
                        if (
                            done
                            and info.get("TimeLimit.truncated")
                            and info.get("terminal_observation") is not None
                        ):
                            obs = self.model.policy.obs_to_tensor(info["terminal_observation"])[0]
                            with torch.no_grad():
                                value = float(self.model.policy.predict_values(obs)[0])
                            rewards[i] += (discounts[i] - self.model.gamma) * value
                for info, done in zip(self.locals["infos"], self.locals["dones"], strict=True):
                    if done:
                        state["episodes"] += 1
                        ret = float(info.get("episode_return", float("nan")))
                        episode_returns.append(ret)
                        recent.append(ret)
                        writer.add_scalar("charts/episodic_return", ret, self.model.num_timesteps)
                bar.update(self.model.num_timesteps - bar.n)
                return not ctrl_c.requested

            def _on_rollout_start(self) -> None:
                for key, value in self.model.logger.name_to_value.items():
                    if key.startswith("train/"):
                        writer.add_scalar(f"losses/{key[len('train/') :]}", value, self.model.num_timesteps)
                if recent:
                    bar.set_postfix(ret=f"{np.mean(recent):.4g}", refresh=False)
                if state["episodes"] >= next_save[0]:
                    save(checkpoint_path(models_dir, "ppo", seed, state["episodes"]))
                    prune_periodic(models_dir, "ppo", seed, keep_checkpoints)
                    next_save[0] = (
                        state["episodes"] // checkpoint_every_episodes + 1
                    ) * checkpoint_every_episodes

        setup_s = time.perf_counter() - run_start
        start_step, start_time = int(model.num_timesteps), time.perf_counter()
        with CtrlC() as ctrl_c:
            try:
                remaining = total_steps - int(model.num_timesteps)
                if remaining > 0:
                    model.learn(remaining, callback=Loop(), reset_num_timesteps=resumed is None)
            except KeyboardInterrupt:  # a second stop signal: the step was cut short
                ctrl_c.requested = True
            bar.close()
            if ctrl_c.requested and model.num_timesteps < total_steps:
                interrupted = checkpoint_path(models_dir, "ppo", seed, INTERRUPTED_TAG)
                ctrl_c.saving(f"the checkpoint {interrupted}")
                save(interrupted, validate=False)
                vec_env.close()
                writer.close()
                raise TrainingInterrupted(
                    str(interrupted), int(model.num_timesteps), total_steps, run_id, ctrl_c.signum
                )
            final = checkpoint_path(models_dir, "ppo", seed, None)
            ctrl_c.saving(f"the final checkpoint {final}")
            save(final)
        vec_env.close()
    remove_own_interrupted_checkpoint(checkpoint_path(models_dir, "ppo", seed, INTERRUPTED_TAG), run_id)
    writer.close()
    wall_s = time.perf_counter() - run_start
    return TrainResult(
        algo="ppo",
        seed=seed,
        global_step=int(model.num_timesteps),
        episodes=state["episodes"],
        final_checkpoint=str(final),
        checkpoints=tuple(written),
        episode_returns=tuple(episode_returns),
        wall_s=wall_s,
        steps_per_s=(int(model.num_timesteps) - start_step) / max(time.perf_counter() - start_time, 1e-9),
        run_dir=str(run_dir),
        eval_history=tuple(eval_history),
        run_id=run_id,
        setup_s=setup_s,
    )


def _stream_factory(
    make_env, seed: int, slot: int, num_slots: int, start: int
) -> Callable[[], EpisodeStream]:
    return lambda: EpisodeStream(make_env, seed, slot, num_slots, start)


def _split(cfg: Any) -> tuple[PPOConfig, dict[str, Any] | None]:
    if isinstance(cfg, PPOConfig):
        return cfg, None
    if isinstance(getattr(cfg, "ppo", None), PPOConfig):
        return cfg.ppo, dataclasses.asdict(cfg)
    raise TypeError(f"cfg must be a PPOConfig or hold one as .ppo, got {type(cfg).__name__}")
