"""The Diff's verdict in a real TensorBoard in chromium: the header names the root's verdict
at 95% with its interval, every child row shows its per-step change with its interval, and
exactly the rows whose change is within noise are greyed. Screenshots in light and dark."""

from __future__ import annotations

import pytest

from .pages import TIMEOUT_MS, open_view, shot
from .test_ux import diff_pair

WORDS = {"regressed": "Regressed", "improved": "Improved", "unchanged": "Unchanged"}


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_diff_header_verdict_and_greyed_rows(theme, page, dark_page, views_tensorboard,
                                             artifacts):
    tab = page if theme == "light" else dark_page
    tb = views_tensorboard
    base, exp = diff_pair(tb)
    root = tb.api("diff", **base, **exp)
    verdict = root["verdict"]
    frame = open_view(tab, tb, "Diff", **base, **exp)
    header = frame.wait_for_selector("[data-testid=diff-verdict]", timeout=TIMEOUT_MS)
    assert header.get_attribute("data-verdict") == verdict["verdict"]
    text = header.inner_text()
    assert text.startswith(WORDS[verdict["verdict"]]) and "95 % confidence" in text
    assert "interval over steps only" in text
    rows = frame.locator("[data-testid=diff-child]")
    assert rows.count() == len(root["children"])
    greyed = [r.get_attribute("data-noise") == "yes" for r in rows.all()]
    assert greyed == [c["interval"]["verdict"] == "unchanged" for c in root["children"]]
    cells = frame.locator("[data-testid=diff-child] [data-col=interval]")
    assert [c.get_attribute("data-verdict") for c in cells.all()] == [
        c["interval"]["verdict"] for c in root["children"]]
    opacity = frame.locator("[data-testid=diff-child][data-noise=yes] td").first.evaluate(
        "td => getComputedStyle(td).opacity")
    assert float(opacity) < 1
    shot(tab, artifacts, f"diff_verdict_{theme}")
