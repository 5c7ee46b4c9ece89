"""Which GPU a trace ran on: vendor, architecture, and its peak dense throughput per dtype.

`device_vendor(props, metadata)` says NVIDIA or AMD (or None) from a `deviceProperties` entry
and the trace's top-level keys; `architecture(...)` names the generation ("Hopper (sm_90)",
"CDNA3 (gfx942)") -- an AMD device is never described with a CUDA compute capability;
`match_peaks(...)` picks the row of `PEAKS` that fits the device's name, SM/CU count and memory,
or None ("unknown device": no roofline ceiling, no MFU).

`PEAKS` holds vendor datasheet numbers: dense (no 2:4 sparsity) TFLOP/s per precision at boost
clock, and HBM bandwidth in TB/s. Matrix-core precisions (fp16, bf16, tf32, fp8, fp6, fp4,
int8, fp64_matrix) are the tensor-core/MFMA peaks; on NVIDIA fp32 and fp64 are the vector
(non-tensor-core) peaks, which is
what a plain fp32 GEMM gets unless TF32 is enabled; on AMD fp32 is the MFMA (matrix) fp32 peak,
which rocBLAS/hipBLASLt fp32 GEMMs run on, and fp64 the vector peak. ROCm sees an MI250/MI250X
as two devices (GCDs), so their rows are per GCD (half the package); an MI210 is the same
silicon as one MI250 GCD. The sources are in the README ("Compiled code and hardware
efficiency").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

NVIDIA = "NVIDIA"
AMD = "AMD"


@dataclass(frozen=True)
class Peaks:
    """One device model: dense TFLOP/s per dtype and memory bandwidth (TB/s)."""

    name: str
    vendor: str
    tflops: dict[str, float]
    memory_tbps: float


def _p(name: str, vendor: str, bw: float, **tflops: float) -> Peaks:
    return Peaks(name, vendor, dict(tflops), bw)


#: key -> peaks. Keys are what `match_peaks` returns in `GpuSummary.peaks_model`.
#: All numbers are dense (datasheets print 2:4-sparse figures for tensor/matrix cores: those
#: are halved here). fp64 is the vector peak, fp64_matrix the DMMA/MFMA-f64 one; fp6/fp4 only
#: where the chip computes them natively (Blackwell runs FP6 at the FP8 rate, CDNA4 at the FP4
#: rate). Sources, per row:
#: V100: NVIDIA V100 datasheet (r5). A100: NVIDIA A100 datasheet (r4). H100 SXM/PCIe: NVIDIA
#: H100 Tensor Core GPU datasheet. H200: NVIDIA H200 product page (same SXM compute as H100).
#: B200 / GB200: NVIDIA's "Individual Blackwell GPU Specifications" table on the GB200 NVL72
#: and HGX B200 pages (per GPU; sparse FP4/FP8/INT8/FP16/TF32 halved; FP64 = FP64 Tensor Core).
#: MI100/MI210/MI250X/MI300X/MI300A/MI325X/MI355X: AMD Instinct product pages' spec tables
#: ("Peak ... Performance" without "with Structured Sparsity"); MI250X per GCD = package / 2.
PEAKS: dict[str, Peaks] = {
    "V100": _p("NVIDIA V100 SXM2", NVIDIA, 0.9, fp64=7.8, fp32=15.7, fp16=125.0),
    "A100-40GB": _p("NVIDIA A100 SXM 40GB", NVIDIA, 1.555, fp64=9.7, fp64_matrix=19.5,
                    fp32=19.5, tf32=156.0, bf16=312.0, fp16=312.0, int8=624.0),
    "A100-80GB": _p("NVIDIA A100 SXM 80GB", NVIDIA, 2.039, fp64=9.7, fp64_matrix=19.5,
                    fp32=19.5, tf32=156.0, bf16=312.0, fp16=312.0, int8=624.0),
    "H100-SXM": _p("NVIDIA H100 SXM", NVIDIA, 3.35, fp64=34.0, fp64_matrix=67.0, fp32=67.0,
                   tf32=494.7, bf16=989.4, fp16=989.4, fp8=1978.9, int8=1978.9),
    "H100-PCIe": _p("NVIDIA H100 PCIe", NVIDIA, 2.0, fp64=26.0, fp64_matrix=51.0, fp32=51.0,
                    tf32=378.0, bf16=756.0, fp16=756.0, fp8=1513.0, int8=1513.0),
    "H200": _p("NVIDIA H200 SXM", NVIDIA, 4.8, fp64=34.0, fp64_matrix=67.0, fp32=67.0,
               tf32=494.7, bf16=989.4, fp16=989.4, fp8=1978.9, int8=1978.9),
    "B200": _p("NVIDIA B200 (HGX)", NVIDIA, 7.7, fp64=37.0, fp64_matrix=37.0, fp32=75.0,
               tf32=1100.0, bf16=2250.0, fp16=2250.0, fp8=4500.0, fp6=4500.0, fp4=9000.0,
               int8=4500.0),
    "GB200": _p("NVIDIA GB200 (one Blackwell GPU)", NVIDIA, 8.0, fp64=40.0, fp64_matrix=40.0,
                fp32=80.0, tf32=1250.0, bf16=2500.0, fp16=2500.0, fp8=5000.0, fp6=5000.0,
                fp4=10000.0, int8=5000.0),
    "L4": _p("NVIDIA L4", NVIDIA, 0.3, fp32=30.3, tf32=60.0, bf16=121.0, fp16=121.0,
             fp8=242.5, int8=242.5),
    "T4": _p("NVIDIA T4", NVIDIA, 0.32, fp32=8.1, fp16=65.0, int8=130.0),
    "MI100": _p("AMD Instinct MI100", AMD, 1.2288, fp64=11.5, fp32=46.1, fp16=184.6,
                bf16=92.3, int8=184.6),
    "MI210": _p("AMD Instinct MI210 / one MI250 GCD", AMD, 1.6384, fp64=22.6,
                fp64_matrix=45.3, fp32=45.3, fp16=181.0, bf16=181.0, int8=181.0),
    "MI250X-GCD": _p("AMD Instinct MI250X (one GCD)", AMD, 1.6384, fp64=23.95,
                     fp64_matrix=47.85, fp32=47.85, fp16=191.5, bf16=191.5, int8=191.5),
    "MI300X": _p("AMD Instinct MI300X", AMD, 5.3, fp64=81.7, fp64_matrix=163.4, fp32=163.4,
                 tf32=653.7, bf16=1307.4, fp16=1307.4, fp8=2614.9, int8=2614.9),
    "MI300A": _p("AMD Instinct MI300A", AMD, 5.3, fp64=61.3, fp64_matrix=122.6, fp32=122.6,
                 tf32=490.3, bf16=980.6, fp16=980.6, fp8=1961.2, int8=1961.2),
    "MI325X": _p("AMD Instinct MI325X", AMD, 6.0, fp64=81.7, fp64_matrix=163.4, fp32=163.4,
                 tf32=653.7, bf16=1307.4, fp16=1307.4, fp8=2614.9, int8=2614.9),
    "MI355X": _p("AMD Instinct MI355X", AMD, 8.0, fp64=78.6, fp64_matrix=78.6, fp32=157.3,
                 bf16=2516.6, fp16=2516.6, fp8=5033.2, fp6=10066.3, fp4=10066.3,
                 int8=5033.2),
}

#: Top-level trace keys that only ROCm traces carry.
#: AMD-only deviceProperties keys, and device names that say the vendor (AMD's `computeMajor`
#: is the GFX generation, e.g. 9 for MI250: never read it as a CUDA compute capability).
_AMD_KEYS = ("gcnArchName", "gcnArch")
_AMD_NAME = re.compile(r"\b(?:AMD|Radeon|Instinct|MI\d{3}X?)\b|gfx\d", re.IGNORECASE)
_NVIDIA_NAME = re.compile(r"NVIDIA|Tesla|GeForce|Quadro|RTX|\b[ABHLT]\d{2,3}\b|\bGB\d{3}",
                          re.IGNORECASE)
_ROCM_KEYS = ("hip_runtime_version", "hip_driver_version", "roctracer_version", "rocprof_version")
_CUDA_KEYS = ("cuda_runtime_version", "cuda_driver_version", "cupti_version")

#: HIP's (major, minor) -> gfx target, told apart by CU count where they collide (9.0).
_AMD_ARCH = {(9, 4): ("CDNA3", "gfx942"), (9, 5): ("CDNA4", "gfx950")}
_NVIDIA_ARCH = {3: "Kepler", 5: "Maxwell", 6: "Pascal", 7: "Volta", 8: "Ampere", 9: "Hopper",
                10: "Blackwell", 12: "Blackwell"}


def device_vendor(props: dict[str, Any], extra: Optional[dict[str, Any]] = None
                  ) -> Optional[str]:
    """"NVIDIA", "AMD" or None: from the device name, else the trace's runtime version keys,
    else the wavefront size (64 only on AMD)."""
    if any(key in props for key in _AMD_KEYS):
        return AMD
    name = str(props.get("name") or "")
    if _AMD_NAME.search(name):
        return AMD
    if _NVIDIA_NAME.search(name):
        return NVIDIA
    keys = set(extra or {})
    if keys & set(_ROCM_KEYS):
        return AMD
    if keys & set(_CUDA_KEYS):
        return NVIDIA
    warp = props.get("warpSize")
    if warp == 64:
        return AMD
    if warp == 32 and props.get("computeMajor") is not None:
        return NVIDIA
    return None


def architecture(props: dict[str, Any], vendor: Optional[str]) -> Optional[str]:
    """"Hopper (sm_90)", "CDNA2 (gfx90a)"...; None when unknown."""
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    if not isinstance(major, int) or not isinstance(minor, int):
        return None
    if vendor == NVIDIA:
        family = _NVIDIA_ARCH.get(major)
        if major == 7 and minor >= 5:
            family = "Turing"
        if major == 8 and minor == 9:
            family = "Ada"
        tag = f"sm_{major}{minor}"
        return f"{family} ({tag})" if family else tag
    if vendor == AMD:
        if (major, minor) == (9, 0):
            cus = props.get("numSms")
            return "CDNA1 (gfx908)" if cus == 120 else "CDNA2 (gfx90a)"
        family, gfx = _AMD_ARCH.get((major, minor), (None, f"gfx{major}{minor}"))
        return f"{family} ({gfx})" if family else gfx
    return None


def compute_capability(props: dict[str, Any], vendor: Optional[str]) -> Optional[str]:
    """"8.0" for NVIDIA (and unknown vendors, as before); None for AMD, whose HIP
    major/minor are not a CUDA compute capability."""
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    if vendor == AMD or major is None or minor is None:
        return None
    return f"{major}.{minor}"


def match_peaks(props: dict[str, Any], vendor: Optional[str]) -> Optional[str]:
    """The `PEAKS` key of a device, or None when it is not in the table."""
    name = str(props.get("name") or "").upper()
    sms = props.get("numSms")
    memory_gb = (props.get("totalGlobalMem") or 0) / 1e9
    if vendor == NVIDIA:
        return _match_nvidia(name, sms, memory_gb)
    if vendor == AMD:
        return _match_amd(name, props, sms, memory_gb)
    return None


def _match_nvidia(name: str, sms: Any, memory_gb: float) -> Optional[str]:
    if "H200" in name or "GH200" in name:
        return "H200"
    if "H100" in name:
        return "H100-PCIe" if "PCIE" in name or sms == 114 else "H100-SXM"
    if "GB200" in name:
        return "GB200"
    if "B200" in name:
        return "B200"
    if "A100" in name:
        return "A100-80GB" if memory_gb > 60 else "A100-40GB"
    for key in ("V100", "L4", "T4"):
        if re.search(rf"\b{key}\b", name):
            return key
    return None


def _match_amd(name: str, props: dict[str, Any], cus: Any, memory_gb: float) -> Optional[str]:
    for key in ("MI355X", "MI325X", "MI300X", "MI300A", "MI210", "MI100"):
        if key in name:
            return key
    if "MI250" in name:
        return "MI250X-GCD" if "MI250X" in name or cus == 110 else "MI210"
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    if (major, minor) == (9, 4):  # generic names ("AMD Radeon Graphics"): by CUs and memory
        if cus == 228:
            return "MI300A"
        if cus == 304:
            return "MI325X" if memory_gb > 220 else "MI300X"
    if (major, minor) == (9, 5) and cus == 256:
        return "MI355X"
    if (major, minor) == (9, 0):
        return {104: "MI210", 110: "MI250X-GCD", 120: "MI100"}.get(cus)
    return None


#: A precision the chip lacks runs in the next wider one it has (fp8 on an A100 is upcast to
#: fp16, TF32 on an MI355X is fp32, fp64 matrix math on a V100 is vector fp64).
FALLBACK = {"fp4": "fp6", "fp6": "fp8", "fp8": "fp16", "int8": "fp16", "bf16": "fp16",
            "fp16": "fp32", "tf32": "fp32", "fp64_matrix": "fp64", "fp64": "fp32"}


def peak_tflops(key: Optional[str], precision: str) -> Optional[float]:
    """Peak dense TFLOP/s of a `PEAKS` row for a precision (`analysis.efficiency.precision`),
    following
    `FALLBACK` when the chip lacks it, fp32 for anything else."""
    if key is None:
        return None
    table = PEAKS[key].tflops
    seen = precision
    while seen not in table and seen in FALLBACK:
        seen = FALLBACK[seen]
    return table.get(seen, table.get("fp32"))


def matrix_unit_name(vendor: Optional[str]) -> str:
    """What the vendor calls its matrix units: "matrix cores" on AMD, else "tensor cores"."""
    return "matrix cores" if vendor == AMD else "tensor cores"
