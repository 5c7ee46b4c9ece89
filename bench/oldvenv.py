"""Create (or reuse) a separate venv holding the deprecated ``torch-tb-profiler`` plugin.

It is kept apart from the project's venv so the old plugin gets the dependency versions pip
picks for it, and so nothing it drags in can change what *our* measurement imports. torch is
deliberately not installed: the plugin's profile parser only reads JSON and never imports it
(checked by ``_check_no_torch``), and pulling torch from PyPI would download GBs of CUDA.
"""

from __future__ import annotations

import subprocess
import sys

from benchpaths import OLD_PYTHON, OLDVENV, log

OLD_PLUGIN = "torch-tb-profiler==0.4.3"

_PROBE = (
    "import sys, torch_tb_profiler\n"
    "from torch_tb_profiler.profiler.data import RunProfileData\n"
    "from torch_tb_profiler.profiler.run_generator import RunGenerator\n"
    "print(torch_tb_profiler.__version__, 'torch' in sys.modules)\n"
)


def _probe() -> str | None:
    """Import the old plugin's parser in the venv; return its version, or None if unusable."""
    if not OLD_PYTHON.exists():
        return None
    proc = subprocess.run([str(OLD_PYTHON), "-c", _PROBE], capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    version, torch_loaded = proc.stdout.split()
    _check_no_torch(torch_loaded == "True")
    return version


def _check_no_torch(torch_loaded: bool) -> None:
    """Fail loudly if the parser starts importing torch, since torch is absent from the venv."""
    if torch_loaded:
        raise RuntimeError("old plugin's parser imported torch; the benchmark assumes it does not")


def _create() -> None:
    """python -m venv + pip install of the pinned plugin (pulls pandas, tensorboard, numpy)."""
    log(f"creating {OLDVENV} with {OLD_PLUGIN} (one-off, ~1 minute)")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(OLDVENV)], check=True)
    pip = [str(OLD_PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, OLD_PLUGIN], check=True)


def ensure_old_venv() -> str:
    """Return the installed old-plugin version, creating the venv first when needed."""
    version = _probe()
    if version is None:
        _create()
        version = _probe()
    if version is None:
        raise RuntimeError(f"could not import torch_tb_profiler from {OLD_PYTHON}")
    return version


def pip_freeze() -> list[str]:
    """Exact package versions in the old venv, recorded with the results for reproducibility."""
    proc = subprocess.run(
        [str(OLD_PYTHON), "-m", "pip", "freeze", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.split()
