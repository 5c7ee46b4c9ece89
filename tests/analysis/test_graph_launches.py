"""`analysis.graph_launches` at the boundaries of its docstring's rules: capture windows per
thread (a Begin without an End runs to the end), captured calls from the window's start
(inclusive) to its end (exclusive), graph launches never captured, the charged device event
of a launch (earliest per stream, ties by row), and the backlog message's units."""

from __future__ import annotations

import math

import numpy as np

from tb_plugin.analysis import graph_launches as GL
from tb_plugin.analysis.device_work import device_work

from .helpers import kernel, make_table, runtime


def test_capture_windows_and_captured_calls(tmp_path):
    events = [
        runtime(10, 2, corr=1, name="cudaStreamBeginCapture"),  # 0: window [10, 65)
        runtime(10, 1, corr=2, name="cudaLaunchKernel"),  # 1: at the start: captured
        runtime(30, 1, corr=3, name="cudaMemcpyAsync"),  # 2: captured
        runtime(35, 1, corr=4, name="cudaMemsetAsync"),  # 3: captured
        runtime(40, 1, corr=5, name="cudaGraphLaunch"),  # 4: a graph launch: never captured
        runtime(45, 1, corr=6, name="cudaStreamSynchronize"),  # 5: not a launch
        runtime(60, 5, corr=7, name="cudaStreamEndCapture"),  # 6
        runtime(65, 1, corr=8, name="cudaLaunchKernel"),  # 7: at the end: outside
        runtime(20, 1, corr=9, name="cudaLaunchKernel", tid=5),  # 8: another thread
        runtime(100, 1, corr=10, name="hipStreamBeginCaptureAsync", tid=5),  # 9: no End
        runtime(500, 1, corr=11, name="hipLaunchKernel", tid=5),  # 10: captured
    ]
    table = make_table(events, tmp_path)
    windows = GL.capture_windows(table)
    spans = sorted(zip(windows["start"], windows["end"]))
    assert spans == [(10.0, 65.0), (100.0, math.inf)]
    assert GL.captured_launch_rows(table).tolist() == [1, 2, 3, 10]


def test_no_capture_windows(tmp_path):
    table = make_table([runtime(10, 2, corr=1), kernel(20, 5, corr=1)], tmp_path)
    assert len(GL.capture_windows(table)) == 0
    assert GL.captured_launch_rows(table).tolist() == []


def test_a_graph_launch_is_charged_once_per_stream(tmp_path):
    """One graph launch starting kernels at 30 and 20 on stream 7 and at 25 on stream 8: the
    20 us one and the stream-8 one are charged; a plain launch's kernel is charged."""
    events = [runtime(10, 5, corr=1, name="cudaGraphLaunch_v10000"),
              kernel(30, 5, corr=1, stream=7), kernel(20, 5, corr=1, stream=7),
              kernel(25, 5, corr=1, stream=8),
              runtime(50, 2, corr=2), kernel(60, 5, corr=2, stream=7)]
    table = make_table(events, tmp_path)
    work = device_work(table)
    charged = dict(zip(work["start"].tolist(), GL.charged_mask(table).tolist()))
    assert charged == {30.0: False, 20.0: True, 25.0: True, 60.0: True}
    replayed = dict(zip(work["start"].tolist(), GL.replayed_mask(table).tolist()))
    assert replayed == {30.0: True, 20.0: True, 25.0: True, 60.0: False}
    assert np.flatnonzero(GL.graph_launch_mask(table)).tolist() == [0]


def test_graph_launch_names():
    for name in ("cudaGraphLaunch", "hipGraphLaunch", "cuGraphLaunch", "cudaGraphLaunch_ptsz",
                 "cuGraphLaunch_spt", "cudaGraphLaunch_v10000_ptsz"):
        assert GL.GRAPH_LAUNCH_RE.search(name), name
    for name in ("cudaGraphLaunchX", "xcudaGraphLaunch", "cudaGraphInstantiate", "GraphLaunch"):
        assert not GL.GRAPH_LAUNCH_RE.search(name), name


def test_human_units():
    assert GL._human(1000.0) == "1.0 ms"
    assert GL._human(9_949.0) == "9.9 ms"
    assert GL._human(10_000.0) == "10 ms"
    assert GL._human(123_456.0) == "123 ms"
