"""A tiny one-machine scheduling env following the GPUClusterScheduling-v0 contract; SJF is optimal on it."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class ToySJFEnv(gym.Env):
    """
    ## Description
    `num_jobs` jobs with distinct integer runtimes (1..`max_runtime_s` seconds) are all submitted at t = 0 to a
    single machine that runs one job at a time. The first `window` queued jobs are visible. Since every job
    waits for the ones started before it, shortest-job-first minimises the summed completion time, and it is
    the optimal policy for the return below (also when discounted per step).

    ## Action Space
    `Discrete(window + 1)`: action k < window starts the job in slot k (legal when the machine is idle and
    the slot holds a job); action `window` is WAIT (legal when the machine is busy, or as a no-op once the
    queue is empty): time advances to the running job's completion. An illegal action changes nothing and
    sets `info["illegal_action"]`.

    ## Observation Space
    `Box(0, 1, (window * 2 + 3,))`: per slot [runtime / max_runtime_s, 1.0] (all zeros when empty), then
    context [machine busy, running job's remaining time / max_runtime_s, jobs queued / num_jobs].

    ## Rewards
    WAIT: -Δt x jobs in system / `reward_scale_s`; starting a job: 0. The undiscounted return is
    -sum(completion times) / reward_scale_s. `info["elapsed_s"]`: the time the step took (the WAIT's run time;
    0 for a start), for time-based discounting.

    ## Starting State
    Runtimes drawn from `self.np_random` (distinct) in random queue order; machine idle.

    ## Episode End
    Terminated when every job has finished (after exactly 2 x num_jobs legal steps); truncated after
    `max_steps` steps (only reachable by illegal actions).

    ## Arguments
    `window` (K), `num_jobs` (<= max_runtime_s), `max_runtime_s`, `reward_scale_s`, `max_steps`.
    """

    metadata = {"render_modes": []}
    job_feature_dim = 2
    context_dim = 3

    def __init__(
        self,
        window: int = 4,
        num_jobs: int | None = None,
        max_runtime_s: int = 10,
        reward_scale_s: float = 10.0,
        max_steps: int = 100,
    ):
        self.window = window
        self.num_jobs = window if num_jobs is None else num_jobs
        if self.num_jobs > max_runtime_s:
            raise ValueError(f"num_jobs={self.num_jobs} distinct runtimes need max_runtime_s >= num_jobs")
        self.max_runtime_s, self.reward_scale_s, self.max_steps = max_runtime_s, reward_scale_s, max_steps
        obs_dim = window * self.job_feature_dim + self.context_dim
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(obs_dim,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(window + 1)
        self.queue_s: list[int] = []
        self.running_left_s = 0
        self.time_s = 0
        self.steps = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.queue_s = [int(r) + 1 for r in self.np_random.permutation(self.max_runtime_s)[: self.num_jobs]]
        self.running_left_s, self.time_s, self.steps = 0, 0, 0
        return self._obs(), {"action_mask": self.action_masks()}

    def action_masks(self) -> np.ndarray:
        mask = np.zeros(self.window + 1, dtype=np.bool_)
        if self.running_left_s > 0 or not self.queue_s:  # WAIT is the (no-op) legal action once all are done
            mask[self.window] = True
        else:
            mask[: min(self.window, len(self.queue_s))] = True
        return mask

    def optimal_return(self) -> float:
        """Undiscounted SJF return of the current episode's jobs (call right after reset)."""
        completion_s = np.cumsum(sorted(self.queue_s))
        return -float(completion_s.sum()) / self.reward_scale_s

    def step(self, action: int):
        legal = bool(self.action_masks()[action])
        reward = 0.0
        time_before_s = self.time_s
        if legal and action == self.window:
            jobs_in_system = len(self.queue_s) + 1
            reward = -self.running_left_s * jobs_in_system / self.reward_scale_s
            self.time_s += self.running_left_s
            self.running_left_s = 0
        elif legal:
            self.running_left_s = self.queue_s.pop(action)
        self.steps += 1
        elapsed_s = self.time_s - time_before_s
        terminated = not self.queue_s and self.running_left_s == 0
        truncated = not terminated and self.steps >= self.max_steps
        info = {
            "action_mask": self.action_masks(),
            "illegal_action": not legal,
            "elapsed_s": float(elapsed_s),
        }
        return self._obs(), reward, terminated, truncated, info

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.observation_space.shape, dtype=np.float32)
        for slot, runtime_s in enumerate(self.queue_s[: self.window]):
            obs[2 * slot : 2 * slot + 2] = (runtime_s / self.max_runtime_s, 1.0)
        obs[-3:] = (
            float(self.running_left_s > 0),
            self.running_left_s / self.max_runtime_s,
            len(self.queue_s) / self.num_jobs,
        )
        return obs
