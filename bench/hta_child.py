"""Runs inside the HTA venv (bench/_work/hta-venv): HTA's temporal breakdown, idle-time
breakdown, kernel launch statistics and queue lengths of one trace folder, as JSON on stdout.
Not imported by anything of ours."""

import json
import logging
import sys

from hta.trace_analysis import TraceAnalysis

logging.disable(logging.WARNING)


def main(folder: str, kernel_wait: float) -> None:
    # HTA drops the last profiler step by default; ours analyses the whole trace
    analysis = TraceAnalysis(trace_dir=folder, include_last_profiler_step=True)
    rank = sorted(analysis.t.traces)[0]
    out: dict = {"rank": int(rank)}
    temporal = analysis.get_temporal_breakdown(visualize=False)
    row = temporal[temporal["rank"] == rank].iloc[0]
    out["temporal"] = {"window_us": float(row["kernel_time(us)"]),
                       "idle_us": float(row["idle_time(us)"]),
                       "compute_us": float(row["compute_time(us)"]),
                       "non_compute_us": float(row["non_compute_time(us)"])}
    idle, _ = analysis.get_idle_time_breakdown(ranks=[rank], consecutive_kernel_delay=kernel_wait,
                                               visualize=False)
    out["idle"] = {cat: float(idle[idle["idle_category"] == cat]["idle_time"].sum())
                   for cat in ("host_wait", "kernel_wait", "other")}
    launch = analysis.get_cuda_kernel_launch_stats(ranks=[rank], include_memory_events=False,
                                                   visualize=False)[rank]
    out["launch"] = {"kernels": int(len(launch)),
                     "short": int((launch["gpu_duration"] < launch["cpu_duration"]).sum()),
                     "runtime_outliers": int((launch["cpu_duration"] > 50).sum()),
                     "delay_outliers": int((launch["launch_delay"] > 100).sum())}
    try:
        queue = analysis.get_queue_length_summary(ranks=[rank])
        out["queue_max"] = (None if queue is None else
                            float(queue[("queue_length", "max")].max()))
    except Exception as exc:  # HTA asserts on traces whose launches and kernels do not pair
        out["queue_max"] = f"error: {type(exc).__name__}"
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
