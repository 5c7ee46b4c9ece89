"""`analysis.efficiency.hardware`: every branch of `match_peaks`, `architecture`,
`compute_capability`, `device_vendor` and `peak_tflops` on both sides of its rule (the device
names are the ones the drivers report; the expected rows are the module docstring's rules:
MI250 GCDs, H100 PCIe by name or 114 SMs, A100 by memory, generic AMD names by CUs/memory)."""

from __future__ import annotations

import pytest

from tb_plugin.analysis.efficiency.hardware import (
    PEAKS,
    architecture,
    compute_capability,
    device_vendor,
    match_peaks,
    matrix_unit_name,
    peak_tflops,
)

GB = 1e9


@pytest.mark.parametrize(("props", "expected"), [
    ({"name": "NVIDIA H200"}, "H200"),
    ({"name": "NVIDIA GH200 480GB"}, "H200"),
    ({"name": "NVIDIA H100 PCIe"}, "H100-PCIe"),
    ({"name": "NVIDIA H100", "numSms": 114}, "H100-PCIe"),
    ({"name": "NVIDIA H100", "numSms": 132}, "H100-SXM"),
    ({"name": "nvidia h100 80gb hbm3"}, "H100-SXM"),  # names are matched upper-cased
    ({"name": "NVIDIA GB200"}, "GB200"),
    ({"name": "NVIDIA B200"}, "B200"),
    ({"name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85 * GB}, "A100-80GB"),
    ({"name": "NVIDIA A100-SXM4-40GB", "totalGlobalMem": 42 * GB}, "A100-40GB"),
    ({"name": "NVIDIA A100", "totalGlobalMem": 60 * GB}, "A100-40GB"),
    ({"name": "NVIDIA A100", "totalGlobalMem": 60.001 * GB}, "A100-80GB"),
    ({"name": "NVIDIA A100"}, "A100-40GB"),
    ({"name": "Tesla V100-SXM2-16GB"}, "V100"),
    ({"name": "NVIDIA L4"}, "L4"),
    ({"name": "Tesla T4"}, "T4"),
    ({"name": "NVIDIA L40S"}, None),  # L4 only as a word
    ({"name": "NVIDIA RTX A6000"}, None),
    ({}, None),
])
def test_nvidia_rows(props, expected):
    assert match_peaks(props, "NVIDIA") == expected


@pytest.mark.parametrize(("props", "expected"), [
    ({"name": "AMD Instinct MI355X"}, "MI355X"),
    ({"name": "AMD Instinct MI325X"}, "MI325X"),
    ({"name": "AMD Instinct MI300X"}, "MI300X"),
    ({"name": "AMD Instinct MI300A"}, "MI300A"),
    ({"name": "AMD Instinct MI210"}, "MI210"),
    ({"name": "AMD Instinct MI100"}, "MI100"),
    ({"name": "AMD Instinct MI250X"}, "MI250X-GCD"),
    ({"name": "AMD Instinct MI250", "numSms": 110}, "MI250X-GCD"),
    ({"name": "AMD Instinct MI250", "numSms": 104}, "MI210"),
    ({"name": "AMD Instinct MI250"}, "MI210"),
    ({"name": "amd instinct mi250x"}, "MI250X-GCD"),
    # generic names: by HIP major/minor, CUs and memory
    ({"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 4, "numSms": 228},
     "MI300A"),
    ({"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 4, "numSms": 304,
      "totalGlobalMem": 256 * GB}, "MI325X"),
    ({"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 4, "numSms": 304,
      "totalGlobalMem": 220 * GB}, "MI300X"),
    ({"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 4, "numSms": 304,
      "totalGlobalMem": 220.001 * GB}, "MI325X"),
    ({"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 4, "numSms": 300},
     None),
    ({"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 5, "numSms": 256},
     "MI355X"),
    ({"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 5, "numSms": 228},
     None),
    ({"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 4, "numSms": 256},
     None),
    ({"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "numSms": 104},
     "MI210"),
    ({"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "numSms": 110},
     "MI250X-GCD"),
    ({"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "numSms": 120},
     "MI100"),
    ({"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "numSms": 64},
     None),
    ({"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 1, "numSms": 104},
     None),
    ({"name": "AMD Radeon Graphics"}, None),
])
def test_amd_rows(props, expected):
    assert match_peaks(props, "AMD") == expected


def test_the_vendor_picks_the_table():
    assert match_peaks({"name": "AMD Instinct MI300X"}, "NVIDIA") is None
    assert match_peaks({"name": "NVIDIA H100"}, "AMD") is None
    assert match_peaks({"name": "NVIDIA H100"}, None) is None
    assert all(PEAKS[k].vendor == "AMD" for k in ("MI210", "MI250X-GCD", "MI300X", "MI355X"))


@pytest.mark.parametrize(("props", "vendor", "expected"), [
    ({"computeMajor": 7, "computeMinor": 0}, "NVIDIA", "Volta (sm_70)"),
    ({"computeMajor": 7, "computeMinor": 4}, "NVIDIA", "Volta (sm_74)"),
    ({"computeMajor": 7, "computeMinor": 5}, "NVIDIA", "Turing (sm_75)"),
    ({"computeMajor": 8, "computeMinor": 6}, "NVIDIA", "Ampere (sm_86)"),
    ({"computeMajor": 8, "computeMinor": 9}, "NVIDIA", "Ada (sm_89)"),
    ({"computeMajor": 8, "computeMinor": 0}, "NVIDIA", "Ampere (sm_80)"),
    ({"computeMajor": 6, "computeMinor": 9}, "NVIDIA", "Pascal (sm_69)"),
    ({"computeMajor": 9, "computeMinor": 0}, "NVIDIA", "Hopper (sm_90)"),
    ({"computeMajor": 12, "computeMinor": 0}, "NVIDIA", "Blackwell (sm_120)"),
    ({"computeMajor": 11, "computeMinor": 0}, "NVIDIA", "sm_110"),
    ({"computeMajor": 9, "computeMinor": 0, "numSms": 120}, "AMD", "CDNA1 (gfx908)"),
    ({"computeMajor": 9, "computeMinor": 0, "numSms": 110}, "AMD", "CDNA2 (gfx90a)"),
    ({"computeMajor": 9, "computeMinor": 4}, "AMD", "CDNA3 (gfx942)"),
    ({"computeMajor": 9, "computeMinor": 5}, "AMD", "CDNA4 (gfx950)"),
    ({"computeMajor": 11, "computeMinor": 0}, "AMD", "gfx110"),
    ({"computeMajor": 9, "computeMinor": 0}, None, None),
    ({"computeMajor": "9", "computeMinor": 0}, "NVIDIA", None),
    ({"computeMajor": 9}, "NVIDIA", None),
    ({}, "AMD", None),
])
def test_architecture(props, vendor, expected):
    assert architecture(props, vendor) == expected


def test_compute_capability():
    assert compute_capability({"computeMajor": 8, "computeMinor": 6}, "NVIDIA") == "8.6"
    assert compute_capability({"computeMajor": 8, "computeMinor": 6}, None) == "8.6"
    assert compute_capability({"computeMajor": 9, "computeMinor": 0}, "AMD") is None
    assert compute_capability({"computeMajor": 8}, "NVIDIA") is None
    assert compute_capability({"computeMinor": 0}, "NVIDIA") is None
    assert compute_capability({"computeMajor": 0, "computeMinor": 0}, "NVIDIA") == "0.0"


@pytest.mark.parametrize(("props", "extra", "expected"), [
    ({"gcnArchName": "gfx90a"}, None, "AMD"),
    ({"gcnArch": 910, "name": "NVIDIA H100"}, None, "AMD"),
    ({"name": "AMD Instinct MI300X"}, None, "AMD"),
    ({"name": "gfx942"}, None, "AMD"),
    ({"name": "NVIDIA H100"}, {"hip_runtime_version": 1}, "NVIDIA"),
    ({"name": "Tesla T4"}, None, "NVIDIA"),
    ({}, {"hip_driver_version": 1}, "AMD"),
    ({}, {"roctracer_version": 1, "cuda_runtime_version": 1}, "AMD"),
    ({}, {"cupti_version": 1}, "NVIDIA"),
    ({"warpSize": 64}, None, "AMD"),
    ({"warpSize": 32, "computeMajor": 8}, None, "NVIDIA"),
    ({"warpSize": 32}, None, None),
    ({"name": "Some Accelerator"}, {"other": 1}, None),
    ({}, None, None),
])
def test_device_vendor(props, extra, expected):
    assert device_vendor(props, extra) == expected


def test_peak_tflops_follows_the_fallback_chain():
    assert peak_tflops(None, "fp16") is None
    assert peak_tflops("H100-SXM", "fp8") == 1978.9
    assert peak_tflops("A100-40GB", "fp8") == 312.0  # fp8 -> fp16
    assert peak_tflops("A100-40GB", "fp4") == 312.0  # fp4 -> fp6 -> fp8 -> fp16
    assert peak_tflops("V100", "bf16") == 125.0  # bf16 -> fp16
    assert peak_tflops("V100", "tf32") == 15.7  # tf32 -> fp32
    assert peak_tflops("V100", "fp64_matrix") == 7.8  # -> vector fp64
    assert peak_tflops("T4", "fp64") == 8.1  # fp64 -> fp32
    assert peak_tflops("H100-SXM", "complex128") == 67.0  # anything else: fp32
    assert matrix_unit_name("AMD") == "matrix cores"
    assert matrix_unit_name("NVIDIA") == "tensor cores" == matrix_unit_name(None)
