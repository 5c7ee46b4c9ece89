"""`analysis.advice.diagnosis` on hand-built traces: the start-up calls (by name, summed, largest
first, only inside the steps), synchronising calls, the longest DataLoader range, MFMA kernels
by name, the step window, and the foreign step marker (a marker of a process that ran no
operator). Expected values are the events written here."""

from __future__ import annotations

from tb_plugin.analysis.advice.diagnosis import STARTUP_RE, add_diagnosis, foreign_marker
from tb_plugin.analysis.advice.facts import Facts
from tb_plugin.analysis.breakdown import compute_breakdown

from .helpers import cpu_op, kernel, make_table, runtime, step

LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _diagnosed(events, tmp_path):
    table = make_table(events, tmp_path)
    return add_diagnosis(Facts(average={"Total": 1.0}), table, compute_breakdown(table))


def test_startup_sync_loader_and_mfma(tmp_path):
    events = [
        step(1, 0, 1000), step(2, 1000, 1000), step(3, 2000, 1000),  # each launches a kernel
        runtime(10, 30, corr=1, name="cudaMalloc"), runtime(50, 20, corr=2, name="cudaMalloc"),
        runtime(100, 40, corr=3, name="cudaFree"),
        runtime(150, 5, corr=4, name="cudaMallocAsync"),  # not a start-up call
        runtime(-500, 60, corr=5, name="cuInit"),  # before the steps: not counted
        runtime(300, 25, corr=6, name="cudaDeviceSynchronize"),
        runtime(1300, 35, corr=7, name="cudaStreamSynchronize"),
        cpu_op(LOADER, 200, 50), cpu_op(LOADER, 1200, 80),
        runtime(400, 2, corr=8, name="cudaLaunchKernel"),
        kernel(410, 5, corr=8, name="Cijk_Alik_Bljk_SB_MT64x16x32_MI16x16x1_SN"),
        runtime(420, 2, corr=9, name="cudaLaunchKernel"),
        kernel(430, 5, corr=9, name="kernel_mfma_f32"),
        runtime(440, 2, corr=10, name="cudaLaunchKernel"),
        kernel(450, 5, corr=10, name="void plain_kernel()"),
        runtime(1390, 2, corr=11, name="cudaLaunchKernel"),
        kernel(1400, 5, corr=11, name="void plain_kernel()"),
        runtime(2390, 2, corr=12, name="cudaLaunchKernel"),
        kernel(2400, 5, corr=12, name="void plain_kernel()"),
    ]
    facts = _diagnosed(events, tmp_path)
    assert (facts.steps_range, facts.steps_us, facts.step_count) == ((0.0, 3000.0), 3000.0, 3)
    assert facts.step_bounds == [("1", 0.0, 1000.0), ("2", 1000.0, 2000.0),
                                 ("3", 2000.0, 3000.0)]
    assert facts.startup_calls == [("cudaMalloc", 50.0), ("cudaFree", 40.0)]
    assert (facts.startup_us, facts.startup_range) == (90.0, (100.0, 140.0))
    assert (facts.sync_calls, facts.sync_us) == (2, 60.0)
    assert facts.sync_names == ["cudaDeviceSynchronize", "cudaStreamSynchronize"]
    assert facts.sync_range == (1300.0, 1335.0)
    assert facts.dataloader_range == (1200.0, 1280.0)
    assert facts.matrix_core_kernels == 2
    assert facts.kernels == 5 and facts.foreign_marker is None
    assert facts.vendor == "nvidia"


def test_nothing_to_diagnose(tmp_path):
    facts = _diagnosed([step(1, 0, 100), step(2, 100, 100), cpu_op("aten::add", 10, 5)],
                       tmp_path)
    assert (facts.startup_calls, facts.startup_us, facts.startup_range) == ([], 0.0, None)
    assert (facts.sync_calls, facts.sync_names, facts.sync_range) == (0, [], None)
    assert (facts.dataloader_range, facts.matrix_core_kernels, facts.kernels) == (None, 0, 0)
    assert facts.gpu_idle_pct is None and facts.exposed_comm_pct is None


def test_startup_names():
    for name in ("cudaMalloc", "hipMalloc", "cudaFree", "cudaSetDevice", "cuInit",
                 "cudaGetDevicePropertiesV2", "cuModuleLoadData", "cudaStreamCreateWithFlags",
                 "cuDevicePrimaryCtxRetain", "cuLibraryLoadData", "hipDeviceEnablePeerAccess"):
        assert STARTUP_RE.match(name), name
    for name in ("cudaMallocAsync", "cudaFreeAsync", "xcudaMalloc", "cudaLaunchKernel",
                 "cuMalloc", "hipStreamSynchronize"):
        assert not STARTUP_RE.match(name), name


def test_foreign_marker(tmp_path):
    foreign = {**step(1, 0, 500), "pid": 999}
    short = {**step(2, 600, 100), "pid": 999}
    table = make_table([foreign, short, cpu_op("aten::add", 10, 5),
                        cpu_op("aten::mul", 20, 5)], tmp_path)
    assert foreign_marker(table) == {"name": "ProfilerStep#1", "pid": "999", "ops_pid": "100",
                                     "dur_us": 500.0, "range": (0.0, 500.0)}
    own = make_table([step(1, 0, 500), cpu_op("aten::add", 10, 5)], tmp_path)
    assert foreign_marker(own) is None
    no_ops = make_table([foreign], tmp_path)
    assert foreign_marker(no_ops) is None
