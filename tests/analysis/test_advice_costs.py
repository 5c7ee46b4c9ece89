"""What advice would save (`analysis.advice.costs`): device idle time by cause on the device's
own timeline, host-only computation, and the architecture named by kernel names (graph capture
and replay are `analysis.graphs`'s, tested in test_graphs.py). Expected values are derived by
hand in the comments; the idle gaps are also checked
against a brute-force reference on random event sets (hypothesis)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_plugin.analysis import ranges as rg
from tb_plugin.analysis.advice.costs import (
    device_costs,
    device_gaps,
    host_compute_us,
    kernel_generation,
)
from tb_plugin.analysis.gpu_idle.idle import idle_breakdown

from .helpers import cpu_op, kernel, make_table, runtime, step


def _costs_trace() -> list[dict]:
    """One step [0, 1000); device 0, streams 7 and 8.

    K1 s7 [100, 200) and K2 s8 [150, 300): busy [100, 300).
    gap [300, 400): K3 launched [350, 380), after the device went idle: host wait 100, of it
      30 inside the launch call.
    gap [450, 500): K4 launched [420, 430), before the device went idle: queued, not host wait.
    sync [560, 700); gap [550, 760): K5 launched [710, 720): host wait 210, launch part 10; the
      sync's refill window [560, 760) is idle for 200.
    Totals: idle 100 + 50 + 210 = 360, host wait 310, launch 40, sync 200.
    """
    return [
        step(1, 0, 1000),
        runtime(50, 10, corr=1), kernel(100, 100, corr=1, stream=7),
        runtime(70, 10, corr=2), kernel(150, 150, corr=2, stream=8),
        runtime(350, 30, corr=3), kernel(400, 50, corr=3, stream=7),
        runtime(420, 10, corr=4), kernel(500, 50, corr=4, stream=7),
        runtime(560, 140, corr=99, name="cudaDeviceSynchronize"),
        runtime(710, 10, corr=5), kernel(760, 40, corr=5, stream=7),
    ]


def test_device_costs_by_cause(tmp_path):
    costs = device_costs(make_table(_costs_trace(), tmp_path), 0.0, 1000.0)
    assert costs == (0, 360.0, 310.0, 40.0, 200.0, 0.0, None)


def test_device_level_host_wait_differs_from_the_per_stream_sum(tmp_path):
    """Per stream, stream 7 alone is idle over [200, 400) (K2 ran meanwhile on stream 8): the
    per-stream host wait (200 + 210) is not the device's (100 + 210), which the rules use."""
    table = make_table(_costs_trace(), tmp_path)
    streams = idle_breakdown(table, 30.0)["streams"]
    assert sum(s["host_wait_us"] for s in streams) == 410.0
    assert device_costs(table, 0.0, 1000.0).host_wait_us == 310.0


def test_device_costs_are_clipped_to_the_window(tmp_path):
    # [350, 1000): the first gap keeps [350, 400) = 50 (still host wait: its cause is read from
    # the whole gap), its launch part [350, 380) = 30.
    costs = device_costs(make_table(_costs_trace(), tmp_path), 350.0, 1000.0)
    assert costs == (0, 50.0 + 50.0 + 210.0, 50.0 + 210.0, 40.0, 200.0, 0.0, None)


@pytest.mark.parametrize("launch_at,host_wait", [(100.0, 0.0), (100.5, 100.0)])
def test_host_wait_is_strict_at_the_gap_start(tmp_path, launch_at, host_wait):
    """A launch that starts exactly when the device goes idle was not late (as HTA); one a
    hair later makes the whole gap [100, 200) host wait."""
    events = [step(1, 0, 1000), runtime(10, 5, corr=1), kernel(50, 50, corr=1),
              runtime(launch_at, 5, corr=2), kernel(200, 10, corr=2)]
    assert device_costs(make_table(events, tmp_path), 0.0, 1000.0).host_wait_us == host_wait


def _stall_trace(delay: float) -> list[dict]:
    """K1 [100, 200); K2 launched [300, 310) (after the device went idle: a host-wait gap)
    starts `delay` after its launch returned; a sync [320, 330 + delay) waits for it."""
    return [step(1, 0, 5000), runtime(50, 10, corr=1), kernel(100, 100, corr=1),
            runtime(300, 10, corr=2), kernel(310 + delay, 10, corr=2),
            runtime(320, 10 + delay, corr=99, name="cudaDeviceSynchronize")]


def test_a_launch_that_starts_a_millisecond_after_it_returned_is_host_wait(tmp_path):
    """delay 1000 (not over STALL_MIN_US = 1000, strict): the gap [200, 1310) is host wait
    1110, launch part [300, 310) = 10, the sync's refill [320, 1310) idle 990, no stall."""
    costs = device_costs(make_table(_stall_trace(1000.0), tmp_path), 0.0, 5000.0)
    assert costs == (0, 1110.0, 1110.0, 10.0, 990.0, 0.0, None)


def test_a_launch_that_starts_over_a_millisecond_after_it_returned_stalled(tmp_path):
    """delay 1000.5 (over): the gap [200, 1310.5) is 1110.5; its part after the launch
    returned, [310, 1310.5) = 1000.5, stalled; host wait is the rest, [200, 310) = 110; the
    sync's idle [320, 1310.5) lies inside the stall: 0."""
    costs = device_costs(make_table(_stall_trace(1000.5), tmp_path), 0.0, 5000.0)
    assert costs == (0, 1110.5, 110.0, 10.0, 0.0, 1000.5, (310.0, 1310.5))


def test_a_queued_kernel_is_no_stall_when_the_gap_was_not_the_hosts(tmp_path):
    """K2 launched [60, 70), before the device went idle at 200, starts at 5000: the gap is
    not host wait (the work was queued when it began), so it is not priced as a stall either
    (a dependency on another device or stream, not this rule's)."""
    events = [step(1, 0, 6000), runtime(50, 5, corr=1), kernel(100, 100, corr=1),
              runtime(60, 10, corr=2), kernel(5000, 10, corr=2)]
    costs = device_costs(make_table(events, tmp_path), 0.0, 6000.0)
    assert (costs.idle_us, costs.host_wait_us, costs.stalled_us) == (4800.0, 0.0, 0.0)


def test_no_device_work_costs_nothing(tmp_path):
    table = make_table([step(1, 0, 100), cpu_op("aten::add", 10, 5)], tmp_path)
    assert device_costs(table, 0.0, 100.0) == (None, 0.0, 0.0, 0.0, 0.0, 0.0, None)


def _brute_idle(starts, ends, devices):
    """Per device: sum over sorted events of max(0, start - max(previous ends))."""
    total = 0.0
    for device in set(devices):
        mine = sorted((s, e) for s, e, d in zip(starts, ends, devices) if d == device)
        reach = -np.inf
        for s, e in mine:
            if reach > -np.inf and s > reach:
                total += s - reach
            reach = max(reach, e)
    return total


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 500), st.integers(0, 60), st.integers(0, 2)),
                min_size=1, max_size=40))
def test_device_gaps_equal_a_brute_force_reference(events):
    starts = np.array([float(s) for s, _, _ in events])
    ends = starts + np.array([float(d) for _, d, _ in events])
    devices = np.array([float(d) for _, _, d in events])
    work = pd.DataFrame({"device": devices, "start": starts, "end": ends,
                         "launch_start": np.nan, "launch_end": np.nan})
    gaps = device_gaps(work)
    assert float((gaps["end"] - gaps["start"]).sum()) == pytest.approx(
        _brute_idle(starts, ends, devices))
    for device in np.unique(devices):  # gaps are exactly the complement of the busy union
        mine = devices == device
        busy = rg.merge(starts[mine], ends[mine])
        window = ends[mine].max() - starts[mine].min()
        idle = gaps[gaps["device"] == device]
        assert float((idle["end"] - idle["start"]).sum()) == pytest.approx(
            window - rg.total_length(busy))


def _host_trace() -> list[dict]:
    """Host-only work (launches nothing) while no device event runs:
    preprocess [0, 300): 300; aten::mm launches K [330, 500); a CPU op [400, 600) is exposed
    over [500, 600): 100; a collective and a DataLoader call are not computation; parent
    [850, 950) with a launch-free child counts once: 100. Total 500."""
    return [
        step(1, 0, 1000),
        cpu_op("preprocess_video", 0, 300),
        cpu_op("aten::mm", 300, 50, ext=1), runtime(310, 10, corr=1, ext=1),
        kernel(330, 170, corr=1),
        cpu_op("aten::cpu_thing", 400, 200),
        cpu_op("gloo:all_reduce", 650, 50),
        cpu_op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 700, 100),
        cpu_op("parent", 850, 100), cpu_op("aten::add", 860, 10),
    ]


def test_host_compute_counts_launch_free_subtrees_while_the_device_idles(tmp_path):
    table = make_table(_host_trace(), tmp_path)
    assert host_compute_us(table, 0.0, 1000.0) == 500.0
    assert host_compute_us(table, 0.0, 900.0) == 450.0  # parent clipped to [850, 900)


@pytest.mark.parametrize("names,capability", [
    (["volta_sgemm_128x64_nn"], (7, 0)),
    (["turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn"], (7, 5)),
    (["sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16"], (8, 0)),
    (["ampere_sgemm_64x32_sliced1x4_nn", "volta_sgemm_128x64_nn"], (8, 0)),
    (["sm90_xmma_gemm_bf16bf16_bf16f32"], (9, 0)),
    (["void at::native::vectorized_elementwise_kernel<4>()"], None),
])
def test_kernel_names_name_the_architecture(tmp_path, names, capability):
    events = [step(1, 0, 100)]
    for i, name in enumerate(names):
        events += [runtime(10 + i, 1, corr=i + 1), kernel(20 + i, 1, corr=i + 1, name=name)]
    assert kernel_generation(make_table(events, tmp_path)) == capability
