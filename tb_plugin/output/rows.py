"""The rows a CSV export of a view's payload holds, one function per payload shape.

A view spec (`tb_plugin.views`) names its rows function; `csv_bytes` turns the rows into the CSV
the server's `format=csv` answer and `report --format csv` both write. Views whose payload holds
its table under `rows` use `payload_rows`; the others pick or build theirs here.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from .tabular import tabulate, to_csv

Rows = list[dict[str, Any]]
RowsOf = Callable[[Any], Any]


def csv_bytes(rows_of: RowsOf, payload: Any) -> bytes:
    """The CSV of a payload: its rows (or, when it has none, the payload itself) tabulated."""
    rows = rows_of(payload) if isinstance(payload, dict) else None
    return to_csv(tabulate(rows if rows is not None else payload))


def payload_rows(payload: dict[str, Any]) -> Optional[list[Any]]:
    """`payload["rows"]` when it is a list; else None (the whole payload is tabulated)."""
    rows = payload.get("rows")
    return rows if isinstance(rows, list) else None


def whole_payload(_payload: dict[str, Any]) -> None:
    """The payload is tabulated as it is (pies: their `slices`/`data`/`items` lists)."""
    return None


def overview_rows(payload: dict[str, Any]) -> Rows:
    return [{"step": s["name"], "total_us": s["total_us"], **s["breakdown_us"]}
            for s in payload.get("steps") or []]


def search_rows(payload: dict[str, Any]) -> Rows:
    return payload["matches"]


def memory_rows(payload: dict[str, Any]) -> Rows:
    """Per-operator statistics, then the allocation/free pairs, with a `table` column."""
    rows = [{"table": "operators", **r} for r in payload["operators"]["rows"]]
    return rows + [{"table": "events", **r} for r in payload["events"]["rows"]]


def memory_timeline_rows(payload: dict[str, Any]) -> Rows:
    series = payload["series"]
    return [{"t_us": t, **{c: series[c][i] for c in payload["categories"]},
             "total": payload["total"][i]} for i, t in enumerate(payload["t_us"])]


def memory_snapshot_rows(payload: dict[str, Any]) -> Rows:
    curve = payload["curve"]
    return [{"t": t, "allocated": a, "reserved": r}
            for t, a, r in zip(curve["t"], curve["allocated"], curve["reserved"])]


def module_rows(payload: dict[str, Any]) -> Rows:
    """The module tree, depth first, one row per module with its key and depth."""
    out: Rows = []

    def walk(rows: Rows, depth: int) -> None:
        for row in rows:
            out.append({"depth": depth, **{k: v for k, v in row.items() if k != "children"}})
            walk(row.get("children") or [], depth + 1)

    walk(payload.get("rows") or [], 0)
    return out


def distributed_rows(payload: dict[str, Any]) -> Rows:
    return [{"worker": worker, **row} for worker, table in sorted(payload["comm_ops"].items())
            for row in table["rows"]]


def diff_rows(payload: dict[str, Any]) -> Rows:
    return payload["operator_deltas"]


def gpu_idle_rows(payload: dict[str, Any]) -> Rows:
    """The GPU Idle view's tables, one row per entry, with a `table` column."""
    out: Rows = [{"table": "temporal", **d} for d in payload.get("temporal") or []]
    out += [{"table": "idle", **s} for s in (payload.get("idle") or {}).get("streams") or []]
    out += [{"table": "queue", **{k: v for k, v in q.items() if k != "series"}}
            for q in (payload.get("queue") or {}).get("streams") or []]
    launch = payload.get("launch") or {}
    out.append({"table": "launch", **{k: v for k, v in launch.items()
                                      if not isinstance(v, (list, dict))}})
    out += [{"table": "sequences", **s, "kernels": " > ".join(s["kernels"])}
            for s in payload.get("sequences") or []]
    out += [{"table": "annotations", **a} for a in payload.get("annotations") or []]
    out += [{"table": "critical_path", **{k: v for k, v in c.items() if k != "shares_us"},
             **{f"{k}_us": v for k, v in c["shares_us"].items()}}
            for c in (payload.get("critical_path") or {}).get("steps") or []]
    return out


def whatif_rows(payload: dict[str, Any]) -> Rows:
    """One row per replayed step."""
    return list(payload.get("steps") or [])
