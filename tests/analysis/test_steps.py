import pytest

from tb_plugin.analysis.steps import compute_steps
from tb_plugin.load import load_trace
from tests.support import SHARED_TRACES, needs_shared

from .helpers import cpu_op, kernel, make_table, memcpy, overlap_events, runtime, step


def _ranges(steps):
    return list(zip(steps.starts.tolist(), steps.ends.tolist()))


def test_device_adjustment_no_overlap(tmp_path):
    """Spec 3.5 vector (a): steps stretch to the device work they launched."""
    table = make_table([
        step(1, 100, 200), step(2, 350, 150),
        runtime(150, 10, corr=1, name="cudaMemcpyAsync"), memcpy(280, 40, corr=1),
        runtime(360, 10, corr=2), kernel(410, 200, corr=2),
    ], tmp_path)
    steps = compute_steps(table)
    assert steps.names == ["1", "2"]
    assert _ranges(steps) == [(100, 320), (350, 610)]
    assert (steps.ends - steps.starts).tolist() == [220, 260]
    assert steps.device_adjusted and steps.from_markers
    assert (steps.steps_start, steps.steps_end) == (100, 610)


def test_staled_kernel_moves_first_step_and_tail_is_trimmed(tmp_path):
    """Spec 3.5 vector (b): a kernel from before profiling ends at 110; steps 2-3 launch nothing."""
    table = make_table([
        step(1, 100, 100), step(2, 200, 100), step(3, 300, 100),
        runtime(120, 10, corr=1), kernel(150, 180, corr=1),
        kernel(90, 20, corr=99),  # its launch was not captured
    ], tmp_path)
    steps = compute_steps(table)
    assert steps.names == ["1"]
    assert _ranges(steps) == [(110, 330)]
    assert steps.trimmed == 2 and steps.warnings


def test_overlapping_device_work_from_previous_launch(tmp_path):
    """A memcpy launched before step 1 ends at 240, step 1's own kernel starts at 275."""
    table = make_table(overlap_events(), tmp_path)
    assert _ranges(compute_steps(table)) == [(240, 380), (380, 610)]


def test_last_step_with_too_few_kernels_is_dropped(tmp_path):
    events = [step(1, 0, 100), step(2, 100, 100)]
    for i in range(10):  # 10 launches in step 1, 2 in step 2 (< 80%)
        events += [runtime(10 + i, 1, corr=i), kernel(20 + i, 1, corr=i)]
    events += [runtime(110, 1, corr=50), kernel(120, 1, corr=50),
               runtime(111, 1, corr=51), kernel(121, 1, corr=51)]
    steps = compute_steps(make_table(events, tmp_path))
    assert steps.names == ["1"] and steps.trimmed == 1


def test_runtime_straddling_step_boundary_is_not_matched(tmp_path):
    table = make_table([
        step(1, 100, 100), runtime(195, 10, corr=1), kernel(300, 50, corr=1),
    ], tmp_path)
    steps = compute_steps(table)
    assert _ranges(steps) == [(100, 200)] and not steps.device_adjusted


def test_fallback_step_spans_cpu_ops_and_device_work(tmp_path):
    """No ProfilerStep: one step "0" from the first CPU op to the last device end."""
    table = make_table([
        cpu_op("aten::to", 100, 60, ext=1),
        cpu_op("aten::nll_loss_backward", 300, 70, ext=4),
        runtime(310, 30, corr=40348, ext=4), kernel(320, 100, corr=40348, ext=4),
        cpu_op("user annotation outside", 0, 1000, cat="user_annotation"),  # not in the span
    ], tmp_path)
    steps = compute_steps(table)
    assert steps.names == ["0"] and not steps.from_markers
    assert _ranges(steps) == [(100, 420)]


@pytest.mark.parametrize("gpu_tid", [7, "stream 7"])
def test_gpu_user_annotation_steps_are_not_duplicated(tmp_path, gpu_tid):
    """Reference bug 7.6: Kineto mirrors ProfilerStep#N on the GPU timeline."""
    gpu = dict(cat="gpu_user_annotation", tid=gpu_tid)
    table = make_table([
        step(1, 100, 100), step(2, 200, 100),
        step(1, 150, 80, **gpu), step(2, 240, 90, **gpu),
    ], tmp_path)
    steps = compute_steps(table)
    assert steps.names == ["1", "2"]
    assert _ranges(steps) == [(100, 200), (200, 300)]


def test_non_numeric_step_markers_are_skipped(tmp_path):
    table = make_table([step(1, 0, 10), step("abc", 10, 10), step(2, 20, 10)], tmp_path)
    assert compute_steps(table).names == ["1", "2"]
    only_bad = make_table([step("abc", 10, 10), cpu_op("aten::add", 12, 3)], tmp_path)
    steps = compute_steps(only_bad)
    assert steps.names == ["0"] and _ranges(steps) == [(12, 15)]


def test_repeated_step_number_is_one_step(tmp_path):
    table = make_table([
        step(3, 100, 100, cat="cpu_op"), step(3, 100, 110), step(4, 210, 50),
    ], tmp_path)
    steps = compute_steps(table)
    assert steps.names == ["3", "4"] and _ranges(steps) == [(100, 210), (210, 260)]


def test_steps_are_ordered_by_time_not_number(tmp_path):
    table = make_table([step(10, 200, 10), step(9, 100, 10)], tmp_path)
    assert compute_steps(table).names == ["9", "10"]


def test_cuda_driver_launches_adjust_steps(tmp_path):
    """Triton launches kernels with cuLaunchKernel (cat cuda_driver), not a runtime call."""
    table = make_table([
        step(1, 100, 100),
        runtime(120, 10, corr=5, name="cuLaunchKernel", cat="cuda_driver"),
        kernel(150, 100, corr=5, name="triton_poi_fused_add_0"),
    ], tmp_path)
    assert _ranges(compute_steps(table)) == [(100, 250)]


def test_empty_trace_has_no_steps(tmp_path):
    steps = compute_steps(make_table([], tmp_path))
    assert len(steps) == 0 and steps.steps_start is None and steps.steps_end is None


def test_steps_are_memoised(tmp_path):
    table = make_table([step(1, 0, 10)], tmp_path)
    assert compute_steps(table) is compute_steps(table)


TRACES = SHARED_TRACES


@needs_shared
def test_resnet50_golden_steps():
    table = load_trace(str(TRACES / "resnet50_gpu_pt19/worker0.1623143089861.pt.trace.json.gz"),
                       use_cache=False)
    steps = compute_steps(table)
    assert steps.names == ["5", "6", "7", "8", "9", "10"]
    assert steps.trimmed == 0 and steps.device_adjusted


@needs_shared
def test_rocm_trace_ignores_gpu_side_step_markers():
    table = load_trace(str(TRACES / "amd_mi250_rocm/worker0.1700000000000.pt.trace.json.gz"),
                       use_cache=False)
    steps = compute_steps(table)
    assert len(set(steps.names)) == len(steps.names)
    assert steps.names == ["1"]  # step 2 launches nothing on the GPU: trimmed as incomplete


def _launches(step_start: float, n: int, corr: int) -> list:
    return [e for i in range(n) for e in (runtime(step_start + 10 + i, 1, corr=corr + i),
                                          kernel(step_start + 20 + i, 1, corr=corr + i))]


@pytest.mark.parametrize("last, kept", [(4, ["1", "2"]), (3, ["1"])])
def test_tail_kept_from_four_fifths_of_the_previous_step(tmp_path, last, kept):
    # 5 launches in step 1; the last step keeps with 4 (5 x 0.8 = 4 is not more than 4)
    events = [step(1, 0, 100), step(2, 100, 100), *_launches(0, 5, 0), *_launches(100, last, 50)]
    steps = compute_steps(make_table(events, tmp_path))
    assert steps.names == kept and steps.trimmed == 2 - len(kept)
    assert steps.warnings == ([] if len(kept) == 2 else [
        "Removed the last 1 step(s): the profiler may not have captured all the device work "
        "they launched"])
    assert len(steps.host_starts) == len(steps.host_ends) == len(steps.starts) == len(kept)


def test_trailing_steps_without_device_work_are_removed(tmp_path):
    events = [step(1, 0, 100), step(2, 100, 100), step(3, 200, 100), *_launches(0, 1, 0)]
    steps = compute_steps(make_table(events, tmp_path))
    assert steps.names == ["1"] and steps.trimmed == 2
    assert steps.warnings == ["Removed the last 2 step(s): the profiler may not have captured "
                              "all the device work they launched"]
    assert steps.host_ends.tolist() == [100.0]


def test_launch_on_the_step_edges_belongs_to_it(tmp_path):
    # the launch call fills step 1 exactly [100, 200): inside; its kernel ends at 260
    table = make_table([step(1, 100, 100), step(2, 200, 100), runtime(100, 100, corr=1),
                        kernel(210, 50, corr=1), runtime(200, 5, corr=2),
                        kernel(270, 10, corr=2)], tmp_path)
    assert _ranges(compute_steps(table)) == [(100, 260), (260, 300)]


@pytest.mark.parametrize("stale_end, start", [(150, 100), (149, 149)])
def test_stale_work_moves_the_first_step_only_when_it_ended_earlier(tmp_path, stale_end, start):
    # step 1's own kernel starts at 150; a kernel launched before profiling ends at stale_end:
    # the step starts after it only when it ended strictly before 150
    table = make_table([step(1, 100, 100), runtime(120, 10, corr=1), kernel(150, 20, corr=1),
                        kernel(stale_end - 60, 60, corr=99)], tmp_path)
    assert _ranges(compute_steps(table)) == [(start, 200)]


def test_step_ending_before_it_starts_is_made_empty(tmp_path):
    # step 1's kernel (stream 7) runs to 500; step 2's (stream 8) ends at 160: step 2 would end
    # (200) before it starts (500)
    table = make_table([step(1, 0, 100), step(2, 100, 100), runtime(10, 5, corr=1),
                        kernel(50, 450, corr=1), runtime(110, 5, corr=2),
                        kernel(150, 10, corr=2, stream=8)], tmp_path)
    steps = compute_steps(table)
    assert _ranges(steps) == [(0, 500), (500, 500)]
    assert steps.warnings == ["step 2 ends before it starts; made empty"]


def test_step_numbers_fit_in_int64(tmp_path):
    table = make_table([step(10 ** 17, 0, 10), step(10 ** 18, 10, 10), step("", 20, 10),
                        cpu_op("ProfilerStep#3 ", 30, 10, cat="user_annotation")], tmp_path)
    assert compute_steps(table).names == [str(10 ** 17)]  # 19 digits, "", "3 " skipped
