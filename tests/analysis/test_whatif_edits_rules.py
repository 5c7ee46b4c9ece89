"""What-if edit parsing (`whatif/edits.py`) at its rules: the factor bounds on both sides
(0 and 100 kept, just outside refused, NaN refused), at most MAX_EDITS edits, names required
for op/kernel/rank and refused elsewhere, regular expressions checked, run-level targets told
apart from a worker's, and every error's exact text (the text the user reads)."""

from __future__ import annotations

import re

import pytest

from tb_plugin.analysis.whatif.edits import (
    MAX_EDITS,
    MAX_FACTOR,
    RUN_TARGETS,
    TARGETS,
    Edit,
    EditError,
    parse_edits,
)


def _error(text: str, targets: tuple[str, ...] = TARGETS) -> str:
    with pytest.raises(EditError) as caught:
        parse_edits(text, targets)
    return str(caught.value)


def test_edits_read_with_spaces_names_and_patterns() -> None:
    assert parse_edits(" op:aten::mm = 0.5 ;launch=0; ;kernel~gemm.*=2") == [
        Edit("op", 0.5, name="aten::mm"), Edit("launch", 0.0), Edit("kernel", 2.0,
                                                                     pattern="gemm.*")]
    # the first "=" splits: the rest is the factor
    assert _error("op:a=b=1") == "factor 'b=1' of 'op:a=b=1' is not a number"
    assert parse_edits("rank:3=0; straggler=1; transfer=0.25", RUN_TARGETS) == [
        Edit("rank", 0.0, name="3"), Edit("straggler", 1.0), Edit("transfer", 0.25)]


def test_factor_bounds_on_both_sides() -> None:
    assert MAX_FACTOR == 100.0
    assert parse_edits("launch=0")[0].factor == 0.0
    assert parse_edits(f"launch={MAX_FACTOR:g}")[0].factor == MAX_FACTOR
    assert _error("launch=100.001") == ("factor 100.001 of 'launch=100.001' is outside "
                                        "[0, 100]")
    assert _error("launch=-0.001") == "factor -0.001 of 'launch=-0.001' is outside [0, 100]"
    assert _error("launch=nan") == "factor nan of 'launch=nan' is outside [0, 100]"
    assert _error("launch=fast") == "factor 'fast' of 'launch=fast' is not a number"


def test_at_most_max_edits() -> None:
    assert len(parse_edits(";".join(["launch=1"] * MAX_EDITS))) == MAX_EDITS
    assert _error(";".join(["launch=1"] * (MAX_EDITS + 1))) == (
        f"{MAX_EDITS + 1} edits: at most {MAX_EDITS}")
    for empty in ("", " ; ;  "):
        assert _error(empty) == ("no edit given: write TARGET=FACTOR, e.g. op:aten::mm=0.5 or "
                                 "launch=0")


def test_error_texts() -> None:
    assert _error("launch 0") == "cannot read edit 'launch 0': write TARGET=FACTOR"
    assert _error("Launch=0") == "cannot read edit 'Launch=0': write TARGET=FACTOR"
    assert _error(" gpu=0 ") == ("unknown target 'gpu' in 'gpu=0': one of op, kernel, "
                                 "dataloader, communication, memcpy, launch, sync")
    assert _error("straggler=0") == (
        "unknown target 'straggler' in 'straggler=0' (a run-level edit: the whatif_run view): "
        "one of op, kernel, dataloader, communication, memcpy, launch, sync")
    assert _error("launch=0", RUN_TARGETS) == (
        "unknown target 'launch' in 'launch=0' (an edit of one worker: the whatif view): one "
        "of rank, straggler, transfer")
    assert _error("gpu=0", RUN_TARGETS) == ("unknown target 'gpu' in 'gpu=0': one of rank, "
                                            "straggler, transfer")
    assert _error("op=0") == "'op' needs a name (op:NAME or op~REGEX)"
    assert _error("kernel=0") == "'kernel' needs a name (kernel:NAME or kernel~REGEX)"
    assert _error("rank=0", RUN_TARGETS) == "'rank' needs a name (rank:NAME)"
    assert _error("launch:x=0") == "'launch' takes no a name (launch=FACTOR)"
    assert _error("rank~1=0", RUN_TARGETS) == "'rank~1=0': a rank is named exactly (rank:NAME)"
    message = _error("op~(=1")
    assert message.startswith("bad regular expression '(': ")
    with pytest.raises(re.error) as compiled:
        re.compile("(")
    assert message == f"bad regular expression '(': {compiled.value}"


def test_edit_text_and_matching() -> None:
    exact, pattern, plain = Edit("op", 0.5, name="aten::mm"), Edit("kernel", 2.0, pattern="^ge"), \
        Edit("launch", 0.0)
    assert [str(exact), str(pattern), str(plain)] == ["op:aten::mm=0.5", "kernel~^ge=2",
                                                      "launch=0"]
    assert exact.matches("aten::mm") and not exact.matches("aten::mm_")
    assert pattern.matches("gemm") and not pattern.matches("sgemm")
    assert not plain.matches("anything")
    # an edit read back from its own text
    assert parse_edits(";".join(map(str, [exact, pattern, plain]))) == [exact, pattern, plain]
