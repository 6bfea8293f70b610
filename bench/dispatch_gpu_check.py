"""End-to-end check of `--mode dispatch` on a real NVIDIA GPU (NVML): two small torch jobs that declare 10 GiB
each share one GPU by their declarations (both start at once on it), and the peak VRAM the dispatcher reports
for each is within 10 % of torch's own `torch.cuda.max_memory_reserved` (NVML counts the CUDA context too,
which is why the jobs allocate several GiB: the context's few hundred MiB stay under 10 %).

    python bench/dispatch_gpu_check.py [--gpu 0] [--mib 8000] [--seconds 15] [--out logs/dispatch_gpu_check]

Needs an NVIDIA GPU with at least 22 GiB (2 x 10 GiB + the 1 GiB margin), its driver, torch with CUDA and
nvidia-ml-py (requirements.txt). Prints one line per job and PASS or FAIL; exit status 0 on PASS, 1 on FAIL,
2 when there is no GPU to check on.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = 0.10


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gpu", type=int, default=0, help="the GPU index to share (default 0)")
    p.add_argument("--mib", type=int, default=8000, help="MiB each job allocates (default 8000)")
    p.add_argument("--seconds", type=float, default=15.0, help="seconds each job computes (default 15)")
    p.add_argument("--out", default="logs/dispatch_gpu_check", help="work folder (replaced)")
    a = p.parse_args()
    try:
        import pynvml
        import torch
    except ImportError as e:
        print(f"error: {e.name} is not installed (pip install -r requirements.txt)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error: torch sees no CUDA GPU here; this check needs a real NVIDIA GPU", file=sys.stderr)
        return 2
    pynvml.nvmlInit()
    pynvml.nvmlShutdown()
    out = Path(a.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    job = ROOT / "bench" / "dispatch_torch_job.py"
    peaks = [out / f"torch_peak_{k}.json" for k in (1, 2)]
    (out / "jobs.txt").write_text(
        "".join(
            f"[vram=10G est=1m] {sys.executable} {job} --mib {a.mib} --seconds {a.seconds} --out {peak}\n"
            for peak in peaks
        )
    )
    run = out / "run"
    cmd = [
        sys.executable, str(ROOT / "main.py"), "--mode", "dispatch", "--jobs", str(out / "jobs.txt"),
        "--algo", "fcfs", "--gpus", str(a.gpu), "--log_dir", str(run), "--poll_s", "0.2", "--plots", "none",
        "--no_progress",
    ]  # fmt: skip
    print("$ " + " ".join(cmd), flush=True)
    rc = subprocess.run(cmd, cwd=ROOT).returncode
    if rc != 0:
        print(f"FAIL: the dispatcher exited with status {rc}")
        return 1
    with open(run / "dispatch.csv") as f:
        rows = list(csv.DictReader(f))
    ok = len(rows) == 2 and all(r["outcome"] == "ok" for r in rows)
    starts = {r["start_time"] for r in rows}
    shared = len(starts) == 1 and {r["devices"] for r in rows} == {str(a.gpu)}
    print(f"both jobs started at once on GPU {a.gpu} (shared by declaration): {shared}")
    ok &= shared
    for r, peak_file in zip(sorted(rows, key=lambda r: r["line"]), peaks, strict=True):
        torch_mib = json.loads(peak_file.read_text())["max_memory_reserved_mib"]
        reported = float(r["peak_mib"])
        error = abs(reported - torch_mib) / torch_mib
        within = error <= TOLERANCE
        ok &= within
        print(
            f"job {r['job_id']}: dispatcher peak {reported:.0f} MiB, torch max_memory_reserved {torch_mib:.0f} MiB, "
            f"difference {error:.1%} ({'within' if within else 'NOT within'} {TOLERANCE:.0%}), util {r['util_pct']}%"
        )
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
