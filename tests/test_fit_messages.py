"""The article in agents/fit.py's refusals (config.a_or_an): of the agent's algo and of the task asked for."""

from __future__ import annotations

import pytest

from agents.fit import check_fits, task_features
from config import UserError, a_or_an


def test_a_or_an_goes_by_the_first_letter():
    assert [a_or_an(w) for w in ("es", "d3qn", "autoscaling", "power", "Es")] == [
        "an es", "a d3qn", "an autoscaling", "a power", "an Es",
    ]  # fmt: skip


def _agent(task: str, **extra) -> dict:
    """A checkpoint's fields that check_fits reads: an agent trained on `task`'s env."""
    features, context = task_features(task)
    return {
        "task": task,
        "obs_spec": {"window": 4, "job_feature_dim": features, "context_dim": context},
        **extra,
    }


def test_a_power_agent_given_to_autoscaling_asks_for_an_autoscaling_checkpoint():
    with pytest.raises(UserError) as err:
        check_fits("p.pt", _agent("power", algo="d3qn"), "autoscaling")
    assert "p.pt holds a d3qn agent of --task power" in str(err.value)
    assert str(err.value).endswith("run it with --task power, or give an autoscaling checkpoint")


def test_a_scorer_given_to_autoscaling_asks_for_an_autoscaling_checkpoint():
    scorer = {"algo": "es", "action_space": {"type": "scores"}}
    with pytest.raises(UserError) as err:
        check_fits("s.pt", scorer, "autoscaling")
    assert str(err.value) == (
        "s.pt holds an es score-round scorer, which schedules jobs; this run is --task autoscaling: give an "
        "autoscaling checkpoint"
    )


def test_a_checkpoint_that_names_no_algo_holds_an_agent():
    agent = _agent("scheduling")
    agent["obs_spec"]["context_dim"] += 1
    with pytest.raises(UserError) as err:
        check_fits("x.pt", agent, "scheduling")
    assert str(err.value).startswith("x.pt holds an agent whose network reads window 4, ")
