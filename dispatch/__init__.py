"""`--mode dispatch`: real shell commands on this machine's GPUs under the simulator's scheduling policies
(jobs file, NVML and simulated devices, VRAM accounting, the policy's view, job processes, journal and resume,
status board, result files). A driver beside server/ and sweep/: imports config, sim, workloads, schedulers,
scenario, metrics and cli (the run files' writer); nothing imports it but main.py."""
