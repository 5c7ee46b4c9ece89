import pytest

from tb_plugin.analysis.advice.recommendations import (
    RULE_IDS,
    URL_COMM_HOOKS,
    URL_DATALOADER,
    URL_FSDP,
    Facts,
    recommend,
    rule_data_parallel,
    rule_dataloader,
    rule_exposed_communication,
    rule_foreign_marker,
    rule_host_bound,
    rule_host_compute,
    rule_launch_bound,
    rule_low_utilization,
    rule_matrix_units,
    rule_memory,
    rule_nccl,
    rule_startup,
    rule_sync,
)
from tb_plugin.analysis.advice.stalls import rule_device_stall
from tb_plugin.analysis.overview import build_overview
from tests.support import REPO

from .helpers import cpu_op, kernel, make_table, step

GB = 1024**3
V100 = {"id": 0, "name": "Tesla V100", "totalGlobalMem": 32 * GB, "computeMajor": 7,
        "computeMinor": 0}


def facts(**kw):
    kw.setdefault("average", {"Total": 100.0})
    return Facts(**kw)


def shares(**percent):
    names = {"CPU": "CPU Exec"}
    return {"Total": 100.0, **{names.get(k, k): float(v) for k, v in percent.items()}}


@pytest.mark.parametrize("share,severity", [(5.0, None), (5.1, "low"), (20, "medium"),
                                            (33.4, "high")])
def test_dataloader_rule_is_graded(share, severity):
    item = rule_dataloader(facts(average=shares(DataLoader=share)))
    if severity is None:
        assert item is None
        return
    assert item["severity"] == severity and item["view"] == "Overview"
    assert item["metric"] == pytest.approx(share)
    assert item["text"].startswith(f"{share:.1f}% of the step time is spent in DataLoader: "
                                   f"{severity.upper()}")
    assert item["link"] == URL_DATALOADER


def test_zero_step_time_raises_nothing():
    assert recommend(facts(average={"Total": 0.0, "DataLoader": 0.0, "Communication": 0.0},
                           gpu_utilization={0: None})) == []


@pytest.mark.parametrize("share,severity", [(10.0, None), (12, "low"), (25, "medium"),
                                            (40, "high")])
def test_exposed_communication_rule_is_graded_and_worded_for_ddp(share, severity):
    item = rule_exposed_communication(facts(exposed_comm_pct=share, uses_ddp=True))
    if severity is None:
        assert item is None
        return
    assert item["severity"] == severity and item["view"] == "Distributed"
    assert item["text"].startswith(f"{share:.1f}% of the step time is communication that no "
                                   "computation overlaps")
    assert "DDP:" in item["text"] and "FSDP" not in item["text"]
    assert item["link"] == URL_COMM_HOOKS


def test_exposed_communication_is_worded_for_fsdp_and_silent_without_data():
    item = rule_exposed_communication(facts(exposed_comm_pct=30.0, uses_fsdp=True))
    assert "FSDP:" in item["text"] and "DDP" not in item["text"]
    assert item["link"] == URL_FSDP
    plain = rule_exposed_communication(facts(exposed_comm_pct=30.0))
    assert "DDP" not in plain["text"] and "FSDP" not in plain["text"]
    assert rule_exposed_communication(facts()) is None  # no communication measured


def test_low_utilization_one_gpu():
    item = rule_low_utilization(facts(gpu_utilization={0: 0.1, 1: None}))
    assert item["text"].startswith("GPU 0 (10.0%) has low utilization: HIGH")
    assert item["metric"] == pytest.approx(10.0) and item["view"] == "GPU Idle"


def test_low_utilization_several_gpus_grammar():
    item = rule_low_utilization(facts(gpu_utilization={0: 0.4, 1: 0.6, 2: 0.3, 3: 0.45}))
    assert item["text"].startswith("GPUs 0 (40.0%), 2 (30.0%) and 3 (45.0%) have low "
                                   "utilization: MEDIUM")
    assert rule_low_utilization(facts(gpu_utilization={0: 0.5, 1: 0.9})) is None


def test_low_utilization_is_silent_when_a_specific_cause_fired():
    low = dict(gpu_utilization={0: 0.01}, steps_us=100.0, startup_us=50.0,
               startup_calls=[("cudaFree", 50.0)])
    ids = [item["id"] for item in recommend(facts(**low))]
    assert ids == ["startup_captured"]  # no "increase the batch size"
    ids = [item["id"] for item in recommend(facts(gpu_utilization={0: 0.01}))]
    assert ids == ["low_gpu_utilization"]


def test_startup_rule_names_the_calls_and_their_share():
    item = rule_startup(facts(steps_us=40e6, startup_us=36.5e6, vendor="nvidia",
                              startup_calls=[("cudaDeviceGetStreamPriorityRange", 29.9e6),
                                             ("cudaFree", 6.6e6)],
                              startup_range=(100.0, 29.9e6 + 100.0)))
    # 36.5 / 40 = 91.25 %
    assert item["metric"] == pytest.approx(91.25) and item["severity"] == "high"
    assert item["text"].startswith("36.5 s (91.2%) of the profiled steps is CUDA start-up")
    assert "cudaDeviceGetStreamPriorityRange 29.9 s and cudaFree 6.6 s" in item["text"]
    assert "torch.profiler.schedule" in item["text"]
    assert (item["start_us"], item["end_us"]) == (100.0, 29.9e6 + 100.0)
    amd = rule_startup(facts(steps_us=100.0, startup_us=30.0, vendor="amd",
                             startup_calls=[("hipMalloc", 30.0)]))
    assert "HIP start-up" in amd["text"] and amd["severity"] == "medium"
    assert rule_startup(facts(steps_us=100.0, startup_us=9.9,
                              startup_calls=[("cudaFree", 9.9)])) is None


def test_foreign_marker_rule():
    marker = {"name": "ProfilerStep#1", "pid": "3100453", "ops_pid": "1670242",
              "dur_us": 13.3e6, "range": (5.0, 13.3e6 + 5.0)}
    item = rule_foreign_marker(facts(foreign_marker=marker))
    assert item["text"].startswith("ProfilerStep#1 was recorded by process 3100453, but this "
                                   "trace's operators run in process 1670242; it lasts 13.3 s")
    assert item["severity"] == "high" and item["start_us"] == 5.0
    assert rule_foreign_marker(facts()) is None


# Priced rules: steps_us is the summed step time, step_count the number of steps; a saving is
# (total us / steps, 100 * total / steps_us).
PRICED = dict(steps_us=10_000.0, step_count=2)


def test_host_bound_needs_both_idle_and_host_wait_and_is_priced_by_host_wait():
    base = dict(largest_gap=(1.0, 9.0), idle_us=8000.0, host_wait_us=6000.0, **PRICED)
    item = rule_host_bound(facts(gpu_idle_pct=76.0, host_wait_pct=75.0, **base))
    assert item["severity"] == "medium" and item["view"] == "GPU Idle"
    # per step: idle 8000 / 2 = 4.0 ms, host wait 6000 / 2 = 3.0 ms
    assert item["text"].startswith("The GPU is idle 76.0% of its active window (4.0 ms per "
                                   "step), and in 3.0 ms of that idle time (75.0%) it had "
                                   "nothing queued")
    assert (item["saving_us"], item["saving_pct"]) == (3000.0, 60.0)
    assert (item["start_us"], item["end_us"]) == (1.0, 9.0)
    # the thresholds are inclusive: 50% idle and 50% host wait fire, just below does not
    assert rule_host_bound(facts(gpu_idle_pct=50.0, host_wait_pct=50.0, **base)) is not None
    assert rule_host_bound(facts(gpu_idle_pct=76.0, host_wait_pct=49.99, **base)) is None
    assert rule_host_bound(facts(gpu_idle_pct=49.99, host_wait_pct=99.0, **base)) is None
    assert rule_host_bound(facts()) is None
    assert rule_host_bound(facts(gpu_idle_pct=76.0, host_wait_pct=75.0, graph_mode="capture",
                                 **base)) is None


def test_host_bound_is_priced_by_what_no_specific_cause_explains():
    base = dict(gpu_idle_pct=90.0, host_wait_pct=90.0, idle_us=8000.0, host_wait_us=6000.0,
                launch_idle_us=1000.0, sync_idle_us=500.0, host_compute_us=1500.0, **PRICED)
    fired = ("launch_bound", "device_sync", "host_compute")
    item = rule_host_bound(facts(**base), fired)
    assert item["saving_us"] == (6000.0 - 1000.0 - 500.0 - 1500.0) / 2  # 1500 us per step
    assert item["saving_pct"] == 30.0
    assert rule_host_bound(facts(**base), ("launch_bound",))["saving_us"] == 2500.0
    # fully explained: silent
    assert rule_host_bound(facts(**{**base, "host_compute_us": 4500.0}), fired) is None


def test_graph_traces_are_not_told_to_use_graphs():
    base = dict(gpu_idle_pct=90.0, host_wait_pct=90.0, idle_us=8000.0, host_wait_us=6000.0,
                **PRICED)
    plain = rule_host_bound(facts(**base))
    assert "CUDA/HIP graphs" in plain["text"] and "CUDA graphs" in {
        link["label"] for link in plain["links"]}
    replay = rule_host_bound(facts(graph_mode="replay", **base))
    assert "graphs" not in replay["text"] and "CUDA graphs" not in {
        link["label"] for link in replay["links"]}
    launch = dict(kernels=200, short_kernels=150, launch_idle_us=2000.0, **PRICED)
    assert rule_launch_bound(facts(**launch)) is not None
    assert rule_launch_bound(facts(graph_mode="replay", **launch)) is None


def test_launch_bound_is_priced_by_idle_time_inside_launch_calls():
    base = dict(kernels=200, short_kernels=150, **PRICED)
    item = rule_launch_bound(facts(launch_idle_us=2000.0, **base))  # 20% of the steps
    assert item["metric"] == pytest.approx(20.0) and item["severity"] == "medium"
    assert (item["saving_us"], item["saving_pct"]) == (1000.0, 20.0)
    assert item["text"].startswith("150 of 200 kernels (75.0%) run for less time on the GPU")
    assert "idle inside launch calls for 1.0 ms per step (20.0% of the step)" in item["text"]
    # LAUNCH_PCT (5%) is inclusive: a full queue hides launches, however short the kernels
    assert rule_launch_bound(facts(launch_idle_us=500.0, **base)) is not None
    assert rule_launch_bound(facts(launch_idle_us=499.0, **base)) is None
    assert rule_launch_bound(facts(launch_idle_us=0.0, kernels=1000, short_kernels=1000,
                                   **PRICED)) is None
    # too few kernels, or too few short ones (SHORT_KERNEL_PCT 50% inclusive), to judge
    assert rule_launch_bound(facts(launch_idle_us=2000.0, kernels=99, short_kernels=99,
                                   **PRICED)) is None
    assert rule_launch_bound(facts(launch_idle_us=2000.0, kernels=200, short_kernels=100,
                                   **PRICED)) is not None
    assert rule_launch_bound(facts(launch_idle_us=2000.0, kernels=200, short_kernels=99,
                                   **PRICED)) is None


def test_sync_rule_is_priced_by_the_idle_time_it_causes():
    base = dict(sync_calls=2, sync_names=["cudaStreamSynchronize"], sync_range=(10.0, 50.0),
                **PRICED)
    item = rule_sync(facts(sync_idle_us=600.0, **base))
    assert item["metric"] == pytest.approx(6.0) and item["severity"] == "medium"
    assert item["text"].startswith("2 synchronising calls (cudaStreamSynchronize) leave the GPU "
                                   "idle for 300 us per step (6.0% of the step time)")
    assert (item["saving_us"], item["saving_pct"]) == (300.0, 6.0)
    # SYNC_PCT (2%) is inclusive; a sync that waits on a busy GPU costs nothing
    assert rule_sync(facts(sync_idle_us=200.0, **base)) is not None
    assert rule_sync(facts(sync_idle_us=199.0, **base)) is None
    assert rule_sync(facts(sync_idle_us=0.0, **base)) is None
    assert rule_sync(facts(sync_idle_us=600.0, graph_mode="capture", **base)) is None


def test_host_compute_rule_needs_gpu_work_and_is_priced():
    base = dict(used_devices=[0], **PRICED)
    item = rule_host_compute(facts(host_compute_us=4000.0, **base))
    assert (item["saving_us"], item["saving_pct"]) == (2000.0, 40.0)
    assert item["severity"] == "medium" and item["id"] == "host_compute"
    assert item["text"].startswith("40.0% of the step time (2.0 ms per step) is CPU work that "
                                   "launches nothing on the GPU")
    # HOST_COMPUTE_PCT (20%) inclusive
    assert rule_host_compute(facts(host_compute_us=2000.0, **base)) is not None
    assert rule_host_compute(facts(host_compute_us=1999.0, **base)) is None
    assert rule_host_compute(facts(host_compute_us=4000.0, **PRICED)) is None  # no GPU
    assert rule_host_compute(facts(host_compute_us=4000.0, graph_mode="capture", **base)) is None
    assert rule_host_compute(facts(host_compute_us=4000.0, foreign_marker={"name": "x"},
                                   **base)) is None


def test_low_utilization_is_silent_on_a_capture_and_after_host_compute():
    low = dict(gpu_utilization={0: 0.1})
    assert rule_low_utilization(facts(**low))["id"] == "low_gpu_utilization"
    assert rule_low_utilization(facts(graph_mode="capture", **low)) is None
    assert rule_low_utilization(facts(**low), ("host_compute",)) is None


def test_data_parallel_rule_needs_several_devices():
    assert rule_data_parallel(facts(uses_dp=True, used_devices=[0, 1]))["view"] == "Trace"
    assert rule_data_parallel(facts(uses_dp=True, used_devices=[0])) is None


def test_nccl_rule_is_vendor_aware():
    item = rule_nccl(facts(uses_ddp=True, backend="gloo", device_props={0: V100},
                           used_devices=[0], vendor="nvidia"))
    assert "the gloo backend" in item["text"] and item["severity"] == "medium"
    assert "compute capability" not in item["text"]
    amd = rule_nccl(facts(uses_ddp=True, backend="gloo", used_devices=[0], vendor="amd"))
    assert "RCCL" in amd["text"] and "compute capability" not in amd["text"]
    assert rule_nccl(facts(uses_ddp=True, uses_nccl=True, used_devices=[0],
                           vendor="nvidia")) is None
    assert rule_nccl(facts(uses_ddp=True, used_devices=[], vendor="nvidia")) is None  # CPU


def test_matrix_units_rule_by_vendor():
    base = dict(device_props={0: V100}, used_devices=[0], kernel_tc_ratio=0.0,
                vendor="nvidia")
    item = rule_matrix_units(facts(tc_eligible_ops_kernel_ratio=0.68, **base))
    assert item["text"].startswith("Kernels with 68% of the kernel time are launched by Tensor "
                                   "Cores eligible operators")
    assert "Volta" in item["text"] and "TF32" not in item["text"]
    assert item["severity"] == "high" and item["view"] == "Kernel"
    hopper = {0: {**V100, "computeMajor": 9}}
    item = rule_matrix_units(facts(**{**base, "device_props": hopper},
                                   tc_eligible_ops_kernel_ratio=0.68))
    assert "Hopper" in item["text"] and "set_float32_matmul_precision" in item["text"]
    blackwell = {0: {**V100, "computeMajor": 10}}
    assert "Blackwell" in rule_matrix_units(facts(**{**base, "device_props": blackwell},
                                                  tc_eligible_ops_kernel_ratio=0.68))["text"]
    assert rule_matrix_units(facts(tc_eligible_ops_kernel_ratio=0.0, **base)) is None
    assert rule_matrix_units(facts(**{**base, "kernel_tc_ratio": 0.2},
                                   tc_eligible_ops_kernel_ratio=0.68)) is None
    pascal = {0: {**V100, "computeMajor": 6}}
    assert rule_matrix_units(facts(**{**base, "device_props": pascal},
                                   tc_eligible_ops_kernel_ratio=0.68)) is None
    assert rule_matrix_units(facts(device_props={0: V100}, vendor="nvidia")) is None
    # AMD: computeMajor 9 is not a CUDA capability; MFMA kernels mean the matrix cores work
    amd = dict(device_props={0: {"name": "AMD Radeon Graphics", "computeMajor": 9}},
               used_devices=[0], kernel_tc_ratio=0.0, vendor="amd",
               tc_eligible_ops_kernel_ratio=0.33)
    assert rule_matrix_units(facts(matrix_core_kernels=2, **amd)) is None
    item = rule_matrix_units(facts(**amd))
    assert "Tensor Core" not in item["text"] and "MFMA" in item["text"]
    assert rule_matrix_units(facts(**{**amd, "vendor": "unknown"})) is None  # cannot judge


def test_memory_rule_uses_each_gpus_own_capacity():
    props = {0: V100, 1: {**V100, "id": 1, "totalGlobalMem": 16 * GB}}
    item = rule_memory(facts(memory_peaks={0: 20 * GB, 1: 15.5 * GB}, device_props=props))
    assert "GPU 1 is 96.9% of its 16.0 GB" in item["text"] and item["severity"] == "high"
    assert item["view"] == "Memory"
    assert rule_memory(facts(memory_peaks={0: 20 * GB}, device_props=props)) is None
    assert rule_memory(facts(memory_peaks={5: 20 * GB}, device_props=props)) is None


def test_items_are_ordered_by_what_they_save():
    # 2 steps of 5000 us: the data loader saves 400 us (8%) per step, exposed communication
    # 50% (2500 us), the host wait 9000 us over both steps: 4500 us (90%) per step; DataParallel
    # advice is not priced and comes after every priced item.
    items = recommend(facts(average={"Total": 5000.0, "DataLoader": 400.0},
                            exposed_comm_pct=50.0, gpu_idle_pct=90.0, host_wait_pct=90.0,
                            uses_ddp=True, idle_us=9500.0, host_wait_us=9000.0,
                            used_devices=[0, 1], uses_dp=True, **PRICED))
    assert [i["id"] for i in items] == ["host_bound", "communication_not_overlapped",
                                        "dataloader", "data_parallel"]
    assert [(i["saving_us"], i["saving_pct"]) for i in items] == [
        (4500.0, 90.0), (2500.0, 50.0), (400.0, 8.0), (None, None)]


def test_profile_problems_come_before_any_saving():
    items = recommend(facts(average=shares(DataLoader=60), startup_calls=[("cudaMalloc", 5.0)],
                            startup_us=2000.0, **PRICED))
    assert [i["id"] for i in items] == ["startup_captured", "dataloader"]
    assert items[0]["saving_us"] is None and items[1]["saving_pct"] == 60.0


def test_every_rule_id_is_documented_in_the_readme():
    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("### Recommendation ids"):]
    for rule_id in RULE_IDS:
        assert f"| `{rule_id}` |" in table


def _memory(ts, device_type, device_id, total):
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 100,
            "tid": 200, "ts": ts, "args": {"Device Type": device_type, "Device Id": device_id,
                                           "Addr": 1000 + ts, "Bytes": 512,
                                           "Total Allocated": total, "Total Reserved": total}}


def test_memory_rule_skips_the_cpu(tmp_path):
    """Reference bug 3.15.7: the CPU peak (device -1) was compared with the last GPU's memory."""
    base = [step(1, 0, 100), cpu_op("aten::empty", 10, 10), kernel(20, 50, device=0)]
    cpu_heavy = make_table(base + [_memory(11, 0, -1, 400 * GB), _memory(12, 1, 0, 1 * GB)],
                           tmp_path, deviceProperties=[V100])
    assert not [r for r in build_overview(cpu_heavy)["recommendations"]
                if r["id"] == "memory_limit"]
    gpu_full = make_table(base + [_memory(11, 0, -1, 1 * GB), _memory(12, 1, 0, 30 * GB)],
                          tmp_path, deviceProperties=[V100])
    [item] = [r for r in build_overview(gpu_full)["recommendations"] if r["id"] == "memory_limit"]
    assert "GPU 0 is 93.8% of its 32.0 GB" in item["text"]


def test_device_stall_fires_from_ten_percent_of_the_steps():
    """PRICED: 2 steps, 10,000 us in all: 1000 us stalled = 500 us per step = 10.0% (inclusive)."""
    item = rule_device_stall(facts(stalled_us=1000.0, stall_range=(5.0, 1005.0), **PRICED))
    assert (item["saving_us"], item["saving_pct"]) == (500.0, 10.0)
    assert (item["start_us"], item["end_us"]) == (5.0, 1005.0)
    assert item["severity"] == "low"  # grade(10, 25, 50)
    assert rule_device_stall(facts(stalled_us=999.9, **PRICED)) is None


def test_device_stall_comes_first_and_silences_low_utilization():
    """A stall explains the idle GPU: no "increase the batch size"; it is a profile problem,
    before a larger priced saving (host compute 3000 of 10,000)."""
    stall = dict(stalled_us=6000.0, gpu_utilization={0: 0.05}, host_compute_us=3000.0,
                 **PRICED)
    ids = [item["id"] for item in recommend(facts(**stall))]
    assert ids[0] == "device_stalled" and "low_gpu_utilization" not in ids
    assert rule_device_stall(facts(graph_mode="capture", **stall)) is None
