"""The Operator view's Compiled regions and roofline sections, and MFU in the GPU summary, in a
real browser on a real TensorBoard: what they show against the server's payloads."""

from __future__ import annotations

import pytest

from tests.support import need

from .pages import TIMEOUT_MS, assert_dark, open_view, shot, view_selection

pytestmark = pytest.mark.browser


def _need(tb, run: str) -> str:
    need(run in tb.runs["compiled"], f"run {run}")
    return run


@pytest.mark.parametrize("run", ["tl_mi300_torch_compile_triton", "compiled_cpu"])
def test_compiled_regions_and_jump_to_source(page, tensorboard, artifacts, run):
    _need(tensorboard, run)
    sel = view_selection(tensorboard, run, "Operator")
    payload = tensorboard.api("compiled", **sel)
    kernels = [k for r in payload["regions"] for k in r["inductor_kernels"]]
    frame = open_view(page, tensorboard, "Operator", **sel)
    frame.wait_for_selector("[data-testid=compiled]", timeout=TIMEOUT_MS)
    assert frame.locator("[data-testid=compiled-region]").count() == len(payload["regions"])
    assert frame.locator("[data-testid=inductor-kernel]").count() == len(kernels) > 0
    sources = frame.locator("[data-testid=kernel-source]")
    assert sources.count() == len(kernels)  # every Inductor kernel shows its file
    page.evaluate("""() => { window.__tp_messages = [];
        window.addEventListener('message', (e) => window.__tp_messages.push(e.data)) }""")
    sources.first.click()
    page.wait_for_function("() => window.__tp_messages.some((m) => m && m.filename)")
    [message] = page.evaluate("() => window.__tp_messages.filter((m) => m && m.filename)")
    assert message["filename"] == kernels[0]["file"]
    assert message["line"] == (kernels[0]["line"] or 1)
    frame.wait_for_selector("[data-testid=roofline-chart][data-rendered=true]",
                            timeout=TIMEOUT_MS)
    roof = tensorboard.api("roofline", **sel)
    assert frame.locator("[data-testid=roofline-row]").count() == len(roof["rows"])
    shot(page, artifacts, f"compiled_{run}")


def test_roofline_and_mfu_dark(dark_page, tensorboard, artifacts):
    run = _need(tensorboard, "tl_mi300_torch_compile_triton")
    sel = view_selection(tensorboard, run, "Operator")
    frame = open_view(dark_page, tensorboard, "Operator", **sel)
    frame.wait_for_selector("[data-testid=roofline-chart][data-rendered=true]",
                            timeout=TIMEOUT_MS)
    steps = frame.inner_text("[data-testid=roofline-steps]")
    roof = tensorboard.api("roofline", **sel)
    [step] = roof["steps"]
    assert "MFU / MBU per step" in steps and f"{step['mbu_pct']:.2f} %" in steps
    device = frame.inner_text("[data-testid=roofline-device]")
    assert "AMD" in device and "CDNA3 (gfx942)" in device and "MI300X" in device
    assert_dark(frame, "[data-testid=roofline-card]")
    frame.locator("[data-testid=roofline-card]").scroll_into_view_if_needed()
    shot(dark_page, artifacts, "roofline_dark")
    overview = open_view(dark_page, tensorboard, "Overview", **sel)
    overview.wait_for_selector("[data-testid=gpu-arch]", timeout=TIMEOUT_MS)
    assert "AMD CDNA3 (gfx942)" in overview.inner_text("[data-testid=gpu-arch]")
    summary = overview.inner_text("[data-testid=gpu-summary]")
    assert "MFU" in summary and "MBU" in summary
    # AMD words: matrix cores, the gfx architecture, no CUDA compute capability column
    assert "Kernel time on matrix cores" in summary and "Tensor" not in summary
    assert "Compute capability" not in overview.locator(".gpu-table").inner_text()
    kernels = open_view(dark_page, tensorboard, "Kernel", **view_selection(tensorboard, run,
                                                                             "Kernel"))
    kernels.wait_for_selector("[data-testid=pie-tensor-cores]", timeout=TIMEOUT_MS)
    pies = kernels.inner_text("[data-testid=k-pies]")
    assert "Kernel time using Matrix Cores" in pies and "Tensor" not in pies
