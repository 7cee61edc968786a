"""What the first :func:`gradprobe.load_probe` of a process costs, before and after its checks stopped importing
pandas and scipy (``gradprobe.forecast`` imports its submodules on first use; ``probe_input`` loads numpy only).

    python benchmarks/load_probe_import.py [PROBE] [--before REV_OR_DIR] [--runs N]

PROBE: a probe folder (default: the shipped ``data/study_tiny/probe``). ``--before``: the code to compare with, a
checkout folder or a git revision of this repository extracted with ``git archive`` into a temporary folder (default
237b9fc, the commit before the change). Each timing is one fresh ``python`` process running ``import gradprobe;
gradprobe.load_probe(PROBE)`` with that checkout first on ``sys.path``, timed inside it (``time.perf_counter``, so
the interpreter's own start is left out); the two checkouts alternate, N runs each (default 7). Prints the median
seconds of each, their ratio, and which of pandas, scipy and torch each process imported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNIPPET = """
import sys, time, json
sys.path.insert(0, {root!r})
t = time.perf_counter()
import gradprobe
gradprobe.load_probe({probe!r})
seconds = time.perf_counter() - t
print(json.dumps({{"seconds": seconds, "file": gradprobe.__file__,
                   "heavy": [m for m in ("pandas", "scipy", "torch") if m in sys.modules]}}))
"""


def checkout(before: str, scratch: Path) -> Path:
    """``before`` as a folder holding ``gradprobe/``: itself, or the revision's ``gradprobe/`` extracted."""
    if Path(before, "gradprobe").is_dir():
        return Path(before).resolve()
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", before, "gradprobe"], check=True,
                         capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(tar)) as f:
        f.extractall(scratch, filter="data")
    return scratch


def first_read(root: Path, probe: Path) -> dict:
    """One fresh process's first ``load_probe`` with ``root``'s gradprobe: seconds, file, heavy modules."""
    out = subprocess.run([sys.executable, "-c", SNIPPET.format(root=str(root), probe=str(probe))], check=True,
                         capture_output=True, text=True, cwd=tempfile.gettempdir()).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert Path(result["file"]).is_relative_to(root), (result["file"], root)  # that checkout's code ran
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("probe", nargs="?", default=str(ROOT / "data" / "study_tiny" / "probe"))
    parser.add_argument("--before", default="237b9fc")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    probe = Path(args.probe).resolve()
    with tempfile.TemporaryDirectory() as scratch:
        roots = {"before": checkout(args.before, Path(scratch)), "after": ROOT}
        runs: dict[str, list[dict]] = {k: [] for k in roots}
        for r in range(args.runs):
            for key in (list(roots) if r % 2 == 0 else list(roots)[::-1]):
                runs[key].append(first_read(roots[key], probe))
    med = {k: statistics.median(x["seconds"] for x in v) for k, v in runs.items()}
    print(f"first gradprobe.load_probe({probe}) in a fresh process, median of {args.runs}:")
    for key in roots:
        heavy = sorted({m for x in runs[key] for m in x["heavy"]})
        print(f"  {key:6s} {med[key]:.3f} s  imports {', '.join(heavy) or 'none of pandas, scipy, torch'}"
              f"  ({'--before ' + args.before if key == 'before' else 'this checkout'})")
    print(f"  after / before = {med['after'] / med['before']:.2f}")


if __name__ == "__main__":
    main()
