"""Bad input as a user types it: one `error:` line naming the problem, exit 2, no traceback, nothing written.

Each row is (argv, files written to tmp_path, expected fragment of the error). `{tmp}` in argv is tmp_path.
Every run is guarded by an alarm: a value that once made the simulator hang (NaN time scale, NaN multi-node
factor) must be refused before any simulation starts, so each case finishes in well under a second.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from main import main

JOBS = "arrival_time,runtime,gpus\n0,100,1\n10,50,2\n"
SPANNING_JOBS = "arrival_time,runtime,gpus\n0,100,16\n"  # 16 GPUs: spans two 8-GPU nodes
CLUSTER = "node_id,gpu_type,num_gpus\na,A100,8\nb,A100,8\n"


def _swf_line(job: int, submit: int, run: int, procs: int) -> str:
    fields = [job, submit, 0, run, procs, -1, -1, -1, -1, -1, 1, 1, 1, -1, 1, -1, -1, -1]
    return " ".join(str(v) for v in fields) + "\n"


SWF = "; MaxNodes: 16\n; MaxProcs: 16\n" + "".join(_swf_line(i, 10 * i, 100, 1 + i % 4) for i in range(1, 6))
ITP = "job_id,submission_time,duration,num_gpu\na,0,100,1\nb,5,100,2\n"
CSV = ["--workload_type", "csv", "--workload_path", "{tmp}/jobs.csv"]
MATRIX_NO_K80 = '{"v100": {"(\'M\', 1)": {"null": 2.0}}}'  # one model, one GPU, no k80 column
JOBS_TYPED = "arrival_time,runtime,gpus,job_type\n0,100,1,{model}\n"
TRACE = ["--workload_type", "swf", "--workload_path", "{tmp}/t.swf"]
SMALL = ["--difficulty", "easy", "--num_jobs", "5"]

CASES = [
    # --- jobs CSV: unknown and duplicate columns (silently ignored before) --------------------------------------
    (
        CSV,
        {"jobs.csv": "arrival_time,runtime,gpus,gpu_type\n0,100,1,H100\n"},
        "jobs.csv:1: unknown column(s) 'gpu_type' (did you mean gpu_types?); accepted columns: arrival_time,",
    ),
    (CSV, {"jobs.csv": "arrival_time,runtime,gpus,mem_gb\n0,100,1,70\n"}, "unknown column(s) 'mem_gb'"),
    (CSV, {"jobs.csv": "arrival_time,runtime,gpus,colour\n0,100,1,red\n"}, "'colour'; accepted columns"),
    (
        CSV,
        {"jobs.csv": "arrival_time,runtime,gpus,gpus\n0,100,1,4\n"},
        "jobs.csv:1: duplicate column(s) gpus",
    ),
    # --- a run in which every job is rejected: no NaN metrics, exit 2 -----------------------------------------
    (
        [*CSV, "--cluster", "1xA100:8"],
        {"jobs.csv": "arrival_time,runtime,gpus\n0,100,64\n5,100,16\n"},
        "all 2 jobs are rejected: none can ever fit the cluster 1xA100:8 (8 GPUs)",
    ),
    # --- cluster CSV --------------------------------------------------------------------------------------------
    (
        [*CSV, "--cluster_path", "{tmp}/c.csv"],
        {"jobs.csv": JOBS, "c.csv": "node_id,gpu_type,num_gpus\na,A100,8\nb,V100,4\na,H100,8\n"},
        "c.csv:4: duplicate node_id 'a' (first on line 2)",
    ),
    *[
        (
            [*CSV, "--cluster_path", "{tmp}/c.csv"],
            {
                "jobs.csv": JOBS,
                "c.csv": f"node_id,gpu_type,num_gpus,gpu_mem_gb\na,A100,8,80\nb,A100,8,{mem}\n",
            },
            f"c.csv:3: gpu_mem_gb must be a finite number > 0, got '{mem}'",
        )
        for mem in ("nan", "inf", "0", "-40")
    ],
    # --- non-UTF-8 input, named by file and line ----------------------------------------------------------------
    (CSV, {"jobs.csv": b"arrival_time,runtime,gpus\n0,100,1\n5,100,1 \xff\n"}, "jobs.csv:3: not UTF-8 text"),
    (
        [*CSV, "--cluster_path", "{tmp}/c.csv"],
        {"jobs.csv": JOBS, "c.csv": b"node_id,gpu_type,num_gpus\nn\xe9ud,A100,8\n"},
        "c.csv:2: not UTF-8 text (byte 0xe9",
    ),
    (
        TRACE,
        {"t.swf": SWF.encode() + b"; caf\xe9\n" + _swf_line(9, 90, 10, 1).encode()},
        "t.swf:8: not UTF-8",
    ),
    (
        ["--workload_type", "itp", "--workload_path", "{tmp}/i.csv"],
        {"i.csv": ITP.encode() + b"c\xff,9,100,1\n"},
        "i.csv:4: not UTF-8 text",
    ),
    # --- options the run would ignore ---------------------------------------------------------------------------
    *[
        (args, {}, f"{args[0]} has no effect on this run (trace options; the workload is synthetic)")
        for args in (
            ["--max_jobs", "5"],
            ["--trace_start", "0"],
            ["--trace_end", "10"],
            ["--time_scale", "2"],
            ["--time_scale", "1"],  # typed with its default value: still an option this run ignores
            ["--exclude_failed"],
            ["--round_fractional"],
            ["--cpu_job_gpus", "2"],
            ["--recorded_gpu_type", "V100"],
        )
    ],
    (
        [*CSV, "--max_jobs", "1"],
        {"jobs.csv": JOBS},
        "--max_jobs has no effect on this run (trace options; the",
    ),
    ([*TRACE, "--load_factor", "2"], {"t.swf": SWF}, "synthetic generator only"),
    (
        [*TRACE, "--google_unit", "job"],
        {"t.swf": SWF},
        "--google_unit has no effect on this run (it maps the google trace; the workload is swf)",
    ),
    (
        [*CSV, "--synthetic_profile", "helios"],
        {"jobs.csv": JOBS},
        "--synthetic_profile has no effect on this run (the synthetic generator's option; the workload is csv)",
    ),
    (
        [*TRACE, "--difficulty", "hard"],
        {"t.swf": SWF},
        "--difficulty has no effect on this run (a trace brings",
    ),
    (
        ["--workload_type", "itp", "--workload_path", "{tmp}/i.csv", "--cpu_job_gpus", "2"],
        {"i.csv": ITP},
        "--cpu_job_gpus has no effect on this run (it maps the CPU-only traces google, alibaba, alibaba-2017, swf)",
    ),
    (
        ["--workload_type", "itp", "--workload_path", "{tmp}/i.csv", "--exclude_failed"],
        {"i.csv": ITP},
        "--exclude_failed has no effect on this run (the itp trace records no job status, so no job is failed)",
    ),
    (
        [*TRACE, "--uniform_speed", "--recorded_gpu_type", "V100"],
        {"t.swf": SWF},
        "--recorded_gpu_type has no effect on this run (with --uniform_speed every GPU type runs at speed 1)",
    ),
    (
        [*CSV, "--cluster", "1xA100:8", "--difficulty", "hard"],
        {"jobs.csv": JOBS},
        "--difficulty has no effect",
    ),
    (
        ["--seeds", "1,2"],
        {},
        "--seeds has no effect on this run (--mode compare only; --mode eval runs --algo",
    ),
    (["--algos", "fcfs,sjf"], {}, "--algos has no effect on this run (--mode compare only"),
    (
        ["--mode", "compare", "--algo", "sjf"],
        {},
        "--algo has no effect on this run (--mode compare runs every",
    ),
    (["--mode", "compare", "--seeds", "1,2", "--seed", "3"], {}, "--seed has no effect on this run"),
    (
        ["--checkpoint", "{tmp}/m.pt"],
        {"m.pt": ""},
        "--checkpoint has no effect on this run (agent options; no RL",
    ),
    (["--model", "best"], {}, "--model has no effect on this run (agent options"),
    (["--mode", "compare", "--window", "8"], {}, "--window has no effect on this run (agent options"),
    (["--algo", "sjf", "--gate_s", "60"], {}, "--gate_s has no effect on this run (sjf_gate's gate"),
    (["--algo", "sjf_gate", "--gate_s", "-1"], {}, "--gate_s must be >= 0 seconds, got -1.0"),
    (["--algo", "sjf_gate", "--gate_s", "nan"], {}, "--gate_s must be >= 0 seconds, got nan"),
    (
        ["--algo", "sjf", "--round_s", "60"],
        {},
        "--round_s has no effect on this run (the length of the score rounds of las_speed, cem and es, none",
    ),
    *[
        (
            ["--algo", "las_speed", "--round_s", v],
            {},
            f"--round_s must be a finite number of seconds > 0, got {v}",
        )
        for v in ("0.0", "-5.0", "nan", "inf")
    ],
    (
        ["--total_steps", "100"],
        {},
        "--total_steps has no effect on this run (training options; this is --mode",
    ),
    *[
        (args, {}, f"{args[0]} has no effect on this run (training options")
        for args in (
            ["--resume", "x.pt"],
            ["--reward", "slowdown"],
            ["--demo_policy", "none"],
            ["--validation_seeds", "1,2"],
            ["--checkpoint_every", "5"],
        )
    ],
    (
        ["--mode", "train", "--algo", "d3qn", "--checkpoint", "x.pt"],
        {},
        "--checkpoint has no effect on this run (training starts fresh or continues with --resume",
    ),
    (
        ["--mode", "eval", "--algo", "d3qn", "--checkpoint", "x.pt", "--model", "best"],
        {},
        "--model has no effect",
    ),
    (["--workload_path", "{tmp}/jobs.csv"], {"jobs.csv": JOBS}, "--workload_path needs --workload_type"),
    # --- every float option finite and in range (NaN once hung the simulator) ------------------------------
    *[
        (
            [*TRACE, "--time_scale", v],
            {"t.swf": SWF},
            f"--time_scale must be between 1e-06 and 1e+06 (arrival times are divided by it), got {v}",
        )
        for v in ("nan", "inf", "0.0", "-1.0", "1e-320", "1e+300")
    ],
    *[
        (
            [*CSV, "--cluster", "2xA100:8", f"--multi_node_factor={v}"],
            {"jobs.csv": SPANNING_JOBS},
            "--multi_node_factor must be between 1 (a job never runs faster across nodes) and 100",
        )
        for v in ("nan", "inf", "-inf", "0.5", "1000")
    ],
    *[
        ([f"--load_factor={v}"], {}, "--load_factor must be between 0.001 and 100")
        for v in ("inf", "nan", "0", "-1", "1e-308", "1000")
    ],
    ([*TRACE, "--trace_start", "nan"], {"t.swf": SWF}, "--trace_start must be a finite number of seconds"),
    ([*TRACE, "--trace_end", "inf"], {"t.swf": SWF}, "--trace_end must be a finite number of seconds"),
    ([*TRACE, "--trace_start", "10", "--trace_end", "5"], {"t.swf": SWF}, "--trace_end (5) must be after"),
    ([*TRACE, "--trace_start", "10", "--trace_end", "10"], {"t.swf": SWF}, "--trace_end (10) must be after"),
    # --- integers and lists -------------------------------------------------------------------------------------
    (["--seed", "-1"], {}, "--seed must be >= 0"),
    (["--num_jobs", "0"], {}, "--num_jobs must be > 0"),
    ([*TRACE, "--max_jobs", "0"], {"t.swf": SWF}, "--max_jobs must be > 0"),
    ([*TRACE, "--max_jobs", "-3"], {"t.swf": SWF}, "--max_jobs must be > 0"),
    ([*TRACE, "--cpu_job_gpus", "0"], {"t.swf": SWF}, "--cpu_job_gpus must be > 0"),
    (["--mode", "eval", "--algo", "d3qn", "--window", "0"], {}, "--window must be > 0"),
    (["--mode", "compare", "--seeds", "1,1"], {}, "--seeds lists 1 more than once; give each seed once"),
    (["--mode", "compare", "--algos", ","], {}, "--algos names no algorithm; choose from fcfs, sjf, easy"),
    (
        ["--workload_type", "swf", "--workload_path", "{tmp}/d"],
        {"d/t.swf": SWF},
        "--workload_path {tmp}/d: is a folder; --workload_type swf reads a file here",
    ),
    (
        ["--workload_type", "swf", "--workload_path", "{tmp}/t.swf.gz"],
        {"t.swf.gz": b"not gzip"},
        "t.swf.gz: ",
    ),
    (["--mode", "compare", "--algos", "foo,fcfs"], {}, "unknown --algos foo; choose from fcfs, sjf, easy"),
    (
        ["--mode", "train", "--algo", "sac", "--total_steps", "0"],
        {},
        "--total_steps must be > 0 env steps, got 0",
    ),
    (
        ["--mode", "train", "--algo", "es", "--total_steps", "0"],
        {},
        "--total_steps must be > 0 generations, got 0",
    ),
    (
        [*TRACE, "--trace_start", "1e9"],
        {"t.swf": SWF},
        "has no jobs after filtering (5 outside window); check --trace_start/--trace_end",
    ),
    (["--mode", "train", "--algo", "sac", "--checkpoint_every", "0"], {}, "--checkpoint_every must be > 0"),
    (
        ["--mode", "train", "--algo", "sac", "--validation_seeds", "3,-1"],
        {},
        "--validation_seeds must be >= 0",
    ),
    (
        ["--mode", "train", "--algo", "sac", "--validation_seeds", "3,3"],
        {},
        "--validation_seeds lists 3 more",
    ),
    (["--mode", "train", "--algo", "sac", "--seed", "-2"], {}, "--seed must be >= 0"),
    (["--mode", "train", "--algo", "sac", "--seeds", "1,2"], {}, "--seeds has no effect on this run"),
    (["--mode", "compare", "--seeds", "0,-2"], {}, "--seeds must be >= 0"),
    (["--mode", "compare", "--seeds", ","], {}, "--seeds lists no seed"),
    (["--mode", "compare", "--algos", "fcfs,sjf,fcfs"], {}, "--algos names fcfs more than once"),
    # --- preemption -------------------------------------------------------------------------------------------
    (
        ["--algo", "srtf", "--preempt_overhead_s", "-1"],
        {},
        "--preempt_overhead_s must be between 0 and 86400",
    ),
    (["--algo", "tiresias", "--preempt_overhead_s", "nan"], {}, "--preempt_overhead_s must be between 0 and"),
    (
        ["--algo", "srtf", "--preempt_overhead_s", "1e9"],
        {},
        "--preempt_overhead_s must be between 0 and 86400",
    ),
    (
        ["--algo", "easy", "--preempt_overhead_s", "30"],
        {},
        "--preempt_overhead_s has no effect on this run (only the preemptive policies (gavel, gavel_agnostic, "
        "gavel_fifo, gavel_fifo_perf, gavel_original, gavel_original_agnostic, las_speed, srtf, themis, "
        "tiresias, "
        "tiresias_original, cem, es) preempt",
    ),
    # --- the replays of the authors' simulators have every node on and see every job ----------------------------
    (
        ["--algo", "gavel_original", "--power", "idle_off:600", *SMALL],
        {},
        "--power idle_off:600:2 switches nodes off or holds jobs back; gavel_original replays the authors' simulators",
    ),
    (
        [
            "--mode",
            "compare",
            "--algos",
            "fcfs,tiresias_original,gavel_fifo",
            "--power",
            "always_on,price_aware:3600",
            *SMALL,
        ],
        {},
        "--power price_aware:3600:600:2 switches nodes off or holds jobs back; tiresias_original, gavel_fifo replay the",
    ),
    (
        ["--mode", "compare", "--algos", "fcfs,sjf", "--preempt_overhead_s", "30"],
        {},
        "this run has fcfs, sjf",
    ),
    # --- empty strings that used to fall back to a default silently ---------------------------------------------
    (["--cluster", ""], {}, "empty --cluster; expected COUNTxTYPE:GPUS_PER_NODE"),
    ([*CSV, "--cluster_path", ""], {"jobs.csv": JOBS}, "--cluster_path is empty"),
    (["--workload_type", "csv", "--workload_path", ""], {}, "--workload_path is empty"),
    (["--log_dir", ""], {}, "--log_dir is empty"),
    ([*CSV[:-1], "{tmp}/d"], {"d/x": ""}, "--workload_path {tmp}/d: is a folder; a jobs CSV is one file"),
    (
        [*CSV, "--cluster_path", "{tmp}/d"],
        {"jobs.csv": JOBS, "d/x": ""},
        "--cluster_path {tmp}/d: is a folder",
    ),
    # --- --job_types throughput matrices (sim/throughput.py) -----------------------------------------------------
    (
        [*CSV, "--cluster", "1xK80:4", "--job_types", "{tmp}/m.json"],
        {"jobs.csv": JOBS, "m.json": MATRIX_NO_K80},
        "{tmp}/m.json: no worker type 'k80' (needed for GPU type K80); the file has 'v100'",
    ),
    (
        [*CSV, "--cluster", "1xV100:4", "--job_types", "{tmp}/m.json"],
        {"jobs.csv": JOBS_TYPED.format(model="Nope"), "m.json": MATRIX_NO_K80},
        "{tmp}/m.json: unknown job type 'Nope'; the file has 'M' (job 0 of workload 'jobs.csv')",
    ),
    (  # the p100 column lacks the job's key (the GPU type is there, the entry for this model is not)
        [*CSV, "--cluster", "1xV100:4,1xP100:4", "--job_types", "{tmp}/m.json"],
        {
            "jobs.csv": JOBS_TYPED.format(model="M"),
            "m.json": '{"v100": {"(\'M\', 1)": {"null": 2.0}}, "p100": {"(\'N\', 1)": {"null": 1.0}}}',
        },
        "{tmp}/m.json: worker type 'p100' has no entry \"('M', 1)\" (job 0 of workload 'jobs.csv')",
    ),
    (
        [*CSV, "--cluster", "1xV100:4", "--job_types", "{tmp}/m.json"],
        {"jobs.csv": JOBS_TYPED.format(model="M"), "m.json": '{"v100": {"(\'M\', 2)": {"null": 2.0}}}'},
        "{tmp}/m.json: job type 'M' has no entry for 1 GPU(s) or fewer (scales (2,))",
    ),
    (
        [*CSV, "--cluster", "1xV100:4", "--job_types", "{tmp}/m.json"],
        {"jobs.csv": JOBS, "m.json": '{"v100": {"M": {"null": 1}}}'},
        "{tmp}/m.json: 'v100': job key 'M' is not \"('<model>', <GPUs >= 1>)\"",
    ),
    (
        [*CSV, "--cluster", "1xV100:4", "--job_types", "{tmp}/m.json"],
        {"jobs.csv": JOBS, "m.json": '{"v100": {"(\'M\', 1)": {"null": -2}}}'},
        "throughput -2 is not a number >= 0",
    ),
    (
        [*CSV, "--job_types", "{tmp}/none.json"],
        {"jobs.csv": JOBS},
        "--job_types {tmp}/none.json: no such file",
    ),
    (
        [*CSV, "--cluster", "1xV100:4"],
        {"jobs.csv": JOBS_TYPED.format(model="M")},
        "gives jobs a job_type; add --job_types",
    ),
    ([*SMALL, "--job_types", "gavel", "--uniform_speed"], {}, "--job_types gives each job its own speed"),
    (
        [*TRACE, "--job_types", "gavel"],
        {"t.swf": SWF},
        "--job_types works with synthetic and jobs CSV workloads",
    ),
    # --- power model and price files -----------------------------------------------------------------------
    ([*SMALL, "--power", "idle_off"], {}, "--power: power manager 'idle_off': expected idle_off:T[:R]"),
    ([*SMALL, "--power", "sleepy"], {}, "unknown power manager 'sleepy'"),
    ([*SMALL, "--power", "idle_off:-5"], {}, "times and reserve must be finite and >= 0"),
    ([*SMALL, "--power", "idle_off:600:1.5"], {}, "the reserve R is a whole number of nodes"),
    ([*SMALL, "--power", "always_on,idle_off:600"], {}, "--mode eval runs one power manager"),
    (["--mode", "compare", *SMALL, "--power", "idle_off:600,idle_off:600:2"], {}, "more than once"),
    ([*SMALL, "--prices", "{tmp}/p.csv"], {"p.csv": "timestamp,price\n0,1\n"}, "--prices need a power model"),
    ([*SMALL, "--power", "always_on", "--pue", "0.5"], {}, "--pue must be between 1 and 10"),
    (["--mode", "eval", "--algo", "d3qn", "--power", "idle_off:600"], {}, "needs a heuristic scheduler"),
    (
        [*SMALL, "--power", "always_on", "--prices", "{tmp}/p.csv"],
        {"p.csv": "timestamp,price\n0,10\n3600,20\n10800,30\n"},
        "p.csv:4: a gap: 7200 s after the previous row (step 3600 s)",
    ),
    (
        [*SMALL, "--power", "always_on", "--prices", "{tmp}/p.csv"],
        {"p.csv": "timestamp,price\n0,10\n3600,20\n1800,30\n"},
        "p.csv:4: timestamp 1800 is not after the previous row's",
    ),
    (
        [*SMALL, "--power", "always_on", "--prices", "{tmp}/p.csv"],
        {"p.csv": "timestamp,price\n0,10\n3600,-1\n"},
        "p.csv:3: price -1 must be a finite number >= 0",
    ),
    (
        [*SMALL, "--power", "always_on", "--prices", "{tmp}/p.csv"],
        {"p.csv": "timestamp,price,carbon\n0,10,300\n3600,20,\n"},
        "p.csv:3: missing carbon value",
    ),
    (
        [*SMALL, "--power", "always_on", "--prices", "{tmp}/p.csv"],
        {"p.csv": "timestamp,price_eur_per_kwh\n0,0.1\n3600,0.2\n"},
        "p.csv:1: wrong units in column 'price_eur_per_kwh'",
    ),
    (
        [*SMALL, "--power", "always_on", "--prices", "{tmp}/none.csv"],
        {},
        "none.csv: cannot read the price file",
    ),
    # --- PPO, training mixtures, reports -------------------------------------------------------------------------
    (
        ["--mode", "train", "--algo", "ppo", "--demo_policy", "sjf", *SMALL],
        {},
        "--demo_policy sjf: ppo learns from its own rollouts only; use --demo_policy none",
    ),
    (
        ["--mode", "train", "--algo", "d3qn", "--num_envs", "2", *SMALL],
        {},
        "--num_envs has no effect on this run (options of --algo ppo's vectorized envs; this trains d3qn)",
    ),
    (["--mode", "train", "--algo", "ppo", "--num_envs", "0", *SMALL], {}, "--num_envs must be > 0, got 0"),
    (
        ["--mode", "train", "--algo", "ppo", "--train_mix", "synthetic", "--cluster", "2xA100:8"],
        {},
        "--train_mix synthetic draws the clusters itself; remove --cluster/--cluster_path",
    ),
    (
        ["--mode", "train", "--algo", "ppo", "--train_mix", "synthetic+traces"],
        {},
        "--train_mix synthetic+traces needs --train_windows FORMAT=PATH[@CLUSTER],...",
    ),
    (
        [
            "--mode",
            "train",
            "--algo",
            "ppo",
            "--train_mix",
            "synthetic+traces",
            "--train_windows",
            "itp:a.csv",
        ],
        {},
        "--train_windows 'itp:a.csv': expected FORMAT=PATH[@CLUSTER][#MAX_JOBS] with FORMAT one of",
    ),
    (
        [
            "--mode",
            "train",
            "--algo",
            "ppo",
            "--train_mix",
            "synthetic+traces",
            "--train_windows",
            "itp={tmp}/no.csv",
        ],
        {},
        "--train_windows itp={tmp}/no.csv: no such file or directory {tmp}/no.csv",
    ),
    (
        ["--mode", "train", "--algo", "ppo", "--train_windows", "itp=a.csv"],
        {},
        "--train_windows has no effect without --train_mix synthetic+traces",
    ),
    (["--train_mix", "synthetic"], {}, "--train_mix has no effect on this run (training options"),
    (["--report_sets", "medium"], {}, "--report_sets has no effect on this run (--mode report options"),
    (
        ["--mode", "report", "--algo", "sjf"],
        {},
        "--algo has no effect on this run (--mode report evaluates every",
    ),
    (["--mode", "report", "--report_workers", "0"], {}, "--report_workers must be > 0, got 0"),
    (
        ["--mode", "report", "--report_sets", "medium,foo", "--models_dir", "{tmp}"],
        {},
        "--report_sets: unknown set(s) foo; choose from medium, hard, clusters, gavel, itp, google, swf",
    ),
    (
        ["--mode", "report", "--report_sets", "itp", "--models_dir", "{tmp}"],
        {},
        "--report_sets itp read traces: give --traces_dir",
    ),
    (
        ["--mode", "report", "--models_dir", "{tmp}/none"],
        {},
        "--models_dir {tmp}/none: no <algo>_seed<S>_final.pt or _best.pt to report on",
    ),
    # --- output folders unusable -----------------------------------------------------------------------------
    (["--log_dir", "{tmp}/f.txt"], {"f.txt": "x"}, "--log_dir {tmp}/f.txt: is a file, not a folder"),
    (["--log_dir", "{tmp}/f.txt/run"], {"f.txt": "x"}, "f.txt is a file, not a folder"),
    # --- node-management tasks (--task power | autoscaling) -------------------------------------------------------
    (
        ["--task", "power", "--algo", "easy"],
        {},
        "--task power: --algo must be d3qn, sac, ppo or a node manager",
    ),
    (["--task", "power", "--algo", "idle_off:soon"], {}, "bad node manager 'idle_off:soon'"),
    (
        ["--task", "power", "--algo", "always_on", "--recheck_s", "nan"],
        {},
        "--recheck_s must be a finite number",
    ),
    (["--task", "power", "--algo", "always_on", "--jct_weight", "-0.5"], {}, "--jct_weight must be a finite"),
    (["--task", "autoscaling", "--algo", "always_on", *SMALL], {}, "--autoscale_preset sets the autoscaling"),
    (["--task", "scheduling", "--autoscale_preset", "hard"], {}, "options of --task power and autoscaling"),
    (["--mode", "compare", "--task", "autoscaling"], {}, "--task autoscaling runs in --mode train or eval"),
    (
        ["--task", "power", "--algo", "always_on", "--power", "always_on"],
        {},
        "--power has no effect with --task",
    ),
    (
        ["--task", "autoscaling", "--algo", "always_on", "--pue", "1.2"],
        {},
        "no effect with --task autoscaling",
    ),
    (
        ["--task", "power", "--algo", "always_on", "--prices", "{tmp}/p.csv"],
        {"p.csv": "timestamp,price\n0,50\n3600,-1\n"},
        "p.csv:3: price -1 must be a finite number >= 0",
    ),
    (
        ["--mode", "train", "--task", "power", "--algo", "d3qn", "--demo_policy", "sjf"],
        {},
        "--demo_policy must be a node manager or none",
    ),
]


@pytest.fixture
def alarm():
    """Fail a case that runs longer than 30 s instead of hanging the suite (validation comes before any work)."""

    def expire(signum, frame):
        raise TimeoutError("no error before the simulation started: the run hung or ran")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(30)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _run(argv: list[str], files: dict, tmp_path, capsys) -> tuple[int, str]:
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    if "--log_dir" not in args:
        args += ["--log_dir", str(tmp_path / "out")]
    code = main(["--no_progress", *args])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("argv", "files", "message"), CASES, ids=lambda x: None)
def test_bad_input_is_one_error_line_and_exit_2(argv, files, message, tmp_path, capsys, alarm):
    code, err = _run(argv, files, tmp_path, capsys)
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert message.replace("{tmp}", str(tmp_path)) in lines[0]
    assert not (tmp_path / "out").exists()  # refused before any output was written


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seed", "abc"], "error: argument --seed: invalid int value: 'abc'"),
        (["--multi_node_factor"], "error: argument --multi_node_factor: expected one argument"),
        (["--mode", "play"], "error: argument --mode: invalid choice: 'play'"),
        (["--seeds", "1,x"], "error: argument --seeds: expected comma-separated integers, got '1,x'"),
        (["--frobnicate"], "error: unrecognized arguments: --frobnicate"),
        (
            ["--task", "power", "--task_scheduler", "gavel_fifo"],
            "error: argument --task_scheduler: invalid choice: 'gavel_fifo'",
        ),
    ],
)
def test_parser_mistakes_are_one_error_line_too(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    [line] = err.splitlines()
    assert line.startswith(message) and line.endswith("(python main.py --help lists the options)")


def test_unwritable_log_dir_is_refused_up_front(tmp_path, capsys, monkeypatch, alarm):
    """Whatever makes the folder unwritable (permissions, a read-only mount): the probe file cannot be made."""
    import cli.checks as cli_checks

    def refuse(**kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cli_checks.tempfile, "mkstemp", refuse)
    code, err = _run(["--log_dir", str(tmp_path / "run")], {}, tmp_path, capsys)
    assert code == 2 and "Traceback" not in err
    assert err.strip() == f"error: --log_dir {tmp_path}/run: cannot write in {tmp_path} (Permission denied)"
    assert not (tmp_path / "run").exists()


def test_read_only_log_dir_is_refused_up_front(tmp_path, capsys, alarm):
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        code, err = _run(["--log_dir", str(locked / "run")], {}, tmp_path, capsys)
    finally:
        locked.chmod(0o755)
    assert code == 2 and "cannot write in" in err and "Traceback" not in err


def test_harmless_ignored_option_is_one_warning_line(tmp_path, capsys):
    code, err = _run([*SMALL, "--device", "cpu", "--models_dir", str(tmp_path)], {}, tmp_path, capsys)
    assert code == 0
    assert err.strip().splitlines() == ["warning: --device, --models_dir ignored: no RL agent runs"]


def test_cluster_csv_saved_by_excel_with_a_bom_is_read(tmp_path, capsys):
    code, err = _run(
        [*CSV, "--cluster_path", "{tmp}/c.csv"],
        {"jobs.csv": JOBS, "c.csv": "\ufeff" + CLUSTER},
        tmp_path,
        capsys,
    )
    assert code == 0, err
    assert (tmp_path / "out" / "cluster.csv").read_text().splitlines()[1].startswith("a,A100-80GB,8,")


def _swf_with_outlier(header: str) -> str:
    """300 jobs of 1-8 processors, 10 s apart, 100 s each, then one row asking 100,000 processors."""
    lines = [_swf_line(i, 10 * i, 100, 1 << (i % 4)) for i in range(1, 301)]
    return header + "".join(lines) + _swf_line(301, 3010, 100, 100_000)


@pytest.mark.parametrize(
    ("header", "cluster_gpus"),
    [
        # header machine: 16 nodes x 1 processor; it stays the cluster and the outlier is rejected
        ("; MaxNodes: 16\n; MaxProcs: 16\n", 16),
        # no header: 8-GPU reference nodes sized without the outlier: 2 x the largest other job (8) = 16 GPUs;
        # load: 300 jobs x 3.75 GPUs x 100 s / (2990 s window x 0.8) = 47.03 -> 48 GPUs = 6 nodes
        ("", 48),
    ],
)
def test_one_huge_swf_row_does_not_size_the_default_cluster(header, cluster_gpus, tmp_path, capsys):
    code, err = _run(TRACE, {"t.swf": _swf_with_outlier(header)}, tmp_path, capsys)
    assert code == 0, err
    report = json.loads((tmp_path / "out" / "workload_report.json").read_text())
    assert report["cluster_gpus"] == cluster_gpus
    assert report["jobs_loaded"] == 301
    assert report["filtered"]["cannot fit the cluster"] == 1
    summary = (tmp_path / "out" / "summary.csv").read_text().splitlines()
    row = dict(zip(summary[0].split(","), summary[1].split(","), strict=True))
    assert (row["completed"], row["rejected"]) == ("300", "1")
    assert float(row["gpu_utilization"]) > 0.1  # not the ~0 of a 200,000-GPU cluster


def test_outlier_rule_by_hand():
    """Outliers ask more than 64 x the 99th-percentile demand of the other jobs (lower empirical quantile)."""
    from sim.job import Job
    from workloads.traces.common import sizing_outliers

    def jobs(demands):
        return tuple(Job(str(i), float(i), 10.0, g) for i, g in enumerate(demands))

    # a small log: the largest job is left out of the quantile, so one huge row cannot vouch for itself
    assert sizing_outliers(jobs([1] * 98 + [100_000])) == 64
    assert sizing_outliers(jobs([1] * 50 + [100_000])) == 64
    assert sizing_outliers(jobs([4, 8, 16, 128])) is None  # 128 <= 64 x 16
    assert sizing_outliers(jobs([1, 1, 1, 65])) == 64
    assert sizing_outliers(jobs([100_000])) is None  # a lone job has nothing to be compared with
    # 201 jobs: 99th percentile = the 199th smallest = 1 -> limit 64; a 65-GPU job is an outlier, 64 is not
    assert sizing_outliers(jobs([1] * 200 + [65])) == 64
    assert sizing_outliers(jobs([1] * 200 + [64])) is None


SERVE_CASES = [
    # (argv, expected error line): --mode serve takes only its own options, each checked before listening
    (["--mode", "serve", "--port", "0"], "error: --port must be between 1 and 65535, got 0"),
    (["--mode", "serve", "--port", "70000"], "error: --port must be between 1 and 65535, got 70000"),
    (["--mode", "serve", "--max_sessions", "0"], "error: --max_sessions must be >= 1, got 0"),
    (
        ["--mode", "serve", "--session_ttl_s", "nan"],
        "error: --session_ttl_s must be a finite number of seconds > 0",
    ),
    (
        ["--mode", "serve", "--session_ttl_s", "-5"],
        "error: --session_ttl_s must be a finite number of seconds > 0",
    ),
    (["--mode", "serve", "--host", " "], "error: --host is empty"),
    (
        ["--mode", "serve", "--host", "no.such.host.invalid"],
        "error: --host no.such.host.invalid: unknown address",
    ),
    (
        ["--mode", "serve", "--difficulty", "easy"],
        "error: --mode serve takes only --host, --port, --max_sessions, --session_ttl_s, --evict_idle_s, --token, "
        "--data_dir, --processes, --limit_body_kb, --limit_jobs, --limit_nodes, --limit_gpus, --limit_steps, "
        "--limit_session_mb, --drain_s; --difficulty easy would go in a session's POST /reset body",
    ),
    (["--mode", "eval", "--port", "8000"], "error: --port: options of --mode serve"),
    (
        ["--max_sessions", "4", "--session_ttl_s", "9"],
        "error: --max_sessions, --session_ttl_s: options of --mode serve",
    ),
]


@pytest.mark.parametrize(("argv", "message"), SERVE_CASES, ids=lambda x: None)
def test_serve_mistakes_are_one_error_line(argv, message, capsys, alarm):
    assert main(argv) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(message), line


def test_serve_refuses_a_port_in_use(capsys, alarm):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["--mode", "serve", "--port", str(port)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: --port {port}: cannot listen on 127.0.0.1:{port} (")
