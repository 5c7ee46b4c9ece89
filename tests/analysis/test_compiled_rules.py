"""`analysis.efficiency.compiled` on hand-built traces: each number of a region (host, guard,
launch and device time, kernel count), of an Inductor kernel row and of an extern op row is
summed here from the events written, and the rows' order (device time, then host time
descending, then name) is pinned on ties."""

from __future__ import annotations

from tb_plugin.analysis.efficiency.compiled import build_compiled
from tests.analysis.helpers import cpu_op, kernel, make_table, py, runtime

REGION_A = "Torch-Compiled Region: 0/0"
REGION_B = "Torch-Compiled Region: 1/0"


def _launched(name, ts, dur, ext, kernel_dur, **args):
    """An op at ts..ts+dur launching one kernel (a 2 us cudaLaunchKernel at ts+1)."""
    return [cpu_op(name, ts, dur, ext=ext, **args), runtime(ts + 1, 2, corr=ext, ext=ext),
            kernel(ts + 3, kernel_dur, corr=ext, ext=ext)]


def _events():
    return [
        # eager work before any region: its 5 us kernel belongs to no region
        *_launched("aten::mm", 0, 20, 1, 5),
        cpu_op("TorchDynamo Cache Lookup", 25, 3),
        cpu_op(REGION_A, 30, 100, ext=2),
        *_launched("triton_poi_fused_add_cos_0", 40, 10, 3, 7),
        *_launched("aten::mm", 55, 20, 4, 11),
        *_launched("aten::addmm", 80, 20, 5, 11),
        cpu_op("aten::bmm", 101, 25),
        cpu_op("my_triton_x", 127, 2),  # not an Inductor kernel: the name does not start so
        # the second call of region A (no guard before it)
        cpu_op(REGION_A, 200, 50, ext=6),
        *_launched("triton_poi_fused_add_cos_0", 210, 10, 7, 9),
        # region B: more device time than A, so it comes first
        cpu_op("TorchDynamo Cache Lookup", 290, 6),
        cpu_op(REGION_B, 300, 80, ext=8),
        *_launched("triton_red_fused_sum_1", 310, 20, 9, 60),
    ]


def test_regions_sum_their_instances(tmp_path):
    payload = build_compiled(make_table(_events(), tmp_path))
    assert payload["available"] is True and payload["inductor_kernels"] == 3
    b, a = payload["regions"]
    assert {k: v for k, v in b.items() if k not in ("inductor_kernels", "extern_ops")} == {
        "name": REGION_B, "calls": 1, "host_us": 80.0, "guard_us": 6.0, "launch_us": 2.0,
        "device_us": 60.0, "device_kernels": 1}
    assert {k: v for k, v in a.items() if k not in ("inductor_kernels", "extern_ops")} == {
        "name": REGION_A, "calls": 2, "host_us": 150.0, "guard_us": 3.0,
        "launch_us": 2.0 * 4, "device_us": 7 + 11 + 11 + 9.0, "device_kernels": 4}


def test_inductor_kernel_rows(tmp_path):
    b, a = build_compiled(make_table(_events(), tmp_path))["regions"]
    assert a["inductor_kernels"] == [{
        "name": "triton_poi_fused_add_cos_0", "file": None, "line": None, "hash": None,
        "backend": None, "fused": "add_cos", "calls": 2, "host_us": 20.0, "device_us": 16.0,
        "device_kernels": 2}]
    assert [k["name"] for k in b["inductor_kernels"]] == ["triton_red_fused_sum_1"]
    assert b["inductor_kernels"][0]["fused"] == "sum"
    assert b["inductor_kernels"][0]["device_us"] == 60.0


def test_extern_rows_by_device_then_host_then_name(tmp_path):
    b, a = build_compiled(make_table(_events(), tmp_path))["regions"]
    # mm and addmm tie on device (11) and host (20) time: by name; bmm launches nothing
    assert a["extern_ops"] == [
        {"name": "aten::addmm", "calls": 1, "host_us": 20.0, "device_us": 11.0},
        {"name": "aten::mm", "calls": 1, "host_us": 20.0, "device_us": 11.0},
        {"name": "aten::bmm", "calls": 1, "host_us": 25.0, "device_us": 0.0},
    ]
    assert b["extern_ops"] == []


def test_regions_tied_on_device_time_go_by_host_time_then_name(tmp_path):
    events = [cpu_op("Torch-Compiled Region: 9/0", 0, 50),
              cpu_op("Torch-Compiled Region: 2/0", 100, 40),
              cpu_op("Torch-Compiled Region: 5/0", 200, 50),
              cpu_op("Torch-Compiled Region: 1/0", 300, 60)]
    names = [r["name"] for r in build_compiled(make_table(events, tmp_path))["regions"]]
    assert names == ["Torch-Compiled Region: 1/0", "Torch-Compiled Region: 5/0",
                     "Torch-Compiled Region: 9/0", "Torch-Compiled Region: 2/0"]


def test_a_trace_without_regions(tmp_path):
    payload = build_compiled(make_table(_launched("triton_poi_fused_add_0", 0, 10, 1, 3),
                                        tmp_path))
    assert payload == {"available": False, "regions": [], "inductor_kernels": 0}


def test_guards_sources_and_backends(tmp_path):
    """A guard counts for the region right after it on its thread only: not from another
    thread, not across a region in between. A C++ kernel's source is the enclosing generated
    module frame (file and line), a Triton kernel's its `kernel_file` (no line); a kernel
    outside any such frame (or sticking out of it) has none."""
    frame = "/tmp/torchinductor_u/ab/cab.py"
    events = [
        cpu_op("TorchDynamo Cache Lookup", 0, 4),
        cpu_op(REGION_A, 10, 100),
        py(f"{frame}(42): call", 15, 80, python_id=1),
        cpu_op("cpp_fused_add_mul_0", 20, 10),
        cpu_op("triton_poi_fused_relu_1", 40, 10, kernel_file="/tmp/torchinductor_u/xy/k.py",
               kernel_hash="abc", kernel_backend="triton"),
        cpu_op("cpp_fused_sub_2", 90, 10),  # ends after the frame (95)
        cpu_op("TorchDynamo Cache Lookup", 120, 3, tid=7),  # another thread
        cpu_op(REGION_A, 130, 50),
        cpu_op("cpp_fused_div_3", 140, 5),  # no frame at all
        cpu_op("TorchDynamo Cache Lookup", 190, 2),
        cpu_op(REGION_B, 195, 5),
        cpu_op(REGION_A, 201, 5),  # region B sits between it and the guard
    ]
    a, b = build_compiled(make_table(events, tmp_path))["regions"]
    assert (a["name"], a["calls"], a["host_us"], a["guard_us"]) == (REGION_A, 3, 155.0, 4.0)
    assert (b["name"], b["calls"], b["guard_us"]) == (REGION_B, 1, 2.0)
    rows = {k["name"]: k for k in a["inductor_kernels"]}
    # no device time: by host time (div's 5 us last), then by name
    assert [k["name"] for k in a["inductor_kernels"]] == [
        "cpp_fused_add_mul_0", "cpp_fused_sub_2", "triton_poi_fused_relu_1", "cpp_fused_div_3"]
    assert {n: (k["file"], k["line"], k["hash"], k["backend"], k["fused"])
            for n, k in rows.items()} == {
        "cpp_fused_add_mul_0": (frame, 42, None, "cpp", "add_mul"),
        "triton_poi_fused_relu_1": ("/tmp/torchinductor_u/xy/k.py", None, "abc", "triton",
                                    "relu"),
        "cpp_fused_sub_2": (None, None, None, "cpp", "sub"),
        "cpp_fused_div_3": (None, None, None, "cpp", "div"),
    }


def test_fx_graph_calls_and_backward_regions(tmp_path):
    """An Inductor graph call outside any Dynamo region is a region; inside one it is the same
    work (the Dynamo region counts it). `CompiledFunctionBackward` is a region. Only launch
    calls ("launch" in the name) count as launch time; a memcpy call does not."""
    fx = "## Call CompiledFxGraph fabc123 ##"
    events = [
        cpu_op(fx, 0, 50, cat="user_annotation"),
        *_launched("triton_poi_fused_mul_0", 10, 10, 1, 4),
        cpu_op(REGION_A, 100, 60),
        cpu_op(fx, 105, 50, cat="user_annotation"),
        *_launched("triton_poi_fused_add_1", 110, 10, 2, 6),
        runtime(125, 7, corr=50, name="cudaMemcpyAsync"),
        cpu_op("CompiledFunctionBackward", 200, 40),
        *_launched("triton_red_fused_sum_2", 210, 10, 3, 8),
        cpu_op("CompiledFunctionBackwardX", 250, 5),  # not a region name
    ]
    regions = {r["name"]: r for r in build_compiled(make_table(events, tmp_path))["regions"]}
    assert set(regions) == {fx, REGION_A, "CompiledFunctionBackward"}
    assert (regions[fx]["calls"], regions[fx]["device_us"], regions[fx]["launch_us"]) == (
        1, 4.0, 2.0)
    assert [k["name"] for k in regions[fx]["inductor_kernels"]] == ["triton_poi_fused_mul_0"]
    assert (regions[REGION_A]["device_us"], regions[REGION_A]["launch_us"]) == (6.0, 2.0)
    assert [k["name"] for k in regions[REGION_A]["inductor_kernels"]] == [
        "triton_poi_fused_add_1"]
    assert regions["CompiledFunctionBackward"]["device_us"] == 8.0
    # by device time: backward 8, region A 6, the graph call 4
    assert list(regions) == ["CompiledFunctionBackward", REGION_A, fx]


def test_extern_ops_tied_on_device_time_go_by_host_time(tmp_path):
    events = [cpu_op(REGION_A, 0, 100), cpu_op("aten::cat", 10, 5), cpu_op("aten::bmm", 20, 25),
              cpu_op("aten::add", 50, 15)]
    [region] = build_compiled(make_table(events, tmp_path))["regions"]
    assert [(e["name"], e["host_us"]) for e in region["extern_ops"]] == [
        ("aten::bmm", 25.0), ("aten::add", 15.0), ("aten::cat", 5.0)]


def test_a_guard_counts_up_to_the_region_start_and_only_as_its_sibling(tmp_path):
    """A guard ending exactly where the region starts counts; one nested in another op (not
    the region's sibling) does not."""
    touching = [cpu_op("TorchDynamo Cache Lookup", 10, 5), cpu_op(REGION_A, 15, 20)]
    [region] = build_compiled(make_table(touching, tmp_path))["regions"]
    assert region["guard_us"] == 5.0
    nested = [cpu_op("wrapper", 0, 10), cpu_op("TorchDynamo Cache Lookup", 2, 3),
              cpu_op(REGION_A, 20, 20)]
    [region] = build_compiled(make_table(nested, tmp_path))["regions"]
    assert region["guard_us"] == 0.0
