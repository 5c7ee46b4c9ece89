"""The what-if engine: replay a step's dependency model with edited durations and predict the
step time (`build_whatif`). `edits.py` reads the edits, `model.py` cuts a step's calls, device
events and dependencies from the trace, `simulate.py` replays them, `engine.py` resolves the
edits to per-node factors; `ranks.py` replays the ranks of a span on their collective
dependencies (`build_whatif_run`, the run-level edits `RUN_TARGETS`)."""

from .edits import RUN_TARGETS, TARGETS, Edit, EditError, parse_edits
from .engine import MAX_STEPS, StepNotFound, build_whatif
from .ranks import build_whatif_run

__all__ = ["TARGETS", "RUN_TARGETS", "Edit", "EditError", "parse_edits", "MAX_STEPS",
           "StepNotFound", "build_whatif", "build_whatif_run"]
