"""What each GPU's memory is committed to, from the device samples: every running job's budget (its declaration,
or its buffered peak once it has gone above it), the memory of processes that are not the dispatcher's (held at
their buffered peak while any is there), and each job's peak per GPU and mean utilization.

Rules: a job is known by its process group (each job runs in its own session); a just-launched job reserves its
declaration until its memory appears and afterwards too while it stays within it; a job seen above its
declaration loses trust: from then on its budget is its buffered peak (peak x (1 + BUFFER)). Memory used on a
device that no job of ours holds is external: listed processes that are not ours, plus what the device reports
used beyond every listed process; it is held at its buffered peak until it has gone (then the GPU is idle again).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from dispatch.devices import DeviceSample, pgid_of

BUFFER = 0.10
"""a peak is buffered by 10 %: memory use grows in steps (allocator blocks), a later step may be larger"""
NOISE_MIB = 256
"""unlisted memory below this (driver reservations) does not make a GPU busy; it still counts as used"""


def buffered(mib: float) -> int:
    return math.ceil(mib * (1 + BUFFER))


@dataclass
class JobMemory:
    """One running job's memory as observed: now and peak per device, utilization samples, trust."""

    job: str
    pgid: int
    devices: tuple[int, ...]
    declared_mib: int | None
    trusted: bool = True
    now_mib: dict[int, int] = field(default_factory=dict)
    peak_mib: dict[int, int] = field(default_factory=dict)
    util_sum: float = 0.0
    util_n: int = 0

    @property
    def peak(self) -> int:
        return max(self.peak_mib.values(), default=0)

    def budget_mib(self) -> int | None:
        """What placement counts this job as holding on each of its GPUs (None: it holds them whole)."""
        if self.declared_mib is None:
            return None
        return self.declared_mib if self.trusted else max(self.declared_mib, buffered(self.peak))

    @property
    def util_pct(self) -> float | None:
        return self.util_sum / self.util_n if self.util_n else None


@dataclass(frozen=True)
class Overuse:
    """A job seen above its declaration for the first time."""

    job: str
    device: int
    peak_mib: int
    declared_mib: int


class Ledger:
    """Per device: external memory held and whether an external process is there; per job: JobMemory."""

    def __init__(self, device_indices: tuple[int, ...]):
        self.external_held_mib = {g: 0 for g in device_indices}
        self.external_busy = {g: False for g in device_indices}
        self.used_mib = {g: 0 for g in device_indices}
        self.util_pct: dict[int, float | None] = {g: None for g in device_indices}
        self.jobs: dict[str, JobMemory] = {}
        self._pid_job: dict[int, str] = {}
        """pid -> job of the processes seen in the last sample that were ours (a process that has just ended
        may still be listed, and then has no process group to look up)"""

    def track(self, job: JobMemory) -> None:
        self.jobs[job.job] = job

    def forget(self, job: str) -> JobMemory | None:
        return self.jobs.pop(job, None)

    def observe(self, samples: tuple[DeviceSample, ...]) -> list[Overuse]:
        """Take one sample of every device; the jobs that went above their declaration in it."""
        by_pgid = {m.pgid: m for m in self.jobs.values()}
        pid_job: dict[int, str] = {}
        over: list[Overuse] = []
        for s in samples:
            if s.index not in self.used_mib:
                continue
            self.used_mib[s.index] = s.used_mib
            self.util_pct[s.index] = s.util_pct
            now: dict[str, int] = {}
            peak: dict[str, int] = {}
            listed = external = 0
            present = False
            for p in s.processes:
                listed += p.used_mib
                pg = p.pgid if p.pgid is not None else (None if p.exited else pgid_of(p.pid))
                owner = by_pgid.get(pg) if pg is not None else None
                if owner is None and p.pid in self._pid_job:
                    name = self._pid_job[p.pid]
                    owner = self.jobs.get(name)
                    if owner is None:
                        pid_job[p.pid] = name
                        continue  # an ended job of ours, still listed for a moment
                if owner is not None:
                    pid_job[p.pid] = owner.job
                    now[owner.job] = now.get(owner.job, 0) + p.used_mib
                    peak[owner.job] = peak.get(owner.job, 0) + max(p.peak_mib, p.used_mib)
                elif not p.exited:
                    external += p.used_mib
                    present = True
            for name, mib in now.items():
                m = self.jobs[name]
                m.now_mib[s.index] = mib
                m.peak_mib[s.index] = max(m.peak_mib.get(s.index, 0), peak[name])
                if m.trusted and m.declared_mib is not None and m.peak_mib[s.index] > m.declared_mib:
                    m.trusted = False
                    over.append(Overuse(name, s.index, m.peak_mib[s.index], m.declared_mib))
            ext_now = external + max(0, s.used_mib - listed)
            if present or ext_now >= NOISE_MIB:
                self.external_held_mib[s.index] = max(self.external_held_mib[s.index], buffered(ext_now))
                self.external_busy[s.index] = True
            else:
                self.external_held_mib[s.index] = ext_now
                self.external_busy[s.index] = False
        for m in self.jobs.values():
            utils = [self.util_pct[g] for g in m.devices if self.util_pct.get(g) is not None]
            if utils:
                m.util_sum += sum(utils) / len(utils)
                m.util_n += 1
        self._pid_job = pid_job
        return over
