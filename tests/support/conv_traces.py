"""Tiny CPU traces of the convolutions that broke the FLOPs estimate, recorded with torch
(`record_shapes=True`, so the profiler writes `Input Dims` and `Concrete Inputs`): a 1x1
convolution with padding 0 (`aten::mkldnn_convolution` orders padding before stride, so the
old positional read took padding [0, 0] for the stride and divided by it), a convolution
without bias, a transposed convolution, and a training step (forward + backward). Each file
holds two profiler steps.

`CONV_CASES` says, per trace, the convolutions it runs and their FLOPs derived by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: trace name -> (outermost op name, expected FLOPs of one call derived by hand, calls)
CONV_CASES: dict[str, tuple[str, float, int]] = {
    # x[2,8,10,10] w[16,8,1,1] stride 1 padding 0: out 10x10; 2 * N * HW * Cout * Cin * 1
    "conv1x1_pad0": ("aten::conv2d", 2.0 * 2 * 100 * 16 * 8, 2),
    # x[2,3,9,9] w[4,3,3,3] stride 2 padding 0, no bias: out (9-3)//2+1 = 4 -> 4x4
    "conv_nobias": ("aten::conv2d", 2.0 * 2 * 16 * 4 * 3 * 9, 2),
    # transposed: x[1,4,5,5] w[4,2,3,3] (Cin, Cout): 2 * N * (input HW) * Cin * Cout * k*k
    "conv_transpose": ("aten::conv_transpose2d", 2.0 * 1 * 25 * 4 * 2 * 9, 2),
    # backward of x[2,3,8,8] (requires grad) w[6,3,3,3] padding 1: out 8x8; forward
    # 2*2*64*6*3*9; the backward computes grad_input and grad_weight: 2x that
    "conv_backward": ("aten::convolution_backward", 2 * (2.0 * 2 * 64 * 6 * 3 * 9), 2),
}


def record_conv_traces(torch: Any, root: Path) -> dict[str, Path]:
    """Record each case into `root/<case>/w.pt.trace.json` (one run per case)."""
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415 (torch is optional)

    functional = torch.nn.functional
    torch.manual_seed(0)
    x_train = torch.randn(2, 3, 8, 8, requires_grad=True)
    w_train = torch.randn(6, 3, 3, 3, requires_grad=True)

    def train() -> None:
        functional.conv2d(x_train, w_train, padding=1).sum().backward()

    runs = {
        "conv1x1_pad0": lambda: functional.conv2d(
            torch.randn(2, 8, 10, 10), torch.randn(16, 8, 1, 1), torch.randn(16), padding=0),
        "conv_nobias": lambda: functional.conv2d(
            torch.randn(2, 3, 9, 9), torch.randn(4, 3, 3, 3), None, stride=2),
        "conv_transpose": lambda: functional.conv_transpose2d(
            torch.randn(1, 4, 5, 5), torch.randn(4, 2, 3, 3), stride=2, padding=1),
        "conv_backward": train,
    }
    out = {}
    for name, run in runs.items():
        path = root / name / "w.pt.trace.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for _ in range(2):
                run()
                prof.step()
        prof.export_chrome_trace(str(path))
        out[name] = path
    return out
