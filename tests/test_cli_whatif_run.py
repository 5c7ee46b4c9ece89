"""`report --view whatif_run --edit straggler=0` on the recorded 2-rank gloo sample: the CLI
prints the run-level what-if payload of the span's two ranks (as `build_view` builds it), the
straggler it removes is the Distributed view's, the measured step times are the traces' own
ProfilerStep lengths, and bad edits are usage errors (exit 2) with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tb_plugin import cli
from tb_plugin.discovery import discover_runs
from tb_plugin.load import load_trace
from tb_plugin.output.encoding import plain
from tb_plugin.views.registry import build_view

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
DDP = ("vm_9852_rank0", "vm_9853_rank1")


@pytest.fixture(scope="module")
def tables():
    run = next(r for r in discover_runs(str(SAMPLES)) if r.name == "ddp_gloo")
    return {w: load_trace(run.span_file(w, "1").ref) for w in DDP}


def _report(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["report", str(SAMPLES), "--run", "ddp_gloo", "--span", "1", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_straggler_removed_on_the_gloo_sample(capsys, tables):
    code, out, err = _report(capsys, "--view", "whatif_run", "--edit", "straggler=0",
                             "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload == plain(build_view(tables, "whatif_run", {}, edit="straggler=0"))
    code, out, _ = _report(capsys, "--view", "distributed", "--format", "json")
    straggler = json.loads(out)["stragglers"]["rows"][0]["worker"]
    assert payload["resolved"] == [f"rank:{straggler}=0"] and payload["last"] == straggler
    # measured: each rank's mean ProfilerStep length in its own trace (the summary keeps step
    # ends on the epoch clock, ~1.8e15 us, where a double resolves 0.25 us)
    for row in payload["ranks"]:
        events = tables[row["worker"]].events
        steps = events[events["name"].astype(str).str.startswith("ProfilerStep#")]
        assert row["original_us"] == pytest.approx(float(np.mean(steps["dur"])), abs=0.5)
    assert payload["original_us"] == pytest.approx(
        np.mean([r["original_us"] for r in payload["ranks"]]))
    # the other rank waited for the straggler; with its lateness removed it waits less, and
    # the predicted steps are shorter than the replayed ones by the saving
    other = next(r for r in payload["ranks"] if r["worker"] != straggler)
    assert other["predicted_wait_us"] < other["wait_us"]
    assert payload["saving_us"] == pytest.approx(payload["replayed_us"] - payload["predicted_us"])
    assert payload["saving_us"] > 0 and payload["skipped"] == {}


def test_csv_has_one_row_per_rank(capsys):
    code, out, _ = _report(capsys, "--view", "whatif_run", "--edit", "transfer=0", "--format",
                           "csv")
    lines = out.strip().splitlines()
    assert code == 0 and len(lines) == 3 and lines[0].startswith("worker,rank,")


@pytest.mark.parametrize(("edit", "message"), [
    ("launch=0", "an edit of one worker"),
    ("rank:nobody=0", "no worker or rank 'nobody'"),
    ("straggler=200", "outside [0, 100]"),
])
def test_bad_edits_are_usage_errors(capsys, edit, message):
    code, _, err = _report(capsys, "--view", "whatif_run", "--edit", edit)
    assert code == 2 and message in err and "Traceback" not in err
