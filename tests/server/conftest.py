"""Fixtures of the server tests (helpers live in harness.py)."""

from __future__ import annotations

import os

import pytest

from .harness import require_entry_point

# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    require_entry_point()
    env = dict(os.environ)
    env["TORCH_PROF_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    env["TORCH_PROF_LOAD_WORKERS"] = "2"
    env["PYTHONUNBUFFERED"] = "1"
    return env
