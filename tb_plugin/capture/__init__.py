"""Capture on demand: a running training job records the next N steps when asked.

The run folder is the channel (no network port in the job): `protocol.py` is the file format
of the request, the per-worker status and the listener markers, read and written through
`tb_plugin.storage` (fsspec); `watch.py` is the job's side (the rate-limited poll at each
`Recorder.step()`, the capture and its status). `tb_plugin.cli_capture` and the server's
`/capture` routes write requests and read statuses. No imports here.
"""
