"""``gradprobe warmstart``: build (or reuse) a model tier by supervised warm start (:mod:`gradprobe.warmstart`)."""

from __future__ import annotations

import argparse
import json
import sys

from ..tiers import TIERS
from .args import out_path


def add_warmstart_parser(subparsers) -> None:
    """Add ``gradprobe warmstart --tier tiny [--seed S] [--force] [--out DIR]`` to ``subparsers``."""
    p = subparsers.add_parser("warmstart", help="build (or reuse) a model tier by supervised warm start",
                              formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--tier", default="tiny", choices=sorted(TIERS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--force", action="store_true", help="rebuild even when cached")
    p.add_argument("--out", type=out_path, default=None, help="output folder (default: the cache, see `cache_root`)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")


def warmstart_main(args) -> int:
    """Run ``gradprobe warmstart``; prints the folder and its measured accuracy; returns the exit status."""
    from ..warmstart import build_tier  # torch: deferred so that parsing the command line loads none

    try:
        path = build_tier(args.tier, seed=args.seed, out=args.out, force=args.force, progress=not args.no_progress)
    except (ValueError, RuntimeError, OSError) as e:
        print(f"gradprobe warmstart: error: {e}", file=sys.stderr)
        return 2
    record = json.loads((path / "warmstart.json").read_text())
    ev = record["eval"]
    print(f"tier {args.tier} (seed {args.seed}): {path}\n"
          f"  parameters {record['parameters']:,}, final SFT loss {record['final_sft_loss']:.4f}, "
          f"built in {record['seconds']:.0f} s\n"
          f"  train pool ({ev['prompts']} prompts): greedy accuracy {ev['greedy_accuracy']:.3f}, "
          f"sampled (T=1, {ev['samples']}/prompt) {ev['sampled_accuracy']:.3f}, "
          f"prompts with 0 < success < 1: {ev['spread_fraction']:.2f}")
    return 0
