"""The GPU Idle analyses on hand-built event vectors: every expected value is derived in the
comments from the events, never from the builders."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_plugin.analysis.device_work import log_histogram
from tb_plugin.analysis.gpu_idle.critical_path import critical_paths
from tb_plugin.analysis.gpu_idle.idle import (
    _step_max,
    bandwidth,
    idle_breakdown,
    queue_lengths,
    temporal_breakdown,
)
from tb_plugin.analysis.gpu_idle.launch_stats import (
    annotation_breakdown,
    kernel_sequences,
    launch_stats,
    leaf_containing,
)
from tb_plugin.analysis.gpu_idle.view import build_gpu_idle
from tb_plugin.analysis.vendor import device_vendor, vendor_of_properties

from .helpers import cpu_op, device_event, kernel, make_table, memcpy, runtime, step

NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def _events():
    """Device 0. Stream 7: k1 [20,50) gemmA, k2 [55,60) biasB, k3 [110,130) gemmA,
    k4 [200,210) biasB, an HtoD copy [300,320) of 2e6 bytes. Stream 8: an NCCL kernel
    [120,160). Launch calls: k1 [10,15), k2 [40,50), k4 [70,75), k3 [100,105), nccl
    [115,120), copy [290,295). aten::linear [8,53) launches k1,k2 and [65,110) k4,k3."""
    return [
        step(1, 0, 400),
        cpu_op("aten::linear", 8, 45, ext=1), cpu_op("aten::linear", 65, 45, ext=2),
        cpu_op("block", 5, 55, cat="user_annotation"),
        cpu_op("inner", 35, 20, cat="user_annotation"),
        runtime(10, 5, corr=1, ext=1), kernel(20, 30, corr=1, ext=1, name="gemmA"),
        runtime(40, 10, corr=2, ext=1), kernel(55, 5, corr=2, ext=1, name="biasB"),
        runtime(70, 5, corr=4, ext=2), kernel(200, 10, corr=4, ext=2, name="biasB"),
        runtime(100, 5, corr=3, ext=2), kernel(110, 20, corr=3, ext=2, name="gemmA"),
        runtime(115, 5, corr=5), kernel(120, 40, corr=5, name=NCCL, stream=8),
        runtime(290, 5, corr=6, name="cudaMemcpyAsync"), memcpy(300, 20, corr=6, bytes=2e6),
        device_event("gpu_user_annotation", "gpu_block", 15, 50),
    ]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return make_table(_events(), tmp_path_factory.mktemp("idle"))


def test_temporal_breakdown(table):
    [dev] = temporal_breakdown(table)
    # W = [20, 320) = 300. C = 30+5+20+10 = 65; M − C = [130,160) = 30; Y = 20;
    # busy = 115, idle = 185; C ∩ M = [120,130) = 10.
    assert (dev["start_us"], dev["end_us"], dev["window_us"]) == (20.0, 320.0, 300.0)
    assert dev["compute_us"] == 65.0 and dev["communication_us"] == 30.0
    assert dev["memory_us"] == 20.0 and dev["idle_us"] == 185.0
    assert dev["compute_communication_overlap_us"] == 10.0
    assert dev["idle_pct"] == pytest.approx(100 * 185 / 300)


def test_idle_causes_per_stream(table):
    result = idle_breakdown(table, kernel_wait_us=30.0)
    s7, s8 = result["streams"]
    # gaps on stream 7: 55−50 = 5 (k2 launched at 40 < 50, 5 < 30: kernel wait),
    # 110−60 = 50 (k3 launched at 100 > 60: host wait), 200−130 = 70 (k4 launched at 70 <
    # 130, 70 > 30: other), 300−210 = 90 (copy launched at 290 > 210: host wait)
    assert (s7["stream"], s7["gaps"], s7["busy_us"]) == (7, 4, 85.0)
    assert (s7["host_wait_us"], s7["kernel_wait_us"], s7["other_us"]) == (140.0, 5.0, 70.0)
    assert s7["idle_us"] == 215.0
    assert (s8["stream"], s8["gaps"], s8["idle_us"]) == (8, 0, 0.0)
    assert [g["gap_us"] for g in result["largest_gaps"]] == [90.0, 70.0, 50.0, 5.0]
    assert result["largest_gaps"][1]["cause"] == "other"
    # the threshold is strict (as HTA's): 70 us is not < 70, but it is < 71
    s7 = idle_breakdown(table, kernel_wait_us=70.0)["streams"][0]
    assert (s7["kernel_wait_us"], s7["other_us"]) == (5.0, 70.0)
    s7 = idle_breakdown(table, kernel_wait_us=71.0)["streams"][0]
    assert (s7["kernel_wait_us"], s7["other_us"]) == (75.0, 0.0)


def test_idle_breakdown_rows_are_whole(table):
    """Every key of a stream row and of a largest-gap row, on the events above (the view reads
    them by name)."""
    result = idle_breakdown(table, kernel_wait_us=30.0)
    assert sorted(result) == ["gap_histogram", "kernel_wait_us", "largest_gaps", "streams"]
    assert result["kernel_wait_us"] == 30.0
    # stream 7 holds k1, k2, k3, k4 and the copy; gaps as in test_idle_causes_per_stream
    assert result["streams"][0] == {
        "device": 0, "stream": 7, "events": 5, "busy_us": 85.0, "idle_us": 215.0,
        "host_wait_us": 140.0, "kernel_wait_us": 5.0, "other_us": 70.0, "gaps": 4}
    first = result["largest_gaps"][0]  # [210, 300): the copy launched at 290 > 210
    assert first == {"device": 0, "stream": 7, "start_us": 210.0, "end_us": 300.0,
                     "gap_us": 90.0, "cause": "host_wait", "next_event": first["next_event"]}
    assert table.events["ts"].iloc[first["next_event"]] == 300.0  # the copy's own row
    assert result["gap_histogram"] == log_histogram(np.array([5.0, 50.0, 70.0, 90.0]))
    [queue7] = [q for q in queue_lengths(table, 2) if q["stream"] == 7]
    assert (queue7["device"], queue7["stream"]) == (0, 7)


def test_queue_length(table):
    s7 = next(q for q in queue_lengths(table, 2) if q["stream"] == 7)
    # +1 at launches 10, 40, 70, 100, 290; −1 at starts 20, 55, 110, 200, 300 (10..300 = 290):
    # length·time = 1·10 + 0 + 1·15 + 0 + 1·30 + 2·10 + 1·90 + 0 + 1·10 = 175
    assert s7["max"] == 2 and s7["mean"] == pytest.approx(175 / 290)
    assert s7["full_us"] == 10.0  # length ≥ 2 during [100,110)
    assert s7["series"]["t_us"][:3] == [10.0, 20.0, 40.0]
    assert s7["series"]["length"][:3] == [1.0, 0.0, 1.0]


def test_bandwidth(table):
    result = bandwidth(table)
    [htod] = result["kinds"]
    # 2e6 bytes in 20 us = 1e5 bytes/us = 100 GB/s, the only copy running
    assert (htod["kind"], htod["count"], htod["bytes"], htod["busy_us"]) == (
        "HtoD", 1, 2e6, 20.0)
    assert htod["mean_gbps"] == pytest.approx(100.0) and htod["peak_gbps"] == pytest.approx(100.0)
    assert max(result["series"]["gbps"]["HtoD"]) == pytest.approx(100.0)


def test_bandwidth_peak_is_the_series_true_maximum(tmp_path):
    """HtoD copies A [0, 10) at 100 GB/s and B [5, 15) at 50 GB/s (1e6 and 5e5 bytes): the sum
    runs 100 on [0, 5), 150 on [5, 10), 50 on [10, 15): peak 150 (the old bucket-mean peak
    was lower than that), mean over the 15 us busy = (100*10 + 50*10) / 15 = 100 = bytes /
    busy. Then C [100, 110) and D [110, 120) back to back at 80 GB/s (DtoD, 8e5 bytes each):
    they never add up: peak 80, mean 80."""
    events = [memcpy(0, 10, bytes=1e6), memcpy(5, 10, bytes=5e5)]
    events += [device_event("gpu_memcpy", "Memcpy DtoD (Device -> Device)", ts, 10, bytes=8e5)
               for ts in (100, 110)]
    kinds = {k["kind"]: k for k in bandwidth(make_table(events, tmp_path))["kinds"]}
    assert kinds["HtoD"]["peak_gbps"] == pytest.approx(150.0)
    assert kinds["HtoD"]["mean_gbps"] == pytest.approx(100.0)
    assert kinds["HtoD"]["mean_gbps"] == pytest.approx(1.5e6 / (15 * 1e3))
    assert kinds["DtoD"]["peak_gbps"] == pytest.approx(80.0)
    assert kinds["DtoD"]["mean_gbps"] == pytest.approx(80.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 20), st.integers(1, 100)),
                min_size=1, max_size=12))
def test_step_max_is_the_brute_force_maximum(copies):
    """Integer copies (start, length, GB/s): the maximum over every half-integer instant of
    the sum of running copies (zero-length copies never run)."""
    start = np.array([c[0] for c in copies], dtype=float)
    end = start + np.array([c[1] for c in copies], dtype=float)
    value = np.array([c[2] for c in copies], dtype=float)
    brute = max([sum(v for s, e, v in zip(start, end, value) if s <= t < e)
                 for t in np.arange(0.5, 71.0, 1.0)] + [0.0])
    assert _step_max(start, end, value) == brute


def test_launch_stats(table):
    stats = launch_stats(table, runtime_cutoff_us=7.0, delay_cutoff_us=100.0)
    # cpu = 5, 10, 5, 5, 5 (k1, k2, k4, k3, nccl); gpu = 30, 5, 10, 20, 40
    # delay = 20−15, 55−50, 200−75, 110−105, 120−120 = 5, 5, 125, 5, 0
    assert stats["kernels"] == 5
    assert (stats["cpu_us_total"], stats["gpu_us_total"]) == (30.0, 105.0)
    assert (stats["short_kernels"], stats["short_kernel_gpu_us"]) == (1, 5.0)  # k2: 5 < 10
    assert stats["mean_delay_us"] == pytest.approx(28.0) and stats["median_delay_us"] == 5.0
    assert (stats["runtime_outliers"], stats["delay_outliers"]) == (1, 1)
    [slow] = stats["top_delay_outliers"]
    assert (slow["name"], slow["delay_us"], slow["cpu_us"]) == ("biasB", 125.0, 5.0)
    assert sum(stats["histograms"]["gpu_us"]["counts"]) == 5


def test_kernel_sequences(table):
    [seq] = [s for s in kernel_sequences(table) if s["operator"] == "aten::linear"]
    # both calls launch gemmA then biasB (the second in kernel start order: k3 at 110, k4 at
    # 200); gpu = 30+5+20+10 = 65, cpu = 45+45 = 90
    assert seq["kernels"] == ["gemmA", "biasB"] and seq["count"] == 2
    assert (seq["gpu_us"], seq["cpu_us"], seq["fusion_candidate"]) == (65.0, 90.0, True)


def test_annotations_leaf_most_wins(table):
    rows = {(a["side"], a["name"]): a for a in annotation_breakdown(table)}
    # k1's launch (10) is only in block [5,60); k2's (40) is in inner [35,55) too: inner wins
    assert (rows["host", "block"]["gpu_us"], rows["host", "block"]["kernels"]) == (30.0, 1)
    assert (rows["host", "inner"]["gpu_us"], rows["host", "inner"]["kernels"]) == (5.0, 1)
    # gpu_block [15,65) on device 0 holds the kernels starting at 20 and 55
    assert (rows["gpu", "gpu_block"]["gpu_us"], rows["gpu", "gpu_block"]["kernels"]) == (35.0, 2)
    assert ("host", "ProfilerStep#1") not in rows


def test_leaf_containing_brute_force():
    rng = np.random.default_rng(7)
    # nested intervals per group: [0,100) ⊃ [10,40) ⊃ [20,30); [50,90); group 1: [0,10)
    group = np.array([0, 0, 0, 0, 1])
    start = np.array([0.0, 10.0, 20.0, 50.0, 0.0])
    end = np.array([100.0, 40.0, 30.0, 90.0, 10.0])
    pg = rng.integers(0, 2, 200)
    p = rng.uniform(-5, 105, 200)
    got = leaf_containing(group, start, end, pg, p)
    for g, x, owner in zip(pg, p, got):
        inside = [i for i in range(5) if group[i] == g and start[i] <= x < end[i]]
        expected = min(inside, key=lambda i: end[i] - start[i]) if inside else -1
        assert owner == expected


def test_log_histogram():
    hist = log_histogram(np.array([0.05, 0.2, 5.0, 5000.0]))
    # edges 0.1·10^(k/2): 0.05 and 0.2 in [0.1, 0.316), 5 in [3.16, 10), 5000 in [3162, 10^4)
    assert hist["counts"] == [2, 0, 0, 1, 0, 0, 0, 0, 0, 1]
    assert hist["edges_us"][0] == pytest.approx(0.1) and hist["edges_us"][-1] == pytest.approx(1e4)
    assert log_histogram(np.array([])) == {"edges_us": [], "counts": []}


def test_critical_path(tmp_path):
    """A [10,15) launches K1 [20,60); B [20,25) launches K2 [60,80) (queued behind K1);
    S = cudaDeviceSynchronize [30,82) waits for K2. Path back from S: K2 (sync, ended last),
    K1 (stream), A (launch). Shares: host compute [0,10) + [82,100) = 28; launch A 5 + the
    wait [15,20) 5 = 10; kernel 40 + 20 = 60; sync [80,82) = 2; sum 100."""
    table = make_table([
        step(1, 0, 100),
        runtime(10, 5, corr=1), kernel(20, 40, corr=1),
        runtime(20, 5, corr=2), kernel(60, 20, corr=2),
        runtime(30, 52, corr=9, name="cudaDeviceSynchronize"),
    ], tmp_path)
    result = critical_paths(table)
    [one] = result["steps"]
    assert one["length_us"] == 100.0 and one["nodes"] == 4
    assert one["shares_us"] == {"host_compute": 28.0, "launch": 10.0, "runtime": 0.0,
                                "kernel": 60.0, "sync": 2.0, "idle": 0.0,
                                "backlog": 0.0}
    names = table.events["name"].astype(str).to_numpy()
    assert sorted(names[result["event_ids"]]) == sorted(
        ["cudaLaunchKernel", "void gemm_kernel<float>()", "void gemm_kernel<float>()",
         "cudaDeviceSynchronize"])
    assert "cudaLaunchKernel" in names[result["event_ids"]][0]  # A, the earliest row


def test_vendor():
    assert vendor_of_properties({"name": "AMD Radeon Graphics", "computeMajor": 9}) == "amd"
    assert vendor_of_properties({"name": "AMD Instinct MI300X"}) == "amd"
    assert vendor_of_properties({"name": "x", "gcnArchName": "gfx90a"}) == "amd"
    assert vendor_of_properties({"name": "NVIDIA A100-PG509-200"}) == "nvidia"
    assert vendor_of_properties({"name": "Tesla V100-SXM2-32GB"}) == "nvidia"
    assert vendor_of_properties({}) == "unknown"


def test_vendor_from_runtime_calls(tmp_path):
    hip = make_table([step(1, 0, 50), runtime(1, 2, corr=1, name="hipLaunchKernel"),
                      kernel(5, 5, corr=1)], tmp_path)
    assert device_vendor(hip, 0) == "amd"
    cuda = make_table([step(1, 0, 50), runtime(1, 2, corr=1), kernel(5, 5, corr=1)], tmp_path)
    assert device_vendor(cuda, 0) == "nvidia"


def test_cpu_only_is_not_applicable(tmp_path):
    table = make_table([step(1, 0, 100), cpu_op("aten::add", 10, 20),
                        cpu_op("block", 5, 50, cat="user_annotation")], tmp_path)
    payload = build_gpu_idle(table)
    assert payload["applicable"] is False and "CPU-only" in payload["message"]
    assert payload["temporal"] == [] and payload["critical_path"]["steps"] == []
    assert [a["name"] for a in payload["annotations"]] == ["block"]
