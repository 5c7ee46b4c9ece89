"""The old torch-tb-profiler still installed: found at start-up, logged, and in `/runs`."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from tb_plugin.server.migration import OLD_PLUGIN, old_plugin_version, startup_notices


def install_metadata(site: Path, name: str = "torch_tb_profiler", version: str = "0.4.3") -> None:
    """A distribution's installed metadata, as pip leaves it in site-packages (no code, no
    entry points: TensorBoard loads nothing from it)."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\n"
                                   f"Version: {version}\n")


def test_no_old_plugin_no_notice() -> None:
    assert old_plugin_version() is None  # the test environment does not have it
    assert startup_notices() == []


def test_old_plugin_found_logged_and_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    install_metadata(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert old_plugin_version() == "0.4.3"
    with caplog.at_level(logging.WARNING):
        notices = startup_notices()
    assert len(notices) == 1 and f"pip uninstall {OLD_PLUGIN}" in notices[0]
    assert "0.4.3" in notices[0]
    assert [r.getMessage() for r in caplog.records] == [f"torch-prof: {notices[0]}"]
