"""Trace ingest: bytes -> columnar `TraceTable` (see schema.py for the layout).

"Cache or parse" (`load_trace`) lives a step above, in `tb_plugin.load`: ingest never knows the
cache.
"""

from .loader import parse_trace
from .schema import Kind, LoadState, ParseStatus, TraceMetadata, TraceTable

__all__ = ["Kind", "LoadState", "ParseStatus", "TraceMetadata", "TraceTable", "parse_trace"]
