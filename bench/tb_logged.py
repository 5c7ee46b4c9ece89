"""TensorBoard's own entry point, as the `tensorboard` console script runs it, with torch-prof's
DEBUG log written to $TORCH_PROF_BENCH_LOG (wall-clock timestamps): the cold-open benchmark
(cold_open.py) reads its `torch-prof timing:` lines for the breakdown. Nothing else differs from
`tensorboard --logdir ...`; parser processes re-import this file as the console script's."""

import logging
import os
import sys

from tensorboard.main import run_main

if __name__ == "__main__":
    handler = logging.FileHandler(os.environ["TORCH_PROF_BENCH_LOG"])
    handler.setFormatter(logging.Formatter("%(created).3f %(message)s"))
    logger = logging.getLogger("tb_plugin")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    sys.argv[0] = "tensorboard"
    sys.exit(run_main())
