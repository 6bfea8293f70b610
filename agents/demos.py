"""Demonstrations: a heuristic's transitions on training scenarios, kept apart from the agent's own replay."""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym

from agents.replay import ReplayBuffer

Demonstrator = Callable[[gym.Env], int]
"""demonstrator(env) -> the action the heuristic takes in env's current state"""


def collect_demonstrations(
    make_env: Callable[[int], gym.Env],
    demonstrator: Demonstrator,
    scenario_seeds: list[int],
    make_buffer: Callable[[int], ReplayBuffer],
    on_episode: Callable[[], None] | None = None,
) -> tuple[ReplayBuffer, list[float]]:
    """Run `demonstrator` for one episode on each scenario; (buffer holding exactly those transitions, returns).
    `on_episode()` is called after each episode (progress display).

    Episodes are stored with the agent's reward, discount and n-step setting, so demonstration transitions are
    ordinary TD targets too. Deterministic: no random draw is made (a resume rebuilds the same buffer).
    """
    episodes: list[list[tuple]] = []
    returns: list[float] = []
    for scenario_seed in scenario_seeds:
        env = make_env(scenario_seed)
        obs, info = env.reset(seed=scenario_seed, options={"scenario_seed": scenario_seed})
        mask, steps, total = info["action_mask"], [], 0.0
        done = truncated = False
        while not (done or truncated):
            action = demonstrator(env)
            if not mask[action]:
                raise RuntimeError(f"demonstrator chose illegal action {action} (mask {mask.astype(int)})")
            next_obs, reward, done, truncated, info = env.step(action)
            steps.append(
                (
                    obs,
                    action,
                    reward,
                    next_obs,
                    done,
                    truncated,
                    mask,
                    info["action_mask"],
                    info.get("elapsed_s"),
                )
            )
            obs, mask = next_obs, info["action_mask"]
            total += float(reward)
        env.close()
        episodes.append(steps)
        returns.append(total)
        if on_episode is not None:
            on_episode()
    buffer = make_buffer(max(1, sum(len(e) for e in episodes)))
    for steps in episodes:
        for step in steps:
            buffer.add(*step)
    return buffer, returns
