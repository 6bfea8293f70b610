"""User runtime estimates (requested times) after Tsafrir, Etsion and Feitelson, fitted to the RICC-2010 log.

Tsafrir et al. ("Modeling user runtime estimates", JSSPP 2005; "Backfilling using system-generated
predictions rather than user runtime estimates", IEEE TPDS 2007) found that users request a few round
values, mostly far above the runtime, and that the queue's maximum is the most popular request. Model,
per job, given the runtime it meant to run (`intended_s`):

- with probability UNDER_REQUEST_PROB the user asks for the largest round value below it (such a job hits its
  limit: `--kill_at_estimate` ends it there; a job shorter than the smallest value requests as below); given
  the time each job will hold its GPUs, the under-requesters are drawn among the jobs that will run past such
  a request, so that UNDER_REQUEST_PROB of all jobs do;
- else with probability MAX_REQUEST_PROB the request is the maximum, REQUEST_VALUES_S[-1] (72 h);
- else the request is drawn from the popularity of the other round values restricted to those >= the
  intended runtime (the maximum when none is);
- a request other than an under-requester's that would still be below the intended runtime (a job meant to
  run past the 72 h maximum, which RICC's queue limit excluded but Philly's and ITP's traces hold) is the
  intended runtime rounded up to whole days: only the under-requesters run past their request, in RICC's share.

Values, popularities and both probabilities are measured on swf-pwa/RICC-2010-2.swf.gz (447,792 jobs with a
request): 45.8 % request 72 h, 1.6 % run past their request, median runtime/request 0.0166; the 20 other
values below hold 51.0 % of the requests (the 21 values together 96.8 %).
"""

from __future__ import annotations

import numpy as np

HOUR_S = 3600.0
DAY_S = 24 * HOUR_S
# (requested time in s, share of RICC-2010 jobs requesting it), the maximum last.
REQUEST_POPULARITY = (
    (300.0, 0.0030),
    (600.0, 0.0114),
    (900.0, 0.0201),
    (1200.0, 0.0022),
    (1800.0, 0.0072),
    (1 * HOUR_S, 0.0420),
    (2 * HOUR_S, 0.1265),
    (3 * HOUR_S, 0.0073),
    (4 * HOUR_S, 0.0383),
    (5 * HOUR_S, 0.0418),
    (6 * HOUR_S, 0.0244),
    (8 * HOUR_S, 0.0252),
    (10 * HOUR_S, 0.0126),
    (12 * HOUR_S, 0.0940),
    (15 * HOUR_S, 0.0035),
    (18 * HOUR_S, 0.0027),
    (20 * HOUR_S, 0.0077),
    (24 * HOUR_S, 0.0311),
    (30 * HOUR_S, 0.0022),
    (48 * HOUR_S, 0.0063),
    (72 * HOUR_S, 0.4583),
)
REQUEST_VALUES_S = np.array([v for v, _ in REQUEST_POPULARITY])
MAX_REQUEST_S = float(REQUEST_VALUES_S[-1])
MAX_REQUEST_PROB = 0.458  # RICC: 205,241 of 447,792 jobs request 72 h
UNDER_REQUEST_PROB = 0.016  # RICC: 7,092 of 447,792 jobs ran longer than they requested
RICC_MEDIAN_ACCURACY = 0.0166  # RICC: median of runtime / requested time
RICC_SHARE_MAX_REQUEST = 0.4583  # RICC: share of jobs requesting 72 h
MAX_UNDER_PROB = 0.5  # cap on the under-request probability of the jobs that can run past their request


def requested_times_s(
    intended_s: np.ndarray, rng: np.random.Generator, held_s: np.ndarray | None = None
) -> np.ndarray:
    """One round requested time per job (see the module docstring); draws two uniforms per job.

    With `held_s` (the time each job will hold its GPUs, <= intended_s: a failed or cancelled job stops early)
    the under-requesters are drawn among the jobs that would then run past their request, with the probability
    that makes UNDER_REQUEST_PROB of all jobs do so, as on RICC (a job shorter than the smallest value, or one
    that stops before the value below its intended runtime, cannot)."""
    under_prob: float | np.ndarray = UNDER_REQUEST_PROB
    if held_s is not None:
        below = np.searchsorted(REQUEST_VALUES_S, intended_s, side="left") - 1
        can = (below >= 0) & (held_s > REQUEST_VALUES_S[np.maximum(below, 0)])
        share = float(np.mean(can))
        under_prob = np.where(can, min(UNDER_REQUEST_PROB / share, MAX_UNDER_PROB) if share > 0 else 0.0, 0.0)
    return request_from_uniforms(
        intended_s, rng.random(intended_s.size), rng.random(intended_s.size), under_prob
    )


def request_from_uniforms(
    intended_s: np.ndarray,
    u_kind: np.ndarray,
    u_value: np.ndarray,
    under_prob: float | np.ndarray = UNDER_REQUEST_PROB,
) -> np.ndarray:
    """The requests for given uniforms in [0, 1): u_kind picks under (below `under_prob`, per job or for all) /
    maximum / popular, u_value the value."""
    weights = np.array([w for _, w in REQUEST_POPULARITY[:-1]])
    values = REQUEST_VALUES_S[:-1]
    # Popularity restricted to values >= intended: inverse CDF over the suffix of the (sorted) values.
    first = np.searchsorted(values, intended_s, side="left")  # index of the smallest value >= intended
    suffix_mass = np.concatenate((np.cumsum(weights[::-1])[::-1], [0.0]))  # mass of values[i:]
    cum = np.concatenate(([0.0], np.cumsum(weights)))  # mass of values[:i]
    target = cum[first] + u_value * suffix_mass[first]
    pick = np.minimum(np.searchsorted(cum, target, side="right") - 1, values.size - 1)
    request = np.where(first < values.size, values[pick], MAX_REQUEST_S)
    wants_max = (u_kind >= under_prob) & (u_kind < under_prob + MAX_REQUEST_PROB)
    request = np.where(wants_max, MAX_REQUEST_S, request)
    below = np.searchsorted(REQUEST_VALUES_S, intended_s, side="left") - 1  # largest value < intended
    under = (u_kind < under_prob) & (below >= 0)
    request = np.where(request < intended_s, np.ceil(intended_s / DAY_S) * DAY_S, request)
    return np.where(under, REQUEST_VALUES_S[np.maximum(below, 0)], request)
