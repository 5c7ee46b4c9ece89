"""Which math an operator ran, so it is scored against the matching peak (issue 26, item 3).

The peak of an operator is the one of the precision its matrix kernels computed in, not the
dtype of its first tensor: an fp32 `aten::mm` that cuBLAS ran as a TF32 tensor-core GEMM is
scored against the TF32 peak, an MX FP8 x FP4 GEMM against the FP8 one.

Rules, first match wins (`kernel_precision` reads one kernel name; `op_precision` combines it):

1. The name names its input formats. The first format named is the A operand in every library
   we know (`ampere_tf32_s1688gemm`, `sm90_xmma_gemm_e4m3e4m3_*`, `cutlass3x_sm90_tensorop_gemm_
   e4m3_e4m3_f32_*`, Triton's `_matmul_ogs_NNT_bf16xbf16xmxfp4`), except TensorRT-LLM's
   `bmm_<out>_<A><B>_<acc>` where the output comes first: there the A/B pair is read. Mixed
   inputs run at the rate of the wider one (`bf16 x mxfp4` weights are upcast: bf16; an MX
   E2m1 x E4m3 GEMM runs in the FP8 (f8f6f4) mode: fp8). An fp32-looking token alone (`f32`,
   `sgemm`) is an accumulator or SIMT kernel and says nothing.
2. Otherwise a tensor-core kernel with no format in its name runs the op's dtype, except that
   an fp32 op on NVIDIA tensor cores is TF32 (fp32 data can only reach them as TF32), and an
   fp64 op on tensor/matrix cores is `fp64_matrix` (DMMA / MFMA f64).
3. No tensor-core kernel: the op's dtype (vector units for fp32/fp64), "fp32" when unknown.

Precisions: fp64, fp64_matrix, fp32, tf32, bf16, fp16, fp8, fp6, fp4, int8 -- the keys of
`hardware.PEAKS` rows. A chip without a format falls back to the next wider one it has
(`hardware.peak_tflops`).
"""

from __future__ import annotations

import re
from typing import Optional

import numpy as np

from ...ingest.schema import Kind, TraceTable
from ..optree import OpTree
from .tensor_cores import event_tc_flags

#: Convolution kernels whose arithmetic is not the direct formula's (fewer multiplies).
ALGORITHMIC_RE = re.compile(r"winograd|fft", re.IGNORECASE)
#: name token -> precision, tested in this order on the lower-cased name (one regex each).
_TOKENS: tuple[tuple[str, str], ...] = (
    ("fp4", r"mxf4|nvf4|mxfp4|nvfp4|e2m1|(?<![a-z])fp4"),
    ("fp6", r"mxf6|mxfp6|e2m3|e3m2|(?<![a-z])fp6"),
    ("fp8", r"mxf8|mxfp8|e4m3|e5m2|(?<![a-z])fp8|f8f6f4"),
    ("int8", r"(?<![a-z])i8(?:816|i8)|(?<![a-z])int8|(?<![a-z])s8s8|imma"),
    ("tf32", r"tf32|xf32"),
    ("bf16", r"bf16|bfloat16"),
    ("fp16", r"(?<![a-z])f(?:p)?16|(?<![a-z])half|(?<![a-z])h(?:884|1688|16816)|hmma|hgmma"),
    ("fp64", r"dgemm|(?<![a-z])f(?:p)?64|(?<![a-z])d884|dmma|dgmma"),
)
_TOKEN_RE = re.compile("|".join(f"(?P<{p}>{rx})" for p, rx in _TOKENS))
#: TensorRT-LLM (trtllm-gen) batched GEMMs: bmm_<out>_<A><B>_<acc>_...
_TRTLLM_RE = re.compile(r"(?:^|\W)bmm_[A-Za-z0-9]+?_(?P<ab>(?:Mx)?[A-Z][a-z0-9]+(?:Mx)?"
                        r"[A-Z][a-z0-9]+)_")
#: Operands joined by "x" (Triton's bf16xbf16xmxfp4); tile shapes (128x128x64) name none.
_JOINED_RE = re.compile(r"(?:[a-z0-9]+x){1,2}[a-z0-9]+")
#: Wider first: the rate of a mixed-input GEMM is the one of its wider input.
WIDTH = {"fp64": 64, "fp64_matrix": 64, "fp32": 32, "tf32": 19, "bf16": 16, "fp16": 16,
         "fp8": 8, "int8": 8, "fp6": 6, "fp4": 4}


def _formats(text: str) -> list[str]:
    return [m.lastgroup for m in _TOKEN_RE.finditer(text.lower()) if m.lastgroup]


def kernel_precision(name: str) -> Optional[str]:
    """The precision a matrix kernel's name says it computed in (rule 1), else None."""
    trt = _TRTLLM_RE.search(name)
    if trt:
        found = _formats(trt.group("ab"))
        if found:
            return max(found, key=lambda p: WIDTH[p])
    found = _formats(name)
    if not found:
        return None
    first = found[0]
    if len(set(found)) == 1:
        return first
    # mixed inputs joined by "x" (Triton: bf16xbf16xmxfp4): the wider of the inputs
    for joined in _JOINED_RE.finditer(name.lower()):
        inputs = _formats(joined.group(0))
        if len(inputs) > 1:
            return max(inputs, key=lambda p: WIDTH[p])
    return first


def op_precision(dtype: Optional[str], kernel_prec: Optional[str], tensor_cores: bool,
                 vendor: Optional[str]) -> str:
    """The precision an operator is scored in (rules 1-3 of the module docstring)."""
    if kernel_prec is not None:
        if kernel_prec == "fp64" and tensor_cores:
            return "fp64_matrix"
        return kernel_prec
    base = dtype if dtype in WIDTH else "fp32"
    if tensor_cores and base == "fp32" and vendor == "NVIDIA":
        return "tf32"
    if tensor_cores and base == "fp64":
        return "fp64_matrix"
    return base


def node_kernel_facts(table: TraceTable, tree: OpTree, group: np.ndarray, groups: int
                      ) -> dict[str, np.ndarray]:
    """Per group id 0..groups-1 (`group[node]`: the outer FLOP node owning a tree node, -1 for
    none), from the kernels its nodes launched: `tensor_cores` (any tensor-core kernel),
    `kernel_precision` (the precision its tensor-core kernels' names say, the one with the
    most kernel time; "" when unnamed kernels have more or there are none), `algorithmic` (a
    Winograd/FFT kernel) and `overlap` (one of its kernels ran while a kernel of another group,
    or of no group, was running)."""
    events = table.events
    is_kernel = events["kind"].to_numpy()[tree.device_rows] == Kind.KERNEL
    rows = tree.device_rows[is_kernel]
    owner = group[tree.device_owner[is_kernel]]
    start = events["ts"].to_numpy()[rows]
    end = start + np.nan_to_num(events["dur"].to_numpy()[rows])
    tagged = np.where(owner >= 0, owner, -2 - np.arange(len(rows)))  # unowned: each its own
    overlap = _overlaps(start, end, tagged)
    codes = events["name"].cat.codes.to_numpy()[rows]
    cats = events["name"].cat.categories
    uniq, inverse = np.unique(codes, return_inverse=True)
    names = [str(cats[c]) if c >= 0 else "" for c in uniq]
    tc = event_tc_flags(table)[rows]
    tc_name = np.zeros(len(uniq), dtype=bool)
    tc_name[inverse[tc]] = True
    labels = ["", *sorted(WIDTH)]  # only tensor-core kernels' names are read for a precision
    label_of = np.array([labels.index(kernel_precision(n) or "") if t else 0
                         for n, t in zip(names, tc_name)], dtype=np.int64)[inverse]
    algorithmic = np.array([bool(ALGORITHMIC_RE.search(n)) for n in names], dtype=bool)[inverse]
    mine = owner >= 0
    g = owner[mine]

    def any_of(flags: np.ndarray) -> np.ndarray:
        return np.bincount(g, weights=flags[mine].astype(float), minlength=groups) > 0

    # per group and precision label: tensor-core kernel time; the longest label wins
    on_tc = mine & tc
    time = np.bincount(owner[on_tc] * len(labels) + label_of[on_tc],
                       weights=(end - start)[on_tc], minlength=groups * len(labels))
    best = time.reshape(groups, len(labels)).argmax(axis=1) if groups else np.empty(0, int)
    return {"tensor_cores": any_of(tc), "algorithmic": any_of(algorithmic),
            "overlap": any_of(overlap),
            "kernel_precision": np.array(labels, dtype=object)[best]}


def _overlaps(start: np.ndarray, end: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """Per kernel: it ran (for a positive time) while a kernel of another owner was running.
    Each kernel is compared with the one of the longest reach among those that started before
    it; both are marked."""
    order = np.argsort(start, kind="stable")
    s, e, o = start[order], end[order], owner[order]
    reach = np.maximum.accumulate(e)
    idx = np.arange(len(s))
    best = np.maximum.accumulate(np.where(e == reach, idx, 0))  # argmax of the running reach
    hit = np.zeros(len(s), dtype=bool)
    if len(s) > 1:
        prev = best[:-1]
        clash = (s[1:] < reach[:-1]) & (o[prev] != o[1:])
        hit[1:] |= clash
        hit[prev[clash]] = True
    out = np.zeros(len(s), dtype=bool)
    out[order] = hit
    return out
