"""What the tier checks cost within loading a built tier (:func:`gradprobe.models.load_policy` of a tier alias).

    python benchmarks/tier_load.py [TIER] [N]

Loads the tier ``TIER`` (default ``tiny``: the shipped build, unless the cache holds one) ``N`` times (default 15) in
one process, one torch thread, and times on the process's CPU clock (other processes on the machine do not enter it)
each whole load and, inside it, gradprobe's tier checks: :func:`gradprobe.models.refuse_damaged_tier` (the files
read once each by :func:`gradprobe.models.read_tier_files`, then :func:`gradprobe.models.tier_model_damage`: the
config and the safetensors header against the recorded recipe) and :func:`gradprobe.models.warn_if_rebuilt_tier`.
Prints the first load apart (it imports transformers' model code and builds the recipe's model on the meta device,
once per process), then the medians of the others in milliseconds, and the checks' share of the load as ratios.
"""

import statistics
import sys
import time

import torch
from transformers.utils import logging as hf_logging

import gradprobe.models as models

name = sys.argv[1] if len(sys.argv) > 1 else "tiny"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 15
torch.set_num_threads(1)
hf_logging.disable_progress_bar()  # one bar per load on stderr otherwise
spent = {"read": 0.0, "checks": 0.0}


def timed(key, function):
    """``function``, adding the CPU seconds of each call to ``spent[key]``."""
    def call(*args, **kwargs):
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[key] += time.process_time() - start
    return call


models.read_tier_files = timed("read", models.read_tier_files)  # inside refuse_damaged_tier, so inside the checks
models.refuse_damaged_tier = timed("checks", models.refuse_damaged_tier)
models.warn_if_rebuilt_tier = timed("checks", models.warn_if_rebuilt_tier)
rows = []
for _ in range(n + 1):
    spent.update(read=0.0, checks=0.0)
    start = time.process_time()
    models.load_policy(name)
    rows.append({"load": time.process_time() - start, **spent})
first, rest = rows[0], rows[1:]
med = {key: 1000 * statistics.median(r[key] for r in rest) for key in ("load", "checks", "read")}
share = statistics.median(r["checks"] / r["load"] for r in rest)
print(f"{name}: first load {1000 * first['load']:.1f} ms, checks {1000 * first['checks']:.1f} ms "
      f"({first['checks'] / first['load']:.3f} of it)")
print(f"{name}: median of {n} more loads on the CPU clock, one thread: load {med['load']:.1f} ms, checks "
      f"{med['checks']:.2f} ms ({share:.3f} of the load; files read {med['read']:.2f} ms, "
      f"{med['read'] / med['checks']:.2f} of the checks)")
