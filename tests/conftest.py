"""Shared test fixtures: where the shared real traces live, and an isolated cache per test."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def shared_trace_files() -> list[Path]:
    """Every worker trace file in ../shared/traces (empty when it is absent)."""
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(p for p in SHARED_TRACES.glob("*/*.json.gz") if ".raw." not in p.name)


needs_shared = pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason="../shared/traces absent")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Never read or write the user's real cache from tests."""
    from tb_plugin import cache

    root = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(root))
    monkeypatch.setattr(cache, "_default", None)
    yield root
