"""Bytes of one trace file -> `TraceTable`, in one streaming pass, never raising on bad input."""

from __future__ import annotations

import logging
from typing import Optional

from ..settings import Settings, settings
from ..storage import FileRef, iter_decompressed
from .parallel import SplitJob
from .parse import Limits, ParseLimit, ProgressCallback, TraceParse
from .scanner import TraceFormatError
from .schema import LoadState, TraceTable

log = logging.getLogger(__name__)


def parse_trace(ref: FileRef, *, progress: Optional[ProgressCallback] = None,
                processes: Optional[int] = None, min_split_bytes: Optional[int] = None,
                limits: Optional[Limits] = None, config: Optional[Settings] = None
                ) -> TraceTable:
    """Parse one file; never raises. `min_split_bytes` overrides the size from which a file is
    split across processes (tests use tiny values). `config`: the settings (default: the
    process's, read here); the limits (default `Limits.for_file` of `config`) apply to the
    whole file, whichever process parses which part."""
    config = config if config is not None else settings()
    parse = TraceParse(limits=limits or Limits.for_file(ref.size, config))
    job = SplitJob.start(ref, processes=processes, min_bytes=min_split_bytes,
                         limits=parse.limits, configured=config.parse_processes)
    try:
        with ref.open() as handle:
            chunks = iter_decompressed(handle, on_truncated_gzip=parse.truncated_gzip)
            if job is None:
                parse.consume(chunks, progress)
            else:
                job.run(parse, chunks, progress)
    except ParseLimit as exc:
        parse.stop(exc)
    except TraceFormatError as exc:
        parse.warn(LoadState.ERROR, f"not a readable trace: {exc}")
    except OSError as exc:  # not the file's content: may pass (the file is still being made)
        parse.status.cut_off = True
        parse.warn(LoadState.ERROR, f"cannot read the file: {exc}")
    except MemoryError:  # the machine, not the file (nor a parser bug): say what bounds it
        parse.out_of_memory()
    except Exception as exc:  # a parser bug must cost one worker, never the run or the server
        log.exception("parsing %s failed", ref.url)
        parse.warn(LoadState.ERROR, f"internal error while parsing ({type(exc).__name__}: "
                   f"{exc}); please report it with the trace")
    finally:
        if job is not None:
            job.stop()
    return parse.table()
