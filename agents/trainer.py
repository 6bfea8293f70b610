"""The training loop shared by D3QN and SAC: seeding, rollouts, updates, logging, checkpoints and resume."""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from agents.checkpoint import (
    CHECKPOINT_FORMAT,
    INTERRUPTED_TAG,
    checkpoint_path,
    env_record,
    load_checkpoint,
    new_run_id,
    prune_periodic,
    replay_path,
    save_checkpoint,
)
from agents.d3qn import D3QNAgent
from agents.demos import Demonstrator, collect_demonstrations
from agents.networks import ObsSpec
from agents.policy import AgentPolicy
from agents.replay import ReplayBuffer
from agents.run_control import (
    CtrlC,
    TrainingInterrupted,
    TrainResult,
    demonstration_seeds,
    flatten,
    remove_own_interrupted_checkpoint,
    resolve_device,
    training_episode_seed,
)
from agents.sac import SACAgent
from config import D3QNConfig, SACConfig, UserError, a_or_an

AGENTS: dict[str, tuple[type, type]] = {"d3qn": (D3QNAgent, D3QNConfig), "sac": (SACAgent, SACConfig)}

LOG_LOSSES_EVERY_UPDATES = 100
PROGRESS_EVERY_STEPS = 500  # also how often the time limit is checked
RECENT_EPISODES = 20  # window of the "recent return" in the progress bar


def _split_config(algo: str, cfg: Any) -> tuple[Any, dict[str, Any] | None]:
    """Accept the agent's own config (D3QNConfig / SACConfig) or a RunConfig holding it as `.d3qn` / `.sac`."""
    config_type = AGENTS[algo][1]
    if isinstance(cfg, config_type):
        return cfg, None
    if isinstance(getattr(cfg, algo, None), config_type):
        return getattr(cfg, algo), dataclasses.asdict(cfg)
    raise TypeError(f"cfg must be a {config_type.__name__} or hold one as .{algo}, got {type(cfg).__name__}")


def train(
    agent_name: str,
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
    time_limit_s: float | None = None,
    num_threads: int = 1,
    demonstrator: Demonstrator | None = None,
    run_id: str | None = None,
) -> TrainResult:
    """Train D3QN or SAC until `total_steps` env steps (counted across resumes) or `time_limit_s` seconds.

    `make_env(scenario_seed)` builds the env of one episode; it is then reset with `reset(seed=scenario_seed,
    options={"scenario_seed": scenario_seed})`, so GPUClusterEnv builds exactly that scenario (envs without
    options ignore them). `cfg` is the agent's config (D3QNConfig / SACConfig) or a RunConfig holding it.
    `total_steps` defaults to the agent config's; the epsilon / PER-beta schedules span the first run's
    `total_steps` (so with `time_limit_s`, pick a `total_steps` that fits the time).

    With `resume`, the networks, optimizers, schedules, RNG states, counters and the replay buffer (if one was
    saved beside the checkpoint; else it refills and learning_starts applies again) come from the checkpoint,
    and so do the agent config and seed; training then continues on a fresh episode. Resuming from a
    checkpoint written at an episode end reproduces the uninterrupted run exactly.

    With `agent_cfg.demo_policy` set, `demonstrator(env) -> action` (that heuristic acting through the env) is
    run on `demo_episodes` training scenarios first; its transitions form a separate, fixed buffer that the
    agent pre-trains on (not again after a resume: the buffer is rebuilt, the networks come from the
    checkpoint) and that contributes `demo_batch_size` rows to every later update.

    `keep_checkpoints` > 0 keeps only the newest that many `_ep<N>.pt` files of the algo and seed (0: all).

    `eval_fn(policy)` runs after each checkpoint on the live greedy policy; its results go to eval/* in
    TensorBoard and to `TrainResult.eval_history`.

    Every checkpoint records `run_id` (a resume keeps the checkpoint's; a fresh run gets `run_id` or a new
    one). Ctrl-C (or SIGTERM, SIGHUP, SIGUSR1: interrupts.py) during the loop writes
    `<algo>_seed<S>_interrupted.pt` (no validation) and raises TrainingInterrupted; a run that completes removes its
    own interrupted checkpoint. Ctrl-C before the first
    step (demonstrations, pre-training) writes nothing and raises KeyboardInterrupt.
    """
    run_start = time.perf_counter()
    algo = agent_name.lower()
    if algo not in AGENTS:
        raise ValueError(f"unknown agent {agent_name!r}; expected one of {sorted(AGENTS)}")
    agent_cls, config_cls = AGENTS[algo]
    agent_cfg, run_cfg = _split_config(algo, cfg)
    resumed = load_checkpoint(resume) if resume else None
    if resumed is not None:
        if resumed["algo"] != algo:
            raise ValueError(f"{resume} holds {a_or_an(resumed['algo'])} agent, not {algo}")
        if resumed["seed"] != seed:
            warnings.warn(
                f"resuming seed {resumed['seed']} from {resume} (ignoring seed={seed})", stacklevel=2
            )
        # checkpoints written before demonstrations existed were pure RL runs
        agent_cfg = config_cls(**({"demo_policy": ""} | resumed["config"]))
        seed = resumed["seed"]
        run_id = resumed.get("run_id") or run_id
    run_id = run_id or new_run_id()
    total_steps = total_steps if total_steps is not None else agent_cfg.total_steps
    dev = resolve_device(device)
    if dev.type == "cpu":
        torch.set_num_threads(num_threads)  # small nets: extra threads only add synchronisation

    # ---- seeding: every random draw of the run comes from these three generators ----
    rng = np.random.default_rng(seed)  # exploration and replay sampling
    init_generator = torch.Generator().manual_seed(seed)  # network initialisation (on the CPU)
    sample_generator = torch.Generator(device=dev).manual_seed(seed)  # SAC action sampling
    # scenarios: episode N of this seed runs on training_episode_seed(seed, N), disjoint from eval seeds

    global_step, episodes_done, next_episode = 0, 0, 0  # next_episode: index of the next scenario seed
    if resumed is not None:
        global_step, episodes_done = resumed["global_step"], resumed["episode"]
        next_episode = resumed["next_episode"]
    episode_seed = training_episode_seed(seed, next_episode)
    env = make_env(episode_seed)
    spec = ObsSpec.from_env(env)
    agent = agent_cls(agent_cfg, spec, dev, rng, init_generator, sample_generator, schedule_steps=total_steps)
    buffer = agent.make_buffer()
    if resumed is not None:
        if ObsSpec(**resumed["obs_spec"]) != spec:
            raise UserError(
                f"--resume {resume} was trained on {resumed['obs_spec']}, but this env gives {spec}"
            )
        agent.load_state_dict(resumed["agent"])
        rng.bit_generator.state = resumed["rng"]["numpy"]
        init_generator.set_state(resumed["rng"]["torch_init"].cpu())
        sample_generator.set_state(resumed["rng"]["torch_sample"].cpu())
        replay = resumed["replay"]
        replay_file = Path(resume).parent / replay["file"] if replay is not None else None
        if replay_file is not None and replay_file.exists():
            buffer.load(str(replay_file))
            if (len(buffer), buffer.pos) != (replay["size"], replay.get("pos", buffer.pos)):
                # a kill between writing the buffer and its checkpoint: the buffer is another state's
                warnings.warn(
                    f"{replay_file} does not match {resume} (size {len(buffer)}, expected {replay['size']}); "
                    f"refilling {agent_cfg.learning_starts} steps",
                    stacklevel=2,
                )
                buffer = agent.make_buffer()
        else:
            warnings.warn(
                f"{resume}: no replay buffer saved; refilling {agent_cfg.learning_starts} steps", stacklevel=2
            )

    writer = SummaryWriter(run_dir)
    demos: ReplayBuffer | None = None
    if agent_cfg.demo_policy:
        if demonstrator is None:
            raise ValueError(f"demo_policy={agent_cfg.demo_policy!r} needs a demonstrator for this env")

        def make_demo_buffer(capacity: int) -> ReplayBuffer:
            return ReplayBuffer(
                capacity,
                spec.obs_dim,
                spec.num_actions,
                rng,
                agent_cfg.gamma,
                n_step=agent_cfg.n_step,
                discount_tau_s=agent_cfg.discount_tau_s,
            )

        seeds = demonstration_seeds(seed, agent_cfg.demo_episodes)
        with tqdm(
            total=len(seeds),
            desc=f"demonstrations ({agent_cfg.demo_policy})",
            unit="episode",
            disable=not progress,
            dynamic_ncols=True,
        ) as demo_bar:
            demos, demo_returns = collect_demonstrations(
                make_env, demonstrator, seeds, make_demo_buffer, lambda: demo_bar.update(1)
            )
        writer.add_scalar("demos/mean_return", float(np.mean(demo_returns)), global_step)
        writer.add_scalar("demos/transitions", len(demos), global_step)
        if resumed is None:
            with tqdm(
                total=agent_cfg.demo_pretrain_updates,
                desc="pre-training on demonstrations",
                unit="update",
                disable=not progress,
                dynamic_ncols=True,
                mininterval=0.5,
            ) as pretrain_bar:
                losses = agent.pretrain(
                    demos, agent_cfg.demo_pretrain_updates, lambda: pretrain_bar.update(1)
                )
            for key, value in losses.items():
                writer.add_scalar(f"pretrain/{key}", float(value), global_step)
    hparams = {
        "algo": algo,
        "seed": seed,
        "total_steps": total_steps,
        "device": str(dev),
        "resume": str(resume),
    }
    hparams |= flatten("", dataclasses.asdict(agent_cfg), {})
    table = "\n".join(f"|{key}|{value}|" for key, value in hparams.items())
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + table, global_step)
    if run_cfg is not None:
        run_table = "\n".join(f"|{key}|{value}|" for key, value in flatten("", run_cfg, {}).items())
        writer.add_text("run_config", "|param|value|\n|-|-|\n" + run_table, global_step)

    written: list[str] = []
    eval_history: list[tuple[int, dict[str, float]]] = []
    last_replay_file: Path | None = None

    def save(path: Path, resume_episode: int, validate: bool = True) -> None:
        """Write a checkpoint (and, if configured, the replay buffer beside it, replacing the previous one);
        then, with `validate`, run eval_fn on it.

        `resume_episode` is the scenario index a resume starts with: an episode already begun is skipped, so a
        resume never replays part of a scenario as if it were new.
        """
        nonlocal last_replay_file
        replay = None
        if agent_cfg.save_replay:
            replay_file = replay_path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            buffer.save(str(replay_file))
            if last_replay_file is not None and last_replay_file != replay_file:
                last_replay_file.unlink(missing_ok=True)  # keep only the newest buffer this run wrote
            last_replay_file = replay_file
            replay = {"file": replay_file.name, "size": len(buffer), "pos": buffer.pos}
        save_checkpoint(
            path,
            {
                "format": CHECKPOINT_FORMAT,
                "algo": algo,
                "config": dataclasses.asdict(agent_cfg),
                "run_config": run_cfg,
                **env_record(run_cfg, spec),
                "seed": seed,
                "global_step": global_step,
                "episode": episodes_done,
                "next_episode": resume_episode,
                "total_steps": total_steps,
                "agent": agent.state_dict(),
                "schedule_values": agent.schedule_values(global_step),
                "rng": {
                    "numpy": rng.bit_generator.state,
                    "torch_init": init_generator.get_state(),
                    "torch_sample": sample_generator.get_state(),
                },
                "replay": replay,
                "run_id": run_id,
            },
        )
        written.append(str(path))
        if eval_fn is not None and validate:
            network = agent.policy_network()
            policy = AgentPolicy(
                algo, dataclasses.asdict(agent_cfg), spec, network, dev, global_step, str(path)
            )
            scores = {key: float(value) for key, value in eval_fn(policy).items()}
            for key, value in scores.items():
                writer.add_scalar(f"eval/{key}", value, global_step)
            eval_history.append((global_step, scores))

    # ---- training loop ----
    setup_s = time.perf_counter() - run_start
    start_step, start_time = global_step, time.perf_counter()
    recent_returns: deque[float] = deque(maxlen=RECENT_EPISODES)
    episode_returns: list[float] = []
    bar = tqdm(
        total=total_steps,
        initial=global_step,
        desc="training",
        unit="step",
        disable=not progress,
        dynamic_ncols=True,
    )
    obs, info = env.reset(seed=episode_seed, options={"scenario_seed": episode_seed})
    mask = info["action_mask"]
    next_episode += 1
    episode_return, episode_length, last_bar_step = 0.0, 0, global_step
    with CtrlC() as ctrl_c:
        try:
            while global_step < total_steps and not ctrl_c.requested:
                learning = len(buffer) >= max(agent_cfg.learning_starts, agent_cfg.batch_size)
                # with demonstrations the pre-trained agent acts from the start instead of uniformly at random
                action = agent.act(obs, mask, global_step, random_phase=not learning and demos is None)
                next_obs, reward, terminated, truncated, info = env.step(action)
                next_mask = info["action_mask"]
                buffer.add(
                    obs,
                    action,
                    reward,
                    next_obs,
                    terminated,
                    truncated,
                    mask,
                    next_mask,
                    info.get("elapsed_s"),
                )
                obs, mask = next_obs, next_mask
                global_step += 1
                episode_return += float(reward)
                episode_length += 1

                if learning and global_step % agent_cfg.train_every == 0:
                    losses = agent.update(buffer, global_step, demos)
                    if agent.num_updates % LOG_LOSSES_EVERY_UPDATES == 0:
                        for key, value in losses.items():
                            writer.add_scalar(f"losses/{key}", float(value), global_step)

                if terminated or truncated:
                    episodes_done += 1
                    recent_returns.append(episode_return)
                    episode_returns.append(episode_return)
                    writer.add_scalar("charts/episodic_return", episode_return, global_step)
                    writer.add_scalar("charts/episodic_length", episode_length, global_step)
                    for key, value in agent.schedule_values(global_step).items():
                        writer.add_scalar(f"charts/{key}", value, global_step)
                    if episodes_done % checkpoint_every_episodes == 0:
                        save(checkpoint_path(models_dir, algo, seed, episodes_done), next_episode)
                        prune_periodic(models_dir, algo, seed, keep_checkpoints)
                    env.close()
                    episode_seed = training_episode_seed(seed, next_episode)
                    env = make_env(episode_seed)
                    obs, info = env.reset(seed=episode_seed, options={"scenario_seed": episode_seed})
                    mask = info["action_mask"]
                    next_episode += 1
                    episode_return, episode_length = 0.0, 0

                if global_step - last_bar_step >= PROGRESS_EVERY_STEPS:
                    bar.update(global_step - last_bar_step)
                    last_bar_step = global_step
                    elapsed_s = time.perf_counter() - start_time
                    writer.add_scalar("charts/SPS", (global_step - start_step) / elapsed_s, global_step)
                    if recent_returns:
                        schedule = {k: f"{v:.3g}" for k, v in agent.schedule_values(global_step).items()}
                        bar.set_postfix(ret=f"{np.mean(recent_returns):.4g}", **schedule, refresh=False)
                    if time_limit_s is not None and elapsed_s >= time_limit_s:
                        break
        except (
            KeyboardInterrupt
        ):  # a second stop signal, or one outside the main thread: the step was cut short
            ctrl_c.requested = True
        bar.update(global_step - last_bar_step)
        bar.close()
        # an episode already begun is skipped on resume (its first step may have been cut short)
        resume_episode = next_episode if episode_length > 0 else next_episode - 1
        if ctrl_c.requested and global_step < total_steps:  # a run that reached its target is complete
            interrupted = checkpoint_path(models_dir, algo, seed, INTERRUPTED_TAG)
            ctrl_c.saving(f"the checkpoint {interrupted}")
            env.close()
            save(interrupted, resume_episode, validate=False)  # validation can wait for the resumed run
            writer.close()
            raise TrainingInterrupted(str(interrupted), global_step, total_steps, run_id, ctrl_c.signum)
        env.close()
        final = checkpoint_path(models_dir, algo, seed, None)
        ctrl_c.saving(f"the final checkpoint {final}")
        save(final, resume_episode)
    remove_own_interrupted_checkpoint(checkpoint_path(models_dir, algo, seed, INTERRUPTED_TAG), run_id)
    metric = float(np.mean(recent_returns)) if recent_returns else float("nan")
    writer.add_hparams(
        {key: value for key, value in hparams.items() if key != "resume"},
        {"hparam/recent_return": metric},
        run_name=".",
        global_step=global_step,
    )
    writer.close()
    wall_s = time.perf_counter() - run_start
    return TrainResult(
        algo=algo,
        seed=seed,
        global_step=global_step,
        episodes=episodes_done,
        final_checkpoint=str(final),
        checkpoints=tuple(written),
        episode_returns=tuple(episode_returns),
        wall_s=wall_s,
        steps_per_s=(global_step - start_step) / max(wall_s, 1e-9),
        run_dir=str(run_dir),
        eval_history=tuple(eval_history),
        run_id=run_id,
        setup_s=setup_s,
    )
