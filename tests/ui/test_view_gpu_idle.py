"""GPU Idle view in a real TensorBoard, in chromium: a GPU trace (resnet50_gpu_pt19: idle share,
launch counts and recommendations as the API gives them, every formula shown), a CPU-only trace
(the view says what does not apply), dark theme, and no request outside 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import CHROMIUM
from .pages import TIMEOUT_MS, assert_dark, fmt_us, need, open_view, shot, view_selection

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")

VIEW = "GPU Idle"


def _open(page, tb, run):
    selection = view_selection(tb, need(tb, run), VIEW)
    frame = open_view(page, tb, VIEW, **selection)
    frame.wait_for_selector("[data-testid=gpu-idle-view]", timeout=TIMEOUT_MS)
    return frame, tb.api("gpu_idle", **selection)


def test_gpu_trace(page, tensorboard, artifacts):
    frame, payload = _open(page, tensorboard, "resnet50_gpu_pt19")
    [dev] = payload["temporal"]
    # the UI's pct(): two decimals and " %"
    assert frame.inner_text("[data-testid=gpu-idle-pct-0]") == f"{dev['idle_pct']:.2f} %"
    assert frame.inner_text("[data-testid=gpu-idle-kernels]") == fmt_us(
        payload["launch"]["kernels"])
    shown = frame.locator("[data-testid=formula]").all_inner_texts()
    formulas = payload["formulas"]
    for key in ("temporal", "idle", "launch", "queue", "bandwidth", "sequences", "annotations",
                "critical_path"):
        assert any(formulas[key] in text for text in shown), key
    rules = frame.locator("[data-testid=gpu-idle-rec]").evaluate_all(
        "els => els.map(e => e.dataset.rule)")
    assert rules == [r["id"] for r in payload["recommendations"]]
    frame.wait_for_selector("[data-testid=gpu-idle-temporal-chart][data-rendered=true]",
                            timeout=TIMEOUT_MS)
    shot(page, artifacts, "gpu_idle_light")


def test_cpu_only_says_not_applicable(page, tensorboard, artifacts):
    frame, payload = _open(page, tensorboard, "cpu_only")
    assert payload["applicable"] is False
    assert payload["message"] in frame.inner_text("[data-testid=gpu-idle-na]")
    assert frame.locator("[data-testid=gpu-idle-temporal]").count() == 0
    assert frame.locator("[data-testid=gpu-idle-annotations]").count() == 1
    shot(page, artifacts, "gpu_idle_cpu_only")


def test_dark(dark_page, tensorboard, artifacts):
    frame, _ = _open(dark_page, tensorboard, "resnet50_gpu_pt19")
    assert_dark(frame, "[data-testid=gpu-idle-temporal]")
    frame.wait_for_selector("[data-testid=gpu-idle-temporal-chart][data-rendered=true]",
                            timeout=TIMEOUT_MS)
    shot(dark_page, artifacts, "gpu_idle_dark")
