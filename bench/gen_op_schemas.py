"""Regenerate `tb_plugin/analysis/efficiency/op_schemas.py`: the argument layout of every operator
the
FLOPs estimator reads, from torch's own schemas (`python bench/gen_op_schemas.py`).

torch is not a dependency of the plugin, so the package holds the generated table. Operators
that PyTorch has since removed (the PyTorch 1.x `cudnn_convolution` with a bias, the
`*_convolution_backward_{input,weight}` family, ...) are kept below as the schema strings of
PyTorch 1.x's `native_functions.yaml` and parsed by the same torch parser. An op may have
several layouts; the estimator picks the one whose tensor positions fit the recorded shapes.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import torch

OPS = (
    # convolutions, forward
    "convolution", "_convolution", "convolution_overrideable", "conv1d", "conv2d", "conv3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "cudnn_convolution",
    "cudnn_convolution_transpose", "cudnn_convolution_relu", "cudnn_convolution_add_relu",
    "miopen_convolution", "miopen_depthwise_convolution", "miopen_convolution_transpose",
    "miopen_convolution_relu", "miopen_convolution_add_relu", "mkldnn_convolution",
    "_slow_conv2d_forward", "thnn_conv2d", "_nnpack_spatial_convolution", "slow_conv3d",
    "slow_conv3d_forward", "slow_conv_dilated2d", "slow_conv_dilated3d",
    "slow_conv_transpose2d", "slow_conv_transpose3d",
    # convolutions, backward
    "convolution_backward", "convolution_backward_overrideable", "_slow_conv2d_backward",
    # GEMMs
    "mm", "addmm", "_addmm_activation", "bmm", "baddbmm", "addbmm", "matmul", "linear",
    "_scaled_mm", "_int_mm",
    # attention
    "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu", "_flash_attention_forward",
    "_efficient_attention_forward", "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_cudnn_attention_backward",
    "_scaled_dot_product_flash_attention_for_cpu_backward", "_flash_attention_backward",
    "_efficient_attention_backward",
)

# PyTorch 1.x layouts (native_functions.yaml of 1.7-1.13) of ops torch 2.x changed or removed.
LEGACY = (
    "cudnn_convolution(Tensor self, Tensor weight, Tensor? bias, int[] padding, int[] stride,"
    " int[] dilation, int groups, bool benchmark, bool deterministic) -> Tensor",
    "cudnn_convolution_transpose(Tensor self, Tensor weight, Tensor? bias, int[] padding,"
    " int[] output_padding, int[] stride, int[] dilation, int groups, bool benchmark,"
    " bool deterministic) -> Tensor",
    "cudnn_convolution_backward(Tensor self, Tensor grad_output, Tensor weight, int[] padding,"
    " int[] stride, int[] dilation, int groups, bool benchmark, bool deterministic,"
    " bool allow_tf32, bool[2] output_mask) -> (Tensor, Tensor)",
    "cudnn_convolution_backward_input(int[] self_size, Tensor grad_output, Tensor weight,"
    " int[] padding, int[] stride, int[] dilation, int groups, bool benchmark,"
    " bool deterministic, bool allow_tf32) -> Tensor",
    "cudnn_convolution_backward_weight(int[] weight_size, Tensor grad_output, Tensor self,"
    " int[] padding, int[] stride, int[] dilation, int groups, bool benchmark,"
    " bool deterministic, bool allow_tf32) -> Tensor",
    "cudnn_convolution_transpose_backward(Tensor self, Tensor grad_output, Tensor weight,"
    " int[] padding, int[] output_padding, int[] stride, int[] dilation, int groups,"
    " bool benchmark, bool deterministic, bool allow_tf32, bool[2] output_mask)"
    " -> (Tensor, Tensor)",
    "cudnn_convolution_transpose_backward_input(Tensor grad_output, Tensor weight,"
    " int[] padding, int[] stride, int[] dilation, int groups, bool benchmark,"
    " bool deterministic, bool allow_tf32) -> Tensor",
    "cudnn_convolution_transpose_backward_weight(int[] weight_size, Tensor grad_output,"
    " Tensor self, int[] padding, int[] stride, int[] dilation, int groups, bool benchmark,"
    " bool deterministic, bool allow_tf32) -> Tensor",
    "miopen_convolution_backward(Tensor self, Tensor grad_output, Tensor weight, int[] padding,"
    " int[] stride, int[] dilation, int groups, bool benchmark, bool deterministic,"
    " bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
    "miopen_convolution_backward_input(int[] self_size, Tensor grad_output, Tensor weight,"
    " int[] padding, int[] stride, int[] dilation, int groups, bool benchmark,"
    " bool deterministic) -> Tensor",
    "miopen_convolution_backward_weight(int[] weight_size, Tensor grad_output, Tensor self,"
    " int[] padding, int[] stride, int[] dilation, int groups, bool benchmark,"
    " bool deterministic) -> Tensor",
    "miopen_depthwise_convolution_backward(Tensor self, Tensor grad_output, Tensor weight,"
    " int[] padding, int[] stride, int[] dilation, int groups, bool benchmark,"
    " bool deterministic, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
    "miopen_depthwise_convolution_backward_input(int[] self_size, Tensor grad_output,"
    " Tensor weight, int[] padding, int[] stride, int[] dilation, int groups, bool benchmark,"
    " bool deterministic) -> Tensor",
    "miopen_depthwise_convolution_backward_weight(int[] weight_size, Tensor grad_output,"
    " Tensor self, int[] padding, int[] stride, int[] dilation, int groups, bool benchmark,"
    " bool deterministic) -> Tensor",
    "mkldnn_convolution(Tensor self, Tensor weight, Tensor? bias, int[] padding, int[] stride,"
    " int[] dilation, int groups) -> Tensor",
    "mkldnn_convolution_backward(Tensor self, Tensor grad_output, Tensor weight,"
    " int[] padding, int[] stride, int[] dilation, int groups, bool[3] output_mask)"
    " -> (Tensor, Tensor, Tensor)",
    "mkldnn_convolution_backward_input(int[] self_size, Tensor grad_output, Tensor weight,"
    " int[] padding, int[] stride, int[] dilation, int groups, bool bias_defined) -> Tensor",
    "mkldnn_convolution_backward_weights(int[] weight_size, Tensor grad_output, Tensor self,"
    " int[] padding, int[] stride, int[] dilation, int groups, bool bias_defined)"
    " -> (Tensor, Tensor)",
    "thnn_conv2d_backward(Tensor grad_output, Tensor self, Tensor weight, int[2] kernel_size,"
    " int[2] stride, int[2] padding, Tensor finput, Tensor fgrad_input, bool[3] output_mask)"
    " -> (Tensor, Tensor, Tensor)",
)


def _kind(arg: torch._C.Argument) -> str:
    """T tensor, L int list, B bool list, I int, F flag (bool), O anything else."""
    text = str(arg.type).rstrip("?")
    optional = re.fullmatch(r"Optional\[(.*)\]", text)
    text = optional.group(1) if optional else text
    if text == "Tensor":
        return "T"
    if text in ("List[int]", "int[]", "SymInt[]") or text.startswith(("int[", "SymInt[")):
        return "L"
    if text.startswith("bool[") or text == "List[bool]":
        return "B"
    if text in ("int", "SymInt"):
        return "I"
    if text == "bool":
        return "F"
    return "O"


def _layout(schema: torch._C.FunctionSchema) -> tuple[str, ...]:
    return tuple(f"{_kind(a)}:{a.name}" for a in schema.arguments)


def layouts() -> dict[str, list[tuple[str, ...]]]:
    table: dict[str, list[tuple[str, ...]]] = {}
    for op in OPS:
        for schema in torch._C._jit_get_schemas_for_operator(f"aten::{op}"):
            if schema.overload_name in ("", "default", "input", "output_mask"):
                table.setdefault(op, []).append(_layout(schema))
    for text in LEGACY:
        schema = torch._C.parse_schema(f"aten::{text}")
        layout = _layout(schema)
        entries = table.setdefault(schema.name.removeprefix("aten::"), [])
        if layout not in entries:
            entries.append(layout)
    return table


def render() -> str:
    lines = ['"""Argument layouts of the operators the FLOPs estimator reads. GENERATED by',
             f"`bench/gen_op_schemas.py` from torch {torch.__version__.split('+')[0]}'s schemas "
             "and PyTorch 1.x's",
             "`native_functions.yaml`; do not edit by hand.", "",
             "Each layout lists `kind:name` per argument in call order (the order of the "
             "profiler's",
             "`Input Dims`): T tensor, L int list, B bool list, I int, F bool, O other.",
             '"""', "", "LAYOUTS: dict[str, tuple[tuple[str, ...], ...]] = {"]
    for op, entries in sorted(layouts().items()):
        lines.append(f"    {op!r}: (")
        for layout in entries:
            lines.append("        (")
            row = "           "
            for item in layout:
                piece = f" {item!r},"
                if len(row) + len(piece) > 99:
                    lines.append(row)
                    row = "           "
                row += piece
            lines.append(row)
            lines.append("        ),")
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    package = Path(__file__).resolve().parents[1] / "tb_plugin"
    target = package / "analysis" / "efficiency" / "op_schemas.py"
    target.write_text(render())
    sys.stdout.write(f"wrote {target}\n")
