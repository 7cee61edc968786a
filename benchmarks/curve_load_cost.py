"""What checking a saved reference curve costs when it loads (:mod:`gradprobe.forecast.curve_file`).

    python benchmarks/curve_load_cost.py [PATH]

Loads the curve (default: the shipped ``gradprobe/data/curves/tiny_frontier_grpo.json``) three ways, interleaved
in one process, and prints the median CPU-clock milliseconds of each and their ratios to the unchecked read:
``read`` (the file read and the curve built from it, no check), ``+fit`` (plus :func:`check_fit`, the params
against a refit of the points) and ``load`` (:meth:`ReferenceCurve.load`: plus :func:`check_replicates`).
"""

import statistics
import sys
import time
from pathlib import Path

from gradprobe.forecast import ReferenceCurve
from gradprobe.forecast.curve_file import check_fit, read_curve_file

path = Path(sys.argv[1]) if len(sys.argv) > 1 else (
    Path(__file__).resolve().parents[1] / "gradprobe" / "data" / "curves" / "tiny_frontier_grpo.json")


def read():
    # a saved curve holds points, whatever their range: ReferenceCurve.load reads it so
    return ReferenceCurve(**read_curve_file(path), accuracy_scale="points")


def with_fit():
    curve = read()
    check_fit(path, curve)
    return curve


ways = {"read": read, "+fit": with_fit, "load": lambda: ReferenceCurve.load(path)}
ms = {k: [] for k in ways}
for r in range(15):
    for key in (list(ways) if r % 2 == 0 else list(ways)[::-1]):
        t = time.process_time()
        ways[key]()
        ms[key].append(1000 * (time.process_time() - t))
med = {k: statistics.median(v) for k, v in ms.items()}
print(f"{path.name}: " + ", ".join(f"{k} {v:.1f} ms ({v / med['read']:.1f}x read)" for k, v in med.items()))
print(f"the replicate checks add {med['load'] - med['+fit']:.1f} ms ({med['load'] / med['+fit']:.2f}x the fit check)")
