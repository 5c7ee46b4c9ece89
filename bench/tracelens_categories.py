"""Op-category rollup (analysis/op_categories.py) beside TraceLens's ops_summary_by_category
on the shared serving traces; writes bench/tracelens_categories.md.

    python bench/tracelens_categories.py [SHARED_TRACES]

TraceLens's categories are mapped onto ours (`PEER`); a replay with a `capture/` run uses
the captured operators (`Logdir.graph_kernels`), as TraceLens does. Differences over 2% are
listed with the operators that make them. Nothing asserts; the tests pin the rules.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pandas as pd

from tb_plugin.analysis.op_categories import CATEGORIES, category_rollup, device_categories
from tb_plugin.api import NotFoundError, open_logdir

RUNS = ("tl_vllm_decode_fullgraph", "tl_sglang_decode", "tl_sglang_prefilldecode")
PEER = {"GEMM": "GEMM", "InferenceAttention": "attention", "RMSNorm": "normalization",
        "elementwise": "elementwise", "RoPE_fwd": "elementwise",
        "multi_tensor_apply": "elementwise", "reduce": "reduction", "triton": "other",
        "other": "other"}


def peer_rollup(path: Path) -> tuple[dict[str, float], list[dict[str, str]]]:
    with open(path) as f:
        rows = list(csv.DictReader(f))
    out = dict.fromkeys(CATEGORIES, 0.0)
    for r in rows:
        out[PEER.get(r["op category"], "other")] += float(r["total_direct_kernel_time_ms"]) * 1e3
    return out, rows


def _explain(category: str, frame: pd.DataFrame, ops: list[dict[str, str]]) -> str:
    """The operators that one side puts in `category` and the other does not, with us."""
    ours_by_op = frame.groupby(["operator", "category"])["dur_us"].sum()
    moved = []
    for r in ops:
        theirs = PEER.get(r["Categories"].strip("[]'"), "other")
        mine = ours_by_op.get(r["name"])
        if mine is None:
            continue
        for where, us in mine.items():
            if (theirs == category) != (where == category):
                moved.append(f"{r['name']} {us:.1f} us: TraceLens {theirs}, ours {where}")
    return "; ".join(dict.fromkeys(moved)) or "-"


def main(shared: Path) -> str:
    logdir = open_logdir(str(shared), use_cache=False)
    lines = ["# Op categories: ours vs TraceLens (us of kernel time)", ""]
    for run in RUNS:
        table = logdir.trace(run).table
        try:
            merged = logdir.graph_kernels(run)
            operators = pd.Series(merged["captured_by"].to_numpy(), index=merged["event"])
        except NotFoundError:
            operators = None
        ours = {r["category"]: r["time_us"] for r in category_rollup(table, operators)}
        peer, _ = peer_rollup(shared / run / "tracelens_outputs" / "ops_summary_by_category.csv")
        frame = device_categories(table, operators)
        with open(shared / run / "tracelens_outputs" / "ops_summary.csv") as f:
            ops = list(csv.DictReader(f))
        lines += [f"## {run}", "", "| category | ours | TraceLens | diff % |", "|---|---|---|---|"]
        for c in CATEGORIES:
            if c == "memcpy/memset":  # TraceLens's op summary counts kernels only
                continue
            diff = 100.0 * (ours[c] - peer[c]) / peer[c] if peer[c] else float("nan")
            lines.append(f"| {c} | {ours[c]:.1f} | {peer[c]:.1f} | {diff:+.1f} |")
            if abs(ours[c] - peer[c]) > 0.02 * max(peer[c], 1e-9):
                lines.append(f"|  | {_explain(c, frame, ops)} | | |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    default = Path(__file__).resolve().parents[2] / "shared" / "traces"
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else default
    text = main(root)
    print(text)
    (Path(__file__).parent / "tracelens_categories.md").write_text(text + "\n")
