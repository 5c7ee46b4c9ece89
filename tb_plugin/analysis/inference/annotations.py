"""Serving step annotations: the phase and batch/token counts one annotation name states.

The names read (as the serving engines write them; nothing else is guessed):

- vLLM, with per-request attention aggregates (the shared vLLM and SGLang traces):
  `execute_<T>_context_<C>(sq<a>sk<b>sqsq<c>sqsk<d>)_generation_<G>(sq<e>sk<f>sqsq<g>sqsk<h>)`:
  T tokens scheduled in the step, C context (prefill) requests, G generation (decode)
  requests; per part `sq` = Σ N_Q (query tokens), `sk` = Σ N_KV (KV tokens attended),
  `sqsq` = Σ N_Q², `sqsk` = Σ N_Q·N_KV.
- vLLM without the aggregates (vllm-project/vllm#22496):
  `execute_context_<C>(<context tokens>)_generation_<G>(<generation tokens>)`; T = the sum.
- SGLang: `step[<MODE> key=value ...]` (`step[DECODE bs=32]`, `step[EXTEND bs=15 toks=15360]`,
  `step[mixed bs=N ext=T dec=D]`, `step[idle]`, with the optional roofline fields `c=`, `g=`,
  `c_sq=`, `c_sk=`, `g_sq=`, `g_sk=`...): `bs` requests; `toks` (else `ext` + `dec`, else
  `c_sq` + `g_sq`) tokens; `c=` / `g=` context / generation requests.

Phase: prefill when the step has context requests and no generation requests, decode for the
reverse, mixed for both. SGLang's mode decides where the name has no such counts: EXTEND or
PREFILL is prefill, DECODE decode, MIXED mixed, IDLE idle, anything else (TARGET_VERIFY,
DRAFT_EXTEND...) "other". A decode request processes one token per step, so a decode step
without a token count has `tokens = requests`.
"""

from __future__ import annotations

import re
from typing import Any, Optional

import numpy as np

from ...ingest.schema import Kind, TraceTable
from ..events import category_flags

PREFILL, DECODE, MIXED, IDLE, OTHER = "prefill", "decode", "mixed", "idle", "other"
PHASES = (PREFILL, DECODE, MIXED, IDLE, OTHER)

#: A count: at most `MAX_DIGITS` digits (exact in float64; a longer one is no step name).
MAX_DIGITS = 15
_N = rf"(\d{{1,{MAX_DIGITS}}})"
_AGG = rf"sq{_N}sk{_N}sqsq{_N}sqsk{_N}"
VLLM_RE = re.compile(rf"^execute_{_N}_context_{_N}\({_AGG}\)_generation_{_N}\({_AGG}\)$")
VLLM_PLAIN_RE = re.compile(rf"^execute_context_{_N}\({_N}\)_generation_{_N}\({_N}\)$")
SGLANG_RE = re.compile(rf"^step\[([A-Za-z_]+)((?:\s+[A-Za-z_]+={_N})*)\s*\]$")
_FIELD_RE = re.compile(rf"([A-Za-z_]+)={_N}")
_MODES = {"EXTEND": PREFILL, "PREFILL": PREFILL, "DECODE": DECODE, "MIXED": MIXED,
          "IDLE": IDLE}

#: The counts a parsed name carries (None: the name does not say).
FIELDS = ("requests", "context_requests", "generation_requests", "tokens", "context_tokens",
          "context_kv_tokens", "generation_tokens", "generation_kv_tokens")


def parse_step_name(name: str) -> Optional[dict[str, Any]]:
    """The phase, `source` ("vllm" | "sglang"), `mode` (SGLang's, else None) and `FIELDS` of a
    serving step annotation, None for any other name."""
    match = VLLM_RE.match(name)
    if match:
        g = [int(x) for x in match.groups()]
        return _counts("vllm", None, tokens=g[0], context_requests=g[1],
                       context_tokens=g[2], context_kv_tokens=g[3], generation_requests=g[6],
                       generation_tokens=g[7], generation_kv_tokens=g[8])
    match = VLLM_PLAIN_RE.match(name)
    if match:
        c, ct, gen, gt = (int(x) for x in match.groups())
        return _counts("vllm", None, tokens=ct + gt, context_requests=c, context_tokens=ct,
                       generation_requests=gen, generation_tokens=gt)
    match = SGLANG_RE.match(name)
    if match:
        return _sglang(match.group(1), dict((k.lower(), int(v)) for k, v in
                                            _FIELD_RE.findall(match.group(2))))
    return None


def _sglang(mode: str, f: dict[str, int]) -> dict[str, Any]:
    phase = _MODES.get(mode.upper(), OTHER)
    bs = f.get("bs")
    ctx, gen = f.get("c"), f.get("g")
    if phase == PREFILL:
        ctx, gen = (bs if ctx is None else ctx), (0 if gen is None else gen)
    elif phase == DECODE:
        ctx, gen = (0 if ctx is None else ctx), (bs if gen is None else gen)
    tokens = f.get("toks")
    if tokens is None and ("ext" in f or "dec" in f):
        tokens = f.get("ext", 0) + f.get("dec", 0)
    if tokens is None and ("c_sq" in f or "g_sq" in f):
        tokens = f.get("c_sq", 0) + f.get("g_sq", 0)
    if tokens is None and phase == DECODE and gen is not None:
        tokens = gen
    out = _counts("sglang", mode, requests=bs, context_requests=ctx, generation_requests=gen,
                  tokens=tokens, context_tokens=f.get("c_sq", f.get("ext")),
                  context_kv_tokens=f.get("c_sk"),
                  generation_tokens=f.get("g_sq", f.get("dec")),
                  generation_kv_tokens=f.get("g_sk"))
    if phase in (IDLE, OTHER) or out["phase"] == OTHER:
        out["phase"] = phase
    return out


def _counts(source: str, mode: Optional[str], **given: Optional[int]) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(FIELDS)
    out.update(given)
    ctx, gen = out["context_requests"], out["generation_requests"]
    if out["requests"] is None and ctx is not None and gen is not None:
        out["requests"] = ctx + gen
    out.update(source=source, mode=mode, phase=phase_of(ctx, gen))
    return out


def phase_of(context_requests: Optional[int], generation_requests: Optional[int]) -> str:
    """prefill (context requests only), decode (generation only), mixed (both), idle
    (neither), other (the counts are unknown)."""
    if context_requests is None or generation_requests is None:
        return OTHER
    if context_requests > 0 and generation_requests > 0:
        return MIXED
    if context_requests > 0:
        return PREFILL
    return DECODE if generation_requests > 0 else IDLE


def merge(outer: dict[str, Any], inner: dict[str, Any]) -> dict[str, Any]:
    """One step from two nested annotations (SGLang writes `execute_...` around its own
    `step[...]`): each count from the outer name, else the inner; the outer's phase unless it
    is "other"; source and mode joined."""
    out = {k: (outer[k] if outer[k] is not None else inner[k]) for k in FIELDS}
    out["phase"] = outer["phase"] if outer["phase"] != OTHER else inner["phase"]
    out["source"] = "+".join(dict.fromkeys([*outer["source"].split("+"),
                                            *inner["source"].split("+")]))
    out["mode"] = outer["mode"] or inner["mode"]
    return out


def serving_annotation_mask(table: TraceTable) -> np.ndarray:
    """Per event row: a complete host annotation whose name is a serving step's (the
    parser children count them for the Inference tab: `features.py`)."""
    events = table.events
    kind = events["kind"].to_numpy() == Kind.USER_ANNOTATION
    named = category_flags(events["name"], _is_step_name, np.flatnonzero(kind))
    dur = events["dur"].to_numpy()
    return named & kind & np.isfinite(dur) & (dur >= 0)


def _is_step_name(name: str) -> bool:
    return name.startswith(("execute_", "step[")) and parse_step_name(name) is not None
