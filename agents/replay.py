"""Numpy replay buffer with legal-action masks, n-step returns and optional proportional prioritization."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, fields

import numpy as np

from agents.files import atomic_write


@dataclass(frozen=True)
class Batch:
    """A sampled minibatch (numpy). `discounts_B` = the product of the m <= n per-step discounts of the steps summed
    into `rewards_B` (gamma^m per step, or gamma^(elapsed seconds / discount_tau_s) with time-based discounting);
    `dones_B` is 1.0 only where the episode terminated (not truncated) within those m steps."""

    obs_BD: np.ndarray
    actions_B: np.ndarray
    rewards_B: np.ndarray
    next_obs_BD: np.ndarray
    dones_B: np.ndarray
    discounts_B: np.ndarray
    masks_BA: np.ndarray
    next_masks_BA: np.ndarray
    weights_B: np.ndarray
    """importance-sampling weights (all 1.0 without prioritized replay)"""
    indices_B: np.ndarray


class SumTree:
    """Binary tree of priorities over `capacity` leaves; each node holds the sum of its children."""

    def __init__(self, capacity: int):
        self.num_leaves = 1 << max(0, (capacity - 1).bit_length())
        self.depth = self.num_leaves.bit_length() - 1
        self.nodes = np.zeros(2 * self.num_leaves, dtype=np.float64)  # root at index 1

    @property
    def total(self) -> float:
        return float(self.nodes[1])

    def leaves(self, indices: np.ndarray) -> np.ndarray:
        return self.nodes[indices + self.num_leaves]

    def set(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        node = np.asarray(indices, dtype=np.int64) + self.num_leaves
        self.nodes[node] = priorities
        for _ in range(self.depth):
            node = node // 2
            self.nodes[node] = self.nodes[2 * node] + self.nodes[2 * node + 1]

    def find(self, mass: np.ndarray) -> np.ndarray:
        """Leaf index whose cumulative-priority interval contains each `mass` in [0, total)."""
        node = np.ones(len(mass), dtype=np.int64)
        mass = mass.copy()
        for _ in range(self.depth):
            left = 2 * node
            left_sum = self.nodes[left]
            go_right = mass > left_sum
            mass = np.where(go_right, mass - left_sum, mass)
            node = np.where(go_right, left + 1, left)
        return node - self.num_leaves


class ReplayBuffer:
    """Ring buffer of (obs, action, n-step reward, next_obs, done, discount, mask, next_mask).

    `add` takes one env step at a time; with n_step > 1 it holds the last n steps of the current episode and
    writes a transition once its n-step return is known, flushing shorter returns when the episode ends.
    Truncation ends the n-step sum without setting `done`, so the target still bootstraps from next_obs.
    Discounting is per step (gamma each) when `discount_tau_s` is 0, else by simulated time: a step that took
    `elapsed_s` seconds is discounted by gamma^(elapsed_s / discount_tau_s), and its reward counts at the step's
    start (the n-step return is sum_i (prod_{j<i} d_j) r_i, its bootstrap discount prod_j d_j).
    With `prioritized`, sampling is proportional to priority^alpha (sum tree, stratified) and new
    transitions get the largest priority seen so far.
    """

    def __init__(
        self,
        capacity: int,
        obs_dim: int,
        num_actions: int,
        rng: np.random.Generator,
        gamma: float,
        n_step: int = 1,
        prioritized: bool = False,
        alpha: float = 0.6,
        priority_eps: float = 1e-6,
        discount_tau_s: float = 0.0,
    ):
        if n_step < 1:
            raise ValueError(f"n_step must be >= 1, got {n_step}")
        if not discount_tau_s >= 0:
            raise ValueError(f"discount_tau_s must be >= 0 seconds (0 = per step), got {discount_tau_s}")
        self.capacity, self.rng, self.gamma, self.n_step = capacity, rng, gamma, n_step
        self.discount_tau_s = discount_tau_s
        self.obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.dones = np.zeros(capacity, dtype=np.float32)
        self.discounts = np.zeros(capacity, dtype=np.float32)
        self.masks = np.zeros((capacity, num_actions), dtype=np.bool_)
        self.next_masks = np.zeros((capacity, num_actions), dtype=np.bool_)
        self.pos, self.size = 0, 0
        self._pending: deque[tuple[np.ndarray, int, float, np.ndarray, float]] = deque()
        self.prioritized, self.alpha, self.priority_eps = prioritized, alpha, priority_eps
        self.tree = SumTree(capacity) if prioritized else None
        self.max_priority = 1.0  # already raised to alpha

    def __len__(self) -> int:
        return self.size

    def add(
        self,
        obs: np.ndarray,
        action: int,
        reward: float,
        next_obs: np.ndarray,
        terminated: bool,
        truncated: bool,
        mask: np.ndarray,
        next_mask: np.ndarray,
        elapsed_s: float | None = None,
    ) -> None:
        """One env step; `elapsed_s` (the env's info["elapsed_s"]) is required with time-based discounting."""
        discount = self.step_discount(elapsed_s)
        if self.n_step == 1:
            self._write(obs, action, reward, next_obs, terminated, discount, mask, next_mask)
            return
        self._pending.append(
            (np.array(obs, dtype=np.float32), int(action), float(reward), np.array(mask), discount)
        )
        if terminated or truncated:
            while self._pending:
                self._write_pending(next_obs, terminated, next_mask)
        elif len(self._pending) == self.n_step:
            self._write_pending(next_obs, False, next_mask)

    def step_discount(self, elapsed_s: float | None) -> float:
        """The discount of one step: gamma, or gamma^(elapsed_s / discount_tau_s) with time-based discounting."""
        if self.discount_tau_s == 0:
            return self.gamma
        if elapsed_s is None or not elapsed_s >= 0:
            raise ValueError(
                f"time-based discounting (discount_tau_s={self.discount_tau_s}) needs each step's elapsed "
                f"simulated seconds (info['elapsed_s'] >= 0), got {elapsed_s!r}"
            )
        return self.gamma ** (elapsed_s / self.discount_tau_s)

    def _write_pending(self, next_obs: np.ndarray, done: bool, next_mask: np.ndarray) -> None:
        """Write the oldest pending step with the discounted sum of all pending rewards, then drop it."""
        ret, discount = 0.0, 1.0
        for _, _, reward, _, step_discount in self._pending:
            ret += discount * reward
            discount *= step_discount
        obs, action, _, mask, _ = self._pending.popleft()
        self._write(obs, action, ret, next_obs, done, discount, mask, next_mask)

    def _write(self, obs, action, ret, next_obs, done, discount, mask, next_mask) -> None:
        i = self.pos
        self.obs[i] = obs
        self.next_obs[i] = next_obs
        self.actions[i] = action
        self.rewards[i] = ret
        self.dones[i] = float(done)
        self.discounts[i] = discount
        self.masks[i] = mask
        self.next_masks[i] = next_mask
        if not self.next_masks[i].any():  # terminal states may report no legal action; keep targets finite
            self.next_masks[i, -1] = True
        if self.tree is not None:
            self.tree.set(np.array([i]), np.array([self.max_priority]))
        self.pos = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def end_episode(self) -> None:
        """Drop unfinished n-step sums (call when an episode is abandoned without terminated/truncated)."""
        self._pending.clear()

    def sample(self, batch_size: int, beta: float = 1.0) -> Batch:
        if self.tree is None:
            idx = self.rng.integers(0, self.size, size=batch_size)
            weights = np.ones(batch_size, dtype=np.float32)
        else:
            total = self.tree.total
            segment = total / batch_size
            mass = (np.arange(batch_size) + self.rng.random(batch_size)) * segment
            idx = np.minimum(self.tree.find(np.minimum(mass, np.nextafter(total, 0.0))), self.size - 1)
            probs = self.tree.leaves(idx) / total
            weights = (self.size * probs) ** (-beta)
            weights = (weights / weights.max()).astype(np.float32)  # normalised by the batch maximum
        return Batch(
            self.obs[idx],
            self.actions[idx],
            self.rewards[idx],
            self.next_obs[idx],
            self.dones[idx],
            self.discounts[idx],
            self.masks[idx],
            self.next_masks[idx],
            weights,
            idx,
        )

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        priorities = (np.abs(td_errors) + self.priority_eps) ** self.alpha
        self.tree.set(indices, priorities)
        self.max_priority = max(self.max_priority, float(priorities.max()))

    # ---- persistence: only the filled part is written, so a young buffer is a small file ----

    _ARRAYS = ("obs", "next_obs", "actions", "rewards", "dones", "discounts", "masks", "next_masks")

    def save(self, path: str) -> None:
        """Write the buffer to `path` (.npz) atomically, under a temp name no concurrent writer shares."""
        arrays = {name: getattr(self, name)[: self.size] for name in self._ARRAYS}
        meta = np.array([self.pos, self.size, self.capacity], dtype=np.int64)
        if self.tree is not None:
            arrays["priorities"] = self.tree.leaves(np.arange(self.size))
            arrays["max_priority"] = np.array(self.max_priority)
        # a file object, so numpy appends no ".npz" to the unique temp name
        atomic_write(path, lambda file: np.savez(file, meta=meta, **arrays))

    def load(self, path: str) -> None:
        with np.load(path) as data:
            pos, size, capacity = (int(v) for v in data["meta"])
            if capacity != self.capacity or data["obs"].shape[1] != self.obs.shape[1]:
                raise ValueError(f"{path}: buffer of capacity {capacity} does not fit this buffer")
            for name in self._ARRAYS:
                getattr(self, name)[:size] = data[name]
            self.pos, self.size = pos, size
            if self.tree is not None:
                if "priorities" in data:
                    self.tree.set(np.arange(size), data["priorities"])
                    self.max_priority = float(data["max_priority"])
                else:
                    self.tree.set(np.arange(size), np.full(size, self.max_priority))
        self._pending.clear()


def concat_batches(first: Batch, second: Batch) -> Batch:
    """`first` rows, then `second` rows (indices of `second` are its own buffer's; keep track of the split)."""
    return Batch(
        **{f.name: np.concatenate([getattr(first, f.name), getattr(second, f.name)]) for f in fields(Batch)}
    )


class ReplayAgent:
    """What the replay-based learners (D3QN, SAC) share: their inputs, the update count, the schedule length and a
    replay buffer shaped by their config; `_buffer_options` adds a learner's own buffer settings."""

    def __init__(self, cfg, spec, device, rng: np.random.Generator, schedule_steps: int):
        self.cfg, self.spec, self.device, self.rng = cfg, spec, device, rng
        self.schedule_steps = schedule_steps
        """env steps the schedules (epsilon, PER beta, BC decay) run over: fixed at the run's start, kept by
        checkpoints"""
        self.num_updates = 0

    def _buffer_options(self) -> dict:
        return {}

    def make_buffer(self) -> ReplayBuffer:
        cfg = self.cfg
        return ReplayBuffer(
            cfg.buffer_size,
            self.spec.obs_dim,
            self.spec.num_actions,
            self.rng,
            cfg.gamma,
            n_step=cfg.n_step,
            discount_tau_s=cfg.discount_tau_s,
            **self._buffer_options(),
        )
