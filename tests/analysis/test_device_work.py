"""`analysis.device_work`: one row per device event with its class, GPU, stream (the `stream`
arg, else the number ending the tid, else NaN), launch and times, sorted by (device, stream,
start, end); events of no GPU are left out. Expected rows are listed by hand."""

from __future__ import annotations

import math

from tb_plugin.analysis.device_work import device_work
from tb_plugin.ingest.schema import Kind

from .helpers import cpu_op, device_event, kernel, make_table, memcpy, memset, runtime


def test_device_work_rows(tmp_path):
    legacy = {**device_event("kernel", "legacy", 5, 1, corr=None, device=None), "pid": 3,
              "tid": "stream 9", "args": {}}
    nameless = {**device_event("kernel", "odd", 6, 1, corr=None, device=None), "pid": "GPU",
                "tid": "x", "args": {}}
    events = [
        cpu_op("nccl:all_reduce", 0, 50, ext=7),  # 0
        runtime(2, 2, corr=1, ext=7),  # 1
        kernel(40, 10, corr=1, ext=7, stream=8),  # 2: communication (launched by a comm op)
        runtime(10, 3, corr=2),  # 3
        memcpy(30, 4, corr=2, stream=7),  # 4: memory
        memset(20, 2, stream=7),  # 5: memory, no launch
        kernel(20, 5, stream=7, device=1),  # 6: GPU 1
        kernel(25, 5, stream=7),  # 7: ends after the memset, starts after it
        legacy,  # 8: GPU 3 (pid), stream 9 (tid)
        nameless,  # 9: no GPU: left out
    ]
    work = device_work(make_table(events, tmp_path))
    rows = [(r.event, r.kind, r.cls, r.start, r.end, r.dur, r.device, r.stream, r.launch)
            for r in work.itertuples()]
    assert rows == [
        (5, Kind.MEMSET, 2, 20.0, 22.0, 2.0, 0.0, 7.0, -1),
        (7, Kind.KERNEL, 0, 25.0, 30.0, 5.0, 0.0, 7.0, -1),
        (4, Kind.MEMCPY, 2, 30.0, 34.0, 4.0, 0.0, 7.0, 3),
        (2, Kind.KERNEL, 1, 40.0, 50.0, 10.0, 0.0, 8.0, 1),
        (6, Kind.KERNEL, 0, 20.0, 25.0, 5.0, 1.0, 7.0, -1),
        (8, Kind.KERNEL, 0, 5.0, 6.0, 1.0, 3.0, 9.0, -1),
    ]
    assert work.index.tolist() == list(range(6))
    launched = work.set_index("event")
    assert (launched.at[4, "launch_start"], launched.at[4, "launch_end"]) == (10.0, 13.0)
    assert (launched.at[2, "launch_start"], launched.at[2, "launch_end"]) == (2.0, 4.0)
    assert math.isnan(launched.at[5, "launch_start"]) and math.isnan(launched.at[5, "launch_end"])


def test_a_stream_tid_without_a_number_is_nan(tmp_path):
    odd = {**device_event("kernel", "odd", 6, 1, corr=None, device=None), "pid": 0,
           "tid": "main", "args": {}}
    work = device_work(make_table([odd], tmp_path))
    assert work["device"].tolist() == [0.0] and math.isnan(work["stream"].iloc[0])
