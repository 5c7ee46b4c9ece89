"""Session-wide test setup: the layer markers, the shared-traces requirement, and an isolated
cache per test.

Every test gets exactly one layer marker from its path (registered in pyproject.toml):
- `browser`: tests/ui/ (Chromium and Playwright against real TensorBoard processes);
- `e2e`: the files in E2E_FILES (real TensorBoard or torch subprocesses);
- `unit`: everything else (in-process; `python -m pytest -m unit` is the developer loop).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tb_plugin import cache
from tests.support import REPO, check_shared, shared_missing_message, shared_required_but_missing

LAYERS = ("unit", "e2e", "browser")
BROWSER_DIR = "tests/ui/"
E2E_FILES = frozenset({
    "tests/server/test_http.py",
    "tests/server/test_views_wiring.py",
    "tests/test_recorder.py",
    "tests/cluster/test_ray.py",  # a real local Ray instance (its own processes)
    "tests/cluster/test_ray_client.py",  # a real Ray head (`ray start --head`)
    "tests/test_hostile_cli.py",
    "tests/server/test_hostile_http.py",
    "tests/server/test_view_corpus_http.py",
})


def layer_of(relative_path: str) -> str:
    """The layer marker of a test file, from its path relative to the repository."""
    if relative_path.startswith(BROWSER_DIR):
        return "browser"
    return "e2e" if relative_path in E2E_FILES else "unit"


def pytest_configure(config: pytest.Config) -> None:
    if shared_required_but_missing():  # CI: a missing ../shared must never read as skips
        raise pytest.UsageError(shared_missing_message())


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        relative = Path(str(item.fspath)).resolve().relative_to(REPO).as_posix()
        item.add_marker(getattr(pytest.mark, layer_of(relative)))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("needs_shared") is not None:
        check_shared()


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Never read or write the user's real cache from tests."""
    root = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(root))
    monkeypatch.setattr(cache, "_default", None)
    yield root
