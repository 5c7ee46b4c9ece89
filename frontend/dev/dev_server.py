"""Development-only stand-in for the plugin's HTTP routes (NOT shipped, NOT used by tests).

Serves the contract of tb_plugin/server on top of tb_plugin.discovery + tb_plugin.analysis, so
the frontend can be developed before/without TensorBoard:

    .venv/bin/python frontend/dev/dev_server.py LOGDIR --port 6006
    (cd frontend && npm run dev)        # Vite proxies /data to it

It also serves tb_plugin/static/index.js and a stand-in plugin_entry.html at
/data/plugin_entry.html?name=torch_prof. The real tests run the real TensorBoard.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tb_plugin.views.registry import build_view  # noqa: E402
from tb_plugin.discovery import discover_runs  # noqa: E402
from tb_plugin.ingest.loader import load_trace  # noqa: E402

PREFIX = "/data/plugin/torch_prof/"
ENTRY = """<!DOCTYPE html>
<head><base href="plugin/torch_prof/" /></head>
<body><script type="module">import("./index.js").then((m) => void m.render());</script></body>
"""


class State:
    def __init__(self, logdir: str, loading_s: float = 0.0) -> None:
        self.logdir = logdir
        self.runs = {r.name: r for r in discover_runs(logdir)}
        self.tables = {}
        self.started = time.time()
        self.loading_s = loading_s

    def progress(self) -> float:
        """Simulated loading (--loading-s): 0..1 over the first seconds after start."""
        if self.loading_s <= 0:
            return 1.0
        return min(1.0, (time.time() - self.started) / self.loading_s)

    def table(self, run: str, worker: str, span: str):
        key = (run, worker, span)
        if key not in self.tables:
            info = self.runs[run].span_file(worker, span)
            self.tables[key] = load_trace(info.ref, use_cache=False)
        return self.tables[key]


class Handler(BaseHTTPRequestHandler):
    state: State

    def log_message(self, fmt, *args):  # quieter
        pass

    def send(self, code: int, body, ctype="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def error(self, code: int, msg: str, messages=()):
        self.send(code, {"error": {"code": str(code), "message": msg, "messages": list(messages)}})

    def do_GET(self):  # noqa: N802
        url = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path.startswith("/data/plugin_entry.html"):
            return self.send(200, ENTRY.encode(), "text/html")
        if not url.path.startswith(PREFIX):
            return self.error(404, "not found")
        route = url.path[len(PREFIX):]
        try:
            return self.route(route, q)
        except KeyError as exc:
            return self.error(404, f"unknown {exc}")
        except Exception as exc:  # dev only
            traceback.print_exc()
            return self.error(500, str(exc))

    def route(self, route: str, q: dict[str, str]):
        st = self.state
        if route == "index.js":
            return self.send(200, (ROOT / "tb_plugin/static/index.js").read_bytes(),
                             "text/javascript")
        if route == "runs":
            runs = []
            for r in st.runs.values():
                workers = []
                for w, spans in r.workers.items():
                    out = []
                    for s in spans:
                        t = st.table(r.name, w, s.span)
                        out.append({"span": s.span, "state": t.status.state,
                                    "messages": t.status.messages, "events": len(t)})
                    workers.append({"name": w, "spans": out})
                p = st.progress()
                if p < 1:
                    for w in workers:
                        for sp in w["spans"]:
                            sp["state"] = "loading"
                runs.append({"name": r.name, "state": "ready" if p >= 1 else "loading",
                             "progress": p,
                             "views": ["Overview", "Operator", "Kernel"], "workers": workers})
            return self.send(200, {"runs": runs, "loading": st.progress() < 1,
                                   "logdir": st.logdir})
        if route == "views":
            return self.send(200, ["Overview", "Operator", "Kernel"])
        if route == "workers":
            return self.send(200, list(st.runs[q["run"]].workers))
        if route == "spans":
            return self.send(200, [s.span for s in st.runs[q["run"]].workers[q["worker"]]])
        if st.progress() < 1:
            return self.send(202, {"loading": True, "progress": st.progress()})
        t = st.table(q["run"], q["worker"], q["span"])
        if t.status.state == "error":
            return self.error(422, "the trace could not be parsed", t.status.messages)
        if route == "overview":
            return self.send(200, build_view(t, "overview"))
        if route == "operators":
            data = build_view(t, "operators", group_by=q.get("group_by", "operator"))
            return self.table_or_csv(data, q)
        if route == "operators/pies":
            from tb_plugin.analysis.operators import build_operator_pies

            top = int(q["top_n"]) if q.get("top_n") else None
            return self.send(200, build_operator_pies(t, top, q.get("group_by", "operator")))
        if route == "operators/stack":
            from tb_plugin.analysis.operators import build_call_stacks

            return self.send(200, build_call_stacks(t, q["name"], q.get("input_shape"),
                                                    q.get("group_by", "operator")))
        if route == "kernels":
            data = build_view(t, "kernels", group_by=q.get("group_by", "kernel"))
            return self.table_or_csv(data, q)
        if route == "kernels/pies":
            from tb_plugin.analysis import kernels

            return self.send(200, kernels.build_kernel_pies(t, int(q.get("top_n") or 10)))
        return self.error(404, f"no route {route}")

    def table_or_csv(self, data, q):
        if q.get("format") != "csv":
            return self.send(200, data)
        rows = data["rows"]
        buf = io.StringIO()
        if rows:
            writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        return self.send(200, buf.getvalue().encode(), "text/csv")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("logdir")
    parser.add_argument("--port", type=int, default=6006)
    parser.add_argument("--loading-s", type=float, default=0.0, help="simulate loading")
    args = parser.parse_args()
    Handler.state = State(args.logdir, args.loading_s)
    print(f"dev server on http://127.0.0.1:{args.port}/data/plugin_entry.html?name=torch_prof")
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
