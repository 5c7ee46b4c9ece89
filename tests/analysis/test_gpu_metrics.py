
import numpy as np
import pytest

from tb_plugin.analysis.gpu_metrics import (
    device_args_of,
    gpu_metrics,
    kernel_frame,
)
from tb_plugin.analysis.launch import device_properties, dims_product, estimate_launch
from tb_plugin.load import load_trace
from tests.support import SHARED_TRACES, needs_shared

from .helpers import kernel, make_table, runtime, step

V100 = {"id": 0, "name": "Tesla V100", "totalGlobalMem": 34089730048, "computeMajor": 7,
        "computeMinor": 0, "numSms": 80, "maxThreadsPerMultiprocessor": 2048, "warpSize": 32,
        "regsPerMultiprocessor": 65536, "sharedMemPerMultiprocessor": 98304}

# (start, dur, blocks per SM, est. achieved occupancy %) of spec 3.10's `test_gpu_utilization`
VECTOR = [(130, 10, 0.5, 0.6), (135, 15, 0.6, 0.1), (150, 0, 0.2, 0.5), (145, 25, 0.3, 1.0),
          (200, 20, 10.5, 0.3)]


def _vector_table(tmp_path):
    events = [step(1, 100, 100)]
    for i, (ts, dur, bpsm, occ) in enumerate(VECTOR):
        events.append(runtime(101 + i, 1, corr=i))
        events.append(kernel(ts, dur, corr=i, device=1, **{"blocks per SM": bpsm,
                                                           "est. achieved occupancy %": occ}))
    return make_table(events, tmp_path)


def test_gpu_utilization_vector(tmp_path):
    metrics = gpu_metrics(_vector_table(tmp_path))
    assert list(metrics) == [1]
    m = metrics[1]
    assert m.utilization == pytest.approx((40 + 20) / 120)
    assert m.sm_efficiency == pytest.approx(
        (0.5 * 5 + 1.0 * 5 + 0.6 * 5 + 0.9 * 5 + 0.3 * 20 + 1.0 * 20) / 120)
    assert m.achieved_occupancy == pytest.approx((6 + 1.5 + 25 + 6) / 70)


def test_utilization_timeline_vector(tmp_path):
    timeline = gpu_metrics(_vector_table(tmp_path))[1].timeline
    assert timeline.bucket_us == 10
    assert timeline.times.tolist() == list(range(100, 221, 10))  # 12 buckets + (220, 0)
    busy = {130, 140, 150, 160, 200, 210}
    assert timeline.values.tolist() == [1.0 if t in busy else 0.0 for t in range(100, 221, 10)]


def test_timeline_and_sm_ranges_of_the_vector(tmp_path):
    """What the trace view draws as counters: 13 utilization buckets from the first kernel,
    and one SM-efficiency value per elementary range (6 here)."""
    m = gpu_metrics(_vector_table(tmp_path))[1]
    assert m.timeline.times.size == 13 and float(m.timeline.times[0]) == 100.0
    starts, ends, values = m.sm_ranges
    assert starts.size == ends.size == values.size == 6
    assert (starts < ends).all()


def test_kernels_out_of_step(tmp_path):
    table = make_table([step(1, 100, 100), kernel(300, 10, corr=7, device=0,
                                                  **{"blocks per SM": 1.0,
                                                     "est. achieved occupancy %": 50})],
                       tmp_path)
    m = gpu_metrics(table)[0]
    assert m.utilization == 0.0 and m.sm_efficiency is None and m.achieved_occupancy is None


def test_zero_length_step_window_does_not_divide_by_zero(tmp_path):
    table = make_table([step(1, 100, 0), kernel(50, 10, device=0)], tmp_path)
    m = gpu_metrics(table)[0]
    assert m.utilization is None and m.sm_efficiency is None and m.achieved_occupancy is None


def test_no_kernels_no_gpus(tmp_path):
    assert gpu_metrics(make_table([step(1, 0, 10)], tmp_path)) == {}
    assert gpu_metrics(make_table([], tmp_path)) == {}


def test_gpu_id_falls_back_to_pid(tmp_path):
    legacy = {"ph": "X", "cat": "Kernel", "name": "k", "pid": 3, "tid": "stream 7", "ts": 0,
              "dur": 10, "args": {"correlation": 1}}
    table = make_table([step(1, 0, 20), legacy], tmp_path)
    assert list(gpu_metrics(table)) == [3]
    assert gpu_metrics(table)[3].utilization == pytest.approx(0.5)


def _launch(ts, grid, block, regs, shmem, **args):
    return kernel(ts, 10, device=0, grid=grid, block=block,
                  **{"registers per thread": regs, "shared memory": shmem, **args})


def test_missing_launch_stats_are_derived_from_device_properties(tmp_path):
    table = make_table([
        step(1, 0, 100),
        _launch(0, [160, 1, 1], [256, 1, 1], 32, 0),  # thread-bound: 2 blocks/SM, 25%
        _launch(20, [2048, 1, 1], [64, 1, 1], 88, 3328),  # register-bound: 10 blocks of 2 warps
        _launch(40, [160, 1, 1], [256, 1, 1], 32, 0, **{"blocks per SM": 9.0,
                                                        "est. achieved occupancy %": 77}),
    ], tmp_path, deviceProperties=[V100])
    frame = kernel_frame(table)
    assert frame["blocks_per_sm"].tolist() == pytest.approx([2.0, 25.6, 9.0])
    assert frame["occupancy"].tolist() == pytest.approx([25.0, 31.25, 77.0])
    m = gpu_metrics(table)[0]
    assert m.achieved_occupancy == pytest.approx((25.0 + 31.25 + 77) / 3)
    assert m.sm_efficiency == pytest.approx(30 / 100)


def test_without_device_properties_nothing_is_invented(tmp_path):
    table = make_table([step(1, 0, 100), _launch(0, [160, 1, 1], [256, 1, 1], 32, 0)], tmp_path)
    m = gpu_metrics(table)[0]
    assert m.utilization == pytest.approx(0.1)
    assert m.sm_efficiency is None and m.achieved_occupancy is None


def test_device_properties_are_matched_by_id(tmp_path):
    table = make_table([], tmp_path, deviceProperties=[{**V100, "id": 3, "name": "third"}])
    assert device_properties(table, 3)["name"] == "third"
    assert device_properties(table, 0) == {}


TRACES = SHARED_TRACES


@pytest.fixture(scope="module")
def resnet50():
    return load_trace(str(TRACES / "resnet50_gpu_pt19/worker0.1623143089861.pt.trace.json.gz"),
                      use_cache=False)


@needs_shared
def test_resnet50_golden_gpu_metrics(resnet50):
    m = gpu_metrics(resnet50)[0]
    assert 100 * m.utilization == pytest.approx(55.51, abs=0.1)
    assert 100 * m.sm_efficiency == pytest.approx(54.68, abs=0.1)
    assert m.achieved_occupancy == pytest.approx(49.13, abs=0.1)


@needs_shared
def test_derived_occupancy_agrees_with_kineto(resnet50):
    """Our estimate from grid/block/registers/shared memory vs the value Kineto wrote."""
    frame = kernel_frame(resnet50)
    args = device_args_of(resnet50, frame["event"].to_numpy())
    blocks_per_sm, occupancy = estimate_launch(
        device_properties(resnet50, 0), dims_product(args["grid"]), dims_product(args["block"]),
        args["registers_per_thread"].to_numpy(), args["shared_memory"].to_numpy())
    np.testing.assert_allclose(blocks_per_sm, frame["blocks_per_sm"], rtol=1e-6)
    close = np.abs(occupancy - frame["occupancy"].to_numpy()) < 1.0  # Kineto truncates to int
    assert close.mean() > 0.99
