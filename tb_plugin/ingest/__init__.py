"""Trace ingest: bytes -> columnar `TraceTable` (see schema.py for the layout)."""

from .loader import load_trace, parse_trace
from .schema import Kind, LoadState, ParseStatus, TraceMetadata, TraceTable

__all__ = ["Kind", "LoadState", "ParseStatus", "TraceMetadata", "TraceTable", "load_trace",
           "parse_trace"]
