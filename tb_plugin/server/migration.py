"""Start-up check for the old `torch-tb-profiler` plugin.

With it still installed, TensorBoard shows two near-identical "PyTorch Profiler" tabs and opens
the old one first, which spins forever offline. We cannot unload it, so we say so: a warning in
TensorBoard's log at start-up and a notice in `/runs` that the UI shows as a banner.
"""

from __future__ import annotations

import importlib.metadata
import logging
from typing import Optional

log = logging.getLogger(__name__)

OLD_PLUGIN = "torch-tb-profiler"


def old_plugin_version(name: str = OLD_PLUGIN) -> Optional[str]:
    """The installed version of the old plugin's distribution, or None when absent."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def startup_notices(name: str = OLD_PLUGIN) -> list[str]:
    """What the user must know about the installation (logged once here, shown as a banner)."""
    version = old_plugin_version(name)
    if version is None:
        return []
    notice = (f"The old PyTorch profiler plugin ({name} {version}) is also installed: "
              "TensorBoard shows two \"PyTorch Profiler\" tabs and may open the old one, which "
              f"does not load offline. Remove it with `pip uninstall {name}` and restart "
              "TensorBoard.")
    log.warning("torch-prof: %s", notice)
    return [notice]
