import numpy as np
import pytest

from tb_plugin.analysis.breakdown import CATEGORIES, compute_breakdown
from tb_plugin.analysis.events import is_comm_op_name, is_nccl_kernel_name
from tb_plugin.load import load_trace
from tests.support import SHARED_TRACES, needs_shared

from .helpers import (
    cpu_op,
    kernel,
    make_table,
    memcpy,
    memset,
    overlap_events,
    runtime,
    step,
    trace_files,
)


def _step_costs(breakdown, i=0):
    return {c: float(breakdown.costs[c][i]) for c in CATEGORIES}


def _expect(**costs):
    names = {"CPU": "CPU Exec"}
    full = dict.fromkeys(CATEGORIES, 0.0)
    full.update({names.get(k, k): float(v) for k, v in costs.items()})
    return full


def test_all_categories(tmp_path):
    """Spec 3.6 worked example."""
    table = make_table([
        step(1, 50, 400),
        cpu_op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 100, 180,
               cat="user_annotation"),
        cpu_op("aten::to", 200, 60, ext=2),
        cpu_op("aten::nll_loss_backward", 340, 70, ext=4),
        runtime(360, 20, corr=1, ext=4), kernel(430, 15, corr=1, ext=4),
        runtime(390, 10, corr=2, ext=4, name="cudaMemcpyAsync"), memcpy(405, 10, corr=2, ext=4),
        runtime(405, 5, corr=3, ext=4, name="cudaMemsetAsync"), memset(420, 5, corr=3, ext=4),
    ], tmp_path)
    b = compute_breakdown(table)
    assert b.steps.names == ["1"] and b.totals.tolist() == [400]
    assert _step_costs(b) == _expect(Kernel=15, Memcpy=10, Memset=5, Runtime=30, DataLoader=180,
                                     CPU=35, Other=125)


def test_slot_reset_bug_is_fixed(tmp_path):
    """Reference bug 3.6: a kernel covering the whole step must leave nothing to other roles."""
    table = make_table([
        step(1, 0, 100), cpu_op("aten::mm", 10, 20, ext=1),
        runtime(10, 10, corr=1, ext=1), kernel(0, 100, corr=1, ext=1),
    ], tmp_path)
    b = compute_breakdown(table)
    assert _step_costs(b) == _expect(Kernel=100)
    assert sum(_step_costs(b).values()) == b.totals[0] == 100


def test_runtime_called_by_profilerstep(tmp_path):
    table = make_table([
        step(1, 100, 300),
        runtime(150, 20, corr=1), kernel(200, 8, corr=1),
    ], tmp_path)
    assert _step_costs(compute_breakdown(table)) == _expect(Kernel=8, Runtime=20, Other=272)


def test_no_profilerstep(tmp_path):
    table = make_table([
        cpu_op("aten::to", 100, 60, ext=1),
        cpu_op("aten::nll_loss_backward", 300, 70, ext=4),
        runtime(310, 30, corr=40348, ext=4), kernel(320, 100, corr=40348, ext=4),
    ], tmp_path)
    b = compute_breakdown(table)
    assert b.steps.names == ["0"] and b.totals.tolist() == [320]
    assert _step_costs(b) == _expect(Kernel=100, Runtime=10, CPU=70, Other=140)


def test_multiple_profilersteps_no_overlap(tmp_path):
    table = make_table([
        step(1, 100, 200), step(2, 350, 150),
        cpu_op("aten::to", 120, 40, ext=1),
        runtime(150, 10, corr=1, ext=1, name="cudaMemcpyAsync"), memcpy(280, 40, corr=1),
        runtime(360, 10, corr=2), kernel(410, 200, corr=2),
    ], tmp_path)
    b = compute_breakdown(table)
    assert b.totals.tolist() == [220, 260]
    assert _step_costs(b, 0) == _expect(Memcpy=40, Runtime=10, CPU=30, Other=140)
    assert _step_costs(b, 1) == _expect(Kernel=200, Runtime=10, Other=50)


def test_multiple_profilersteps_with_overlap(tmp_path):
    """Step 1 = [240,380): CPU 15, Other 20; step 2 = [380,610): Kernel 200, CPU 25, Runtime 5."""
    b = compute_breakdown(make_table(overlap_events(), tmp_path))
    assert b.totals.tolist() == [140, 230]
    assert _step_costs(b, 0) == _expect(Kernel=105, CPU=15, Other=20)
    assert _step_costs(b, 1) == _expect(Kernel=200, CPU=25, Runtime=5)


def test_pure_cpu(tmp_path):
    table = make_table([
        step(1, 100, 200), cpu_op("aten::add", 150, 10),
        step(2, 300, 100), cpu_op("aten::mul", 320, 40),
    ], tmp_path)
    b = compute_breakdown(table)
    assert _step_costs(b, 0) == _expect(CPU=10, Other=190)
    assert _step_costs(b, 1) == _expect(CPU=40, Other=60)
    assert not b.has_gpu and not b.has_communication
    assert b.shown_categories() == ["DataLoader", "CPU Exec", "Other"]
    assert b.average == {"Total": 150.0, **_expect(CPU=25, Other=125)}


def test_nccl_kernels_and_comm_ops_are_communication(tmp_path):
    table = make_table([
        step(1, 0, 1000),
        cpu_op("record_param_comms", 100, 50, ext=7),
        cpu_op("nccl:all_reduce", 110, 30, ext=8, cat="user_annotation"),
        runtime(115, 5, corr=1, ext=8), kernel(200, 100, corr=1, ext=8, name="void reduce_k()"),
        runtime(120, 5, corr=2, ext=0), kernel(400, 50, corr=2,
                                               name="ncclDevKernel_AllGather_RING_LL(x)"),
        cpu_op("aten::mm", 500, 50, ext=9),
        runtime(510, 5, corr=3, ext=9), kernel(600, 20, corr=3, ext=9),
    ], tmp_path)
    b = compute_breakdown(table)
    costs = _step_costs(b)
    # comm ops [100,150) (runtimes inside rank lower) + comm kernels (by external id, by name)
    assert costs["Communication"] == 50 + 100 + 50
    assert costs["Kernel"] == 20 and costs["Runtime"] == 5 and costs["CPU Exec"] == 45
    assert b.has_communication and "Communication" in b.shown_categories()


def test_gloo_kernels_stay_kernels(tmp_path):
    table = make_table([
        step(1, 0, 1000),
        cpu_op("gloo:all_reduce", 100, 200, ext=8),
        runtime(150, 5, corr=1, ext=8), kernel(400, 100, corr=1, ext=8),
    ], tmp_path)
    costs = _step_costs(compute_breakdown(table))
    assert costs["Kernel"] == 100 and costs["Communication"] == 200


def test_cuda_driver_launch_counts_as_runtime(tmp_path):
    table = make_table([
        step(1, 0, 100),
        runtime(10, 20, corr=1, name="cuLaunchKernel", cat="cuda_driver"),
        kernel(50, 10, corr=1, name="triton_poi_fused_0"),
    ], tmp_path)
    assert _step_costs(compute_breakdown(table)) == _expect(Kernel=10, Runtime=20, Other=70)


def test_gpu_user_annotation_is_not_cpu_time(tmp_path):
    table = make_table([
        step(1, 0, 100),
        cpu_op("forward", 10, 80, cat="gpu_user_annotation", tid=7),
    ], tmp_path)
    assert _step_costs(compute_breakdown(table)) == _expect(Other=100)


def test_datapipe_is_dataloader(tmp_path):
    table = make_table([
        step(1, 0, 100),
        cpu_op("enumerate(DataPipe)#ShufflerIterDataPipe", 0, 23, cat="user_annotation"),
    ], tmp_path)
    assert _step_costs(compute_breakdown(table)) == _expect(DataLoader=23, Other=77)


def test_profiler_step_is_not_a_role(tmp_path):
    table = make_table([step(1, 0, 100), step("abc", 0, 50)], tmp_path)
    assert _step_costs(compute_breakdown(table)) == _expect(Other=100)


def test_empty_trace(tmp_path):
    b = compute_breakdown(make_table([], tmp_path))
    assert b.average == {"Total": 0.0, **_expect()}


@pytest.mark.parametrize("name", [
    "nccl:all_reduce", "nccl:broadcast", "gloo:reduce_scatter", "nccl:all_to_all",
    "nccl:send", "nccl:recv", "nccl:_all_gather_base", "nccl:coalesced", "record_param_comms",
    "c10d::allreduce_", "c10d::_allgather_base_", "c10d::alltoall_base_", "c10d::send",
    "c10d::recv_", "c10d::reduce_scatter_tensor_coalesced_", "c10d::broadcast_",
    "_c10d_functional::all_reduce", "_allgather_base", "_reduce_scatter_base",
])
def test_comm_op_names(name):
    assert is_comm_op_name(name)


@pytest.mark.parametrize("name", [
    "aten::gather", "aten::scatter_add_", "aten::all", "record_param_comms_x",
    "GatherBackward0", "DistributedDataParallel.forward", "c10d::wait", "ncclX",
])
def test_not_comm_op_names(name):
    assert not is_comm_op_name(name)


def test_nccl_kernel_names():
    assert is_nccl_kernel_name("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, ...)")
    assert is_nccl_kernel_name("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096>)")
    assert not is_nccl_kernel_name("void at::native::reduce_kernel<512, 1>()")


TRACES = SHARED_TRACES
GOLDEN = {"Total": 177592, "Kernel": 98589, "Memcpy": 1915, "Memset": 89, "Runtime": 2908,
          "DataLoader": 59262, "CPU Exec": 13674, "Other": 1156}


@needs_shared
def test_resnet50_golden_breakdown():
    table = load_trace(str(TRACES / "resnet50_gpu_pt19/worker0.1623143089861.pt.trace.json.gz"),
                       use_cache=False)
    b = compute_breakdown(table)
    assert b.steps.names == ["5", "6", "7", "8", "9", "10"]
    average = b.average
    for category, expected in GOLDEN.items():
        assert average[category] == pytest.approx(expected, rel=0.005), category
    assert average["Communication"] == 0.0 and not b.has_communication


@needs_shared
@pytest.mark.parametrize("path", trace_files(), ids=lambda p: f"{p.parent.name}/{p.name[:12]}")
def test_real_traces_categories_sum_to_step_length(path):
    b = compute_breakdown(load_trace(str(path), use_cache=False))
    assert len(b.steps) > 0
    summed = np.sum([b.costs[c] for c in CATEGORIES], axis=0)
    np.testing.assert_allclose(summed, b.totals, rtol=1e-9, atol=1e-6)
    assert all((b.costs[c] >= 0).all() for c in CATEGORIES)
