"""`analysis.efficiency.roofline`'s row rules on hand-made operator rows (module docstring):
achieved TFLOP/s and TB/s, intensity, the compute/memory bound at the ridge point (inclusive),
MBU, and the above-the-roof flag strictly over 5% with its reasons in order (algorithmic
convolution, a faster precision, overlap, unknown / bytes). Peaks: A100-40GB (fp16 312 TFLOP/s,
fp32 19.5, tf32 156, int8 624), with a 2 TB/s bandwidth given here."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tb_plugin.analysis.efficiency import roofline as R
from tb_plugin.analysis.efficiency.hardware import PEAKS

from .helpers import cpu_op, make_table

KEY = "A100-40GB"
INFO = {"memory_tbps": 2.0}


def _r(flops, nbytes, time_us=1000.0, precision="fp16", name="aten::mm", algorithmic=False,
       overlap=False, reason=None):
    return SimpleNamespace(name=name, dtype="fp16", precision=precision, calls=3, flops=flops,
                           bytes=nbytes, time_us=time_us, estimate=True, reason=reason,
                           algorithmic=algorithmic, overlap=overlap)


def test_ratio():
    assert R._ratio(6.0, 3.0) == 2.0
    assert R._ratio(6.0, 0.0) is None and R._ratio(6.0, -1.0) is None
    assert R._ratio(0.0, 3.0) is None and R._ratio(-6.0, 3.0) is None
    assert R._ratio(float("nan"), 3.0) is None and R._ratio(float("inf"), 3.0) is None


def test_row_numbers():
    # 1 ms: 156e9 FLOPs -> 156 TFLOP/s; 1e9 bytes -> 1 TB/s; intensity 156 = ridge 312 / 2
    row = R._row(_r(156e9, 1e9), KEY, INFO)
    assert row == {"name": "aten::mm", "dtype": "fp16", "precision": "fp16", "calls": 3,
                   "flops": 156e9, "bytes": 1e9, "time_us": 1000.0,
                   "achieved_tflops": pytest.approx(156.0), "achieved_tbps": pytest.approx(1.0),
                   "intensity": 156.0, "bound": "compute", "peak_tflops": 312.0,
                   "estimate": True, "flops_reason": None, "mbu_pct": pytest.approx(50.0),
                   "above_roof": None}
    assert R._row(_r(156e9, 1.001e9), KEY, INFO)["bound"] == "memory"
    assert R._row(_r(155.9e9, 1e9), KEY, INFO)["bound"] == "memory"


def test_row_without_peaks_or_numbers():
    row = R._row(_r(float("nan"), float("nan"), reason="no shapes"), None, None)
    assert (row["flops"], row["bytes"], row["achieved_tflops"], row["intensity"], row["bound"],
            row["peak_tflops"], row["mbu_pct"], row["flops_reason"], row["above_roof"]) == (
        None, None, None, None, None, None, None, "no shapes", None)
    no_info = R._row(_r(156e9, 1e9), KEY, None)
    assert (no_info["peak_tflops"], no_info["bound"], no_info["mbu_pct"]) == (312.0, None, None)
    assert R._row(_r(156e9, 1e9, time_us=1234.5678), KEY, INFO)["time_us"] == 1234.568
    assert R._row(_r(156e9, 1e9, reason=float("nan")), KEY, INFO)["flops_reason"] is None


@pytest.mark.parametrize(("flops", "nbytes", "kw", "reason"), [
    (327.6e9, 1e6, {}, None),  # exactly 5% over the compute roof: not flagged
    (328e9, 1e6, {}, "precision"),  # fits under the int8 peak (624)
    (700e9, 1e6, {}, "unknown"),  # over every peak of the chip
    (700e9, 1e6, {"overlap": True}, "overlap"),
    (328e9, 1e6, {"overlap": True}, "precision"),  # precision before overlap
    (700e9, 1e6, {"algorithmic": True, "name": "aten::conv2d"}, "algorithmic_flops"),
    (700e9, 1e6, {"algorithmic": True}, "unknown"),  # not a convolution
    (1e9, 2.1e9, {}, None),  # exactly 5% over the bandwidth: not flagged
    (1e9, 2.2e9, {}, "bytes"),
    (1e9, 2.2e9, {"overlap": True}, "overlap"),
])
def test_above_roof(flops, nbytes, kw, reason):
    assert R._row(_r(flops, nbytes, **kw), KEY, INFO)["above_roof"] == reason


def test_above_roof_in_fp32_names_a_faster_precision():
    # fp32 peak 19.5: 21 TFLOP/s is over it, and under tf32's 156
    row = R._row(_r(21e9, 1e6, precision="fp32"), KEY, INFO)
    assert (row["peak_tflops"], row["above_roof"]) == (19.5, "precision")
    assert R._row(_r(20.475e9, 1e6, precision="fp32"), KEY, INFO)["above_roof"] is None


H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0,
        "numSms": 132, "totalGlobalMem": 85e9}
MI300 = {"id": 1, "name": "AMD Instinct MI300X", "computeMajor": 9, "computeMinor": 4,
         "numSms": 304}


def test_device_info(tmp_path):
    table = make_table([cpu_op("aten::add", 0, 5)], tmp_path, deviceProperties=[H100, MI300])
    info = R.device_info(table, 0)
    assert info == {"id": 0, "name": "NVIDIA H100 80GB HBM3", "vendor": "NVIDIA",
                    "architecture": "Hopper (sm_90)", "peaks_model": "H100-SXM",
                    "matrix_units": "tensor cores",
                    "peak_tflops": dict(PEAKS["H100-SXM"].tflops), "memory_tbps": 3.35,
                    "peaks_reason": None}
    amd = R.device_info(table, 1)
    assert (amd["vendor"], amd["architecture"], amd["peaks_model"], amd["matrix_units"],
            amd["memory_tbps"]) == ("AMD", "CDNA3 (gfx942)", "MI300X", "matrix cores", 5.3)
    # GPU 5 is not listed and the listed GPUs differ: nothing known
    unknown = R.device_info(table, 5)
    assert (unknown["name"], unknown["vendor"], unknown["peaks_model"], unknown["peak_tflops"],
            unknown["memory_tbps"], unknown["matrix_units"]) == (
        None, None, None, None, None, "tensor cores")


def test_device_info_of_an_unlisted_gpu_of_a_one_model_machine(tmp_path):
    table = make_table([cpu_op("aten::add", 0, 5)], tmp_path,
                       deviceProperties=[H100, {**H100, "id": 1}])
    assert R.device_info(table, 3)["peaks_model"] == "H100-SXM"
    assert R.device_info(table, 3)["id"] == 3


def test_device_info_says_why_it_cannot_read_the_properties(tmp_path):
    odd = {"id": 0, "name": "NVIDIA A100", "totalGlobalMem": "lots"}  # not a number
    table = make_table([cpu_op("aten::add", 0, 5)], tmp_path, deviceProperties=[odd])
    info = R.device_info(table, 0)
    assert info["peaks_reason"].startswith("device properties not understood: TypeError: ")
    assert len(info["peaks_reason"]) <= 200
    assert (info["peaks_model"], info["peak_tflops"], info["name"]) == (None, None,
                                                                         "NVIDIA A100")
