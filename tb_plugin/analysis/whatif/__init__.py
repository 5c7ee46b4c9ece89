"""The what-if engine: replay a step's dependency model with edited durations and predict the
step time (`build_whatif`). `edits.py` reads the edits, `model.py` cuts a step's calls, device
events and dependencies from the trace, `simulate.py` replays them, `engine.py` resolves the
edits to per-node factors."""

from .edits import TARGETS, Edit, EditError, parse_edits
from .engine import MAX_STEPS, StepNotFound, build_whatif

__all__ = ["TARGETS", "Edit", "EditError", "parse_edits", "MAX_STEPS", "StepNotFound",
           "build_whatif"]
