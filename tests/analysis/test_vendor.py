"""`analysis.vendor`: a device's properties first, else the runtime calls (`hip*` against
`cuda*` / `cu[A-Z]*`, the majority, a tie is unknown); a whole trace's vendor is its devices'
when they agree, else the runtime's."""

from __future__ import annotations

import pytest

from tb_plugin.analysis.vendor import (
    device_vendor,
    runtime_vendor,
    trace_vendor,
    vendor_of_properties,
)

from .helpers import cpu_op, make_table, runtime

MI300 = {"id": 0, "name": "AMD Instinct MI300X"}
H100 = {"id": 1, "name": "NVIDIA H100"}


def _calls(*names, cat="cuda_runtime"):
    return [runtime(10.0 * i, 1, corr=i + 1, name=n, cat=cat) for i, n in enumerate(names)]


@pytest.mark.parametrize(("names", "expected"), [
    (["hipLaunchKernel"], "amd"),
    (["cudaLaunchKernel"], "nvidia"),
    (["cuLaunchKernel"], "nvidia"),
    (["cudaMemcpyAsync", "hipLaunchKernel", "hipMemcpyAsync"], "amd"),
    (["cudaMemcpyAsync", "cuLaunchKernel", "hipMemcpyAsync"], "nvidia"),
    (["cudaLaunchKernel", "hipLaunchKernel"], "unknown"),  # a tie
    (["culaunch", "Hip"], "unknown"),  # cu + lower case, capital H: neither
    (["xLaunch"], "unknown"),
])
def test_runtime_vendor(tmp_path, names, expected):
    assert runtime_vendor(make_table(_calls(*names), tmp_path)) == expected


def test_runtime_vendor_reads_only_runtime_and_driver_calls(tmp_path):
    assert runtime_vendor(make_table([cpu_op("hipLaunchKernel", 0, 5)], tmp_path)) == "unknown"
    assert runtime_vendor(make_table(_calls("hipModuleLaunchKernel", cat="hip_driver"),
                                     tmp_path)) == "amd"
    assert runtime_vendor(make_table([cpu_op("aten::add", 0, 5)], tmp_path)) == "unknown"


def test_vendor_of_properties():
    assert vendor_of_properties(MI300) == "amd"
    assert vendor_of_properties(H100) == "nvidia"
    assert vendor_of_properties({"name": "Accelerator"}) == "unknown"
    assert vendor_of_properties({}) == "unknown"


def test_device_vendor_prefers_the_properties(tmp_path):
    table = make_table(_calls("hipLaunchKernel"), tmp_path, deviceProperties=[MI300, H100])
    assert device_vendor(table, 0) == "amd"
    assert device_vendor(table, 1) == "nvidia"  # its properties, not the hip calls
    assert device_vendor(table, 5) == "amd"  # no properties: the runtime calls
    bare = make_table(_calls("cudaLaunchKernel"), tmp_path,
                      deviceProperties=[{"id": 0, "name": "Accelerator"}])
    assert device_vendor(bare, 0) == "nvidia"


def test_trace_vendor(tmp_path):
    hip = _calls("hipLaunchKernel")
    assert trace_vendor(make_table(hip, tmp_path, deviceProperties=[H100])) == "nvidia"
    assert trace_vendor(make_table(hip, tmp_path, deviceProperties=[
        H100, {**H100, "id": 2}])) == "nvidia"
    # devices disagree, or say nothing: the runtime's
    assert trace_vendor(make_table(hip, tmp_path, deviceProperties=[MI300, H100])) == "amd"
    assert trace_vendor(make_table(hip, tmp_path, deviceProperties=[
        {"id": 0, "name": "Accelerator"}, "not a dict"])) == "amd"
    assert trace_vendor(make_table(hip, tmp_path)) == "amd"
    assert trace_vendor(make_table([cpu_op("aten::add", 0, 5)], tmp_path)) == "unknown"
