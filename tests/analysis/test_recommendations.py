import pytest

from tb_plugin.analysis.overview import build_overview
from tb_plugin.analysis.recommendations import (
    URL_COMM_HOOKS,
    URL_DATALOADER,
    Facts,
    recommend,
    rule_communication,
    rule_data_parallel,
    rule_dataloader,
    rule_low_utilization,
    rule_memory,
    rule_mixed_precision,
    rule_nccl,
)

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
def test_communication_rule_has_real_links(share, severity):
    item = rule_communication(facts(average=shares(Communication=share)))
    if severity is None:
        assert item is None
        return
    assert item["severity"] == severity
    assert f"{share:.1f}% of the step time is spent in communication" in item["text"]
    assert item["link"] == URL_COMM_HOOKS  # the reference rendered a 1-tuple here
    assert all(isinstance(link["url"], str) and link["url"].startswith("https://")
               for link in item["links"])


def test_low_utilization_one_gpu():
    item = rule_low_utilization(facts(gpu_utilization={0: 0.1, 1: None}))
    assert item["text"].startswith("GPU 0 (10.0%) has low utilization: HIGH")
    assert item["metric"] == pytest.approx(10.0)


def test_low_utilization_several_gpus_grammar():
    item = rule_low_utilization(facts(gpu_utilization={0: 0.4, 1: 0.6, 2: 0.3, 3: 0.45}))
    assert item["text"].startswith("GPUs 0 (40.0%), 2 (30.0%) and 3 (45.0%) have low "
                                   "utilization: MEDIUM")
    assert rule_low_utilization(facts(gpu_utilization={0: 0.5, 1: 0.9})) is None


def test_data_parallel_rule_needs_several_devices():
    assert rule_data_parallel(facts(uses_dp=True, used_devices=[0, 1]))["view"] == "Trace"
    assert rule_data_parallel(facts(uses_dp=True, used_devices=[0])) is None


def test_nccl_rule():
    item = rule_nccl(facts(uses_ddp=True, backend="gloo", device_props={0: V100}))
    assert "the gloo backend" in item["text"] and item["severity"] == "medium"
    assert rule_nccl(facts(uses_ddp=True, uses_nccl=True, device_props={0: V100})) is None
    old_gpu = {**V100, "computeMajor": 3, "computeMinor": 0}
    assert rule_nccl(facts(uses_ddp=True, device_props={0: old_gpu})) is None


def test_mixed_precision_rule():
    base = dict(device_props={0: V100}, used_devices=[0], kernel_tc_ratio=0.0)
    item = rule_mixed_precision(facts(tc_eligible_ops_kernel_ratio=0.68, **base))
    assert item["text"].startswith("Kernels with 68% of the kernel time are launched by Tensor "
                                   "Cores eligible operators")
    assert item["severity"] == "high" and item["view"] == "Operator"
    assert rule_mixed_precision(facts(tc_eligible_ops_kernel_ratio=0.0, **base)) is None
    assert rule_mixed_precision(facts(**{**base, "kernel_tc_ratio": 0.2},
                                      tc_eligible_ops_kernel_ratio=0.68)) is None
    pascal = {0: {**V100, "computeMajor": 6}}
    assert rule_mixed_precision(facts(**{**base, "device_props": pascal},
                                      tc_eligible_ops_kernel_ratio=0.68)) is None
    assert rule_mixed_precision(facts(device_props={0: V100})) is None  # TC data unavailable


def test_memory_rule_uses_each_gpus_own_capacity():
    props = {0: V100, 1: {**V100, "id": 1, "totalGlobalMem": 16 * GB}}
    item = rule_memory(facts(memory_peaks={0: 20 * GB, 1: 15.5 * GB}, device_props=props))
    assert "GPU 1 is 96.9% of its 16.0 GB" in item["text"] and item["severity"] == "high"
    assert item["view"] == "Memory"
    assert rule_memory(facts(memory_peaks={0: 20 * GB}, device_props=props)) is None
    assert rule_memory(facts(memory_peaks={5: 20 * GB}, device_props=props)) is None


def test_items_are_most_severe_first():
    items = recommend(facts(average=shares(DataLoader=8, Communication=50),
                            gpu_utilization={0: 0.3}))
    assert [i["id"] for i in items] == ["communication", "low_gpu_utilization", "dataloader"]
    assert [i["severity"] for i in items] == ["high", "medium", "low"]


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
