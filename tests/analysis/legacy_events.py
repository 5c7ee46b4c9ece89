"""Event factories in the reference plugin's (pre-1.9) spelling: categories "Operator",
"Runtime" and "Kernel", string thread ids, a "stream 7" kernel thread. Shared by the operator,
kernel, correlation and tensor-core tests (moved here from test_optree.py: test modules do not
import each other)."""

from __future__ import annotations


def op(name, ts, dur, ext, tid="456", cat="Operator", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 13721, "tid": tid, "ts": ts, "dur": dur,
            "args": {"Input Dims": [], "External id": ext, **args}}


def runtime(ts, dur, corr, ext, tid="456", name="cudaLaunchKernel", cat="Runtime"):
    return {"ph": "X", "cat": cat, "name": name, "pid": 13721, "tid": tid, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "external id": ext}}


def kernel(ts, dur, corr, ext, name="void gemmSN_TN_kernel_64addr", **args):
    return {"ph": "X", "cat": "Kernel", "name": name, "pid": 0, "tid": "stream 7", "ts": ts,
            "dur": dur, "args": {"correlation": corr, "external id": ext, "device": 0, **args}}
