"""`torch-prof compare` reports: markdown for a CI job summary and JUnit XML, from the
comparison payload (`analysis.compare.compare.compare`) and the gate's outcome.

The markdown links to nothing: a CI summary renders it as it is.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any, Optional

TOP_OPERATORS = 10
_MARK = {"regressed": "🔴 regressed", "improved": "🟢 improved", "unchanged": "⚪ unchanged",
         "not comparable": "⚠️ not comparable"}


def ms(us: float) -> str:
    return f"{us / 1e3:.3f} ms"


def pct(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value * 100:+.1f}%"


def interval_text(row: dict[str, Any]) -> str:
    return f"[{row['low_us'] / 1e3:+.3f}, {row['high_us'] / 1e3:+.3f}] ms"


def gate_text(gate: Optional[dict[str, Any]]) -> str:
    if gate is None:
        return ""
    if not gate["evaluated"]:
        return f"gate on {gate['metric']} not evaluated: the sides are not comparable"
    outcome = "FAILED" if gate["failed"] else "passed"
    return (f"gate {outcome}: {gate['metric']} may not regress by more than "
            f"{gate['threshold'] * 100:g}% at {gate['confidence'] * 100:g}% confidence")


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def markdown(result: dict[str, Any], gate: Optional[dict[str, Any]] = None,
             top: int = TOP_OPERATORS) -> str:
    """The report as GitHub-flavoured markdown: the headline verdict, the step-time
    categories, the top regressed operators with their source lines."""
    lines = ["## torch-prof compare", ""]
    verdict = result["verdict"]
    head = result.get("headline")
    if head is None:
        lines.append(f"**Verdict: {_MARK[verdict]}**")
        lines += [""] + [f"- {_md_escape(r)}" for r in result["reasons"]]
    else:
        lines.append(f"**Verdict: {_MARK[verdict]}**: step time {ms(head['base_us'])} -> "
                     f"{ms(head['exp_us'])} ({pct(head['relative'])}, "
                     f"{result['confidence'] * 100:g}% interval {interval_text(head)})")
    if gate is not None:
        lines += ["", f"**{gate_text(gate)}**"]
    base, exp = result["base"], result["exp"]
    lines += ["", f"Baseline: {base['runs']} run(s), {base['steps']} steps on {base['device']}; "
              f"experiment: {exp['runs']} run(s), {exp['steps']} steps on {exp['device']}; "
              f"per run, the {result['statistic']} of its steps."]
    if result.get("note"):
        lines.append(f"Note: {result['note']}.")
    if head is None:
        return "\n".join(lines) + "\n"
    lines += ["", f"Changes smaller than {result['min_change'] * 100:g}% of the step time "
              f"({ms(result['floor_us'])}) count as unchanged.", "",
              "| step category | baseline | experiment | delta | interval | verdict |",
              "|---|---:|---:|---:|---|---|"]
    for row in (r for r in result["metrics"] if r["kind"] == "step"):
        lines.append(f"| {_md_escape(row['name'])} | {ms(row['base_us'])} | "
                     f"{ms(row['exp_us'])} | {pct(row['relative'])} | {interval_text(row)} | "
                     f"{row['verdict']} |")
    regressed = result["top_regressed"][:top]
    lines += ["", "### Top regressed operators", ""]
    if not regressed:
        lines.append("No operator regressed beyond the noise.")
    else:
        lines += ["| # | operator | delta per step | interval | source |",
                  "|---:|---|---:|---|---|"]
        for i, row in enumerate(regressed, 1):
            source = "<br>".join(f"`{_md_escape(f)}`" for f in row["source"]) or "-"
            lines.append(f"| {i} | `{_md_escape(row['name'])}` | "
                         f"{row['delta_us'] / 1e3:+.3f} ms | {interval_text(row)} | {source} |")
    return "\n".join(lines) + "\n"


def junit(result: dict[str, Any], gate: Optional[dict[str, Any]] = None) -> str:
    """JUnit XML: one suite; a `gate` test case (a failure when the gate failed, an error when
    the sides are not comparable) and one passing case per step category, whose output
    gives the delta, its interval and the verdict."""
    suite = ET.Element("testsuite", name="torch-prof compare")
    cases = []
    gate_case = ET.Element("testcase", classname="torch-prof.compare",
                           name=f"gate {gate['metric']}" if gate else "verdict")
    if result["verdict"] == "not comparable":
        error = ET.SubElement(gate_case, "error", message="not comparable", type="NotComparable")
        error.text = "\n".join(result["reasons"])
    elif gate is not None and gate["failed"]:
        failure = ET.SubElement(gate_case, "failure", message=gate_text(gate),
                                type="Regression")
        failure.text = _row_text(gate["row"])
    ET.SubElement(gate_case, "system-out").text = (
        f"verdict: {result['verdict']}" + (f"\n{gate_text(gate)}" if gate else ""))
    cases.append(gate_case)
    for row in (r for r in result["metrics"] if r["kind"] == "step"):
        case = ET.Element("testcase", classname="torch-prof.compare.step", name=row["name"])
        ET.SubElement(case, "system-out").text = _row_text(row)
        cases.append(case)
    suite.extend(cases)
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
    suite.set("errors", str(sum(1 for c in cases if c.find("error") is not None)))
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def _row_text(row: dict[str, Any]) -> str:
    return (f"{row['metric']}: {ms(row['base_us'])} -> {ms(row['exp_us'])} "
            f"({pct(row['relative'])}), interval {interval_text(row)}, {row['verdict']}")
