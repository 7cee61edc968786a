"""``gradprobe warmstart``: build (or reuse) a model tier by supervised warm start (:mod:`gradprobe.warmstart`).

Ctrl-C exits 130 and SIGTERM 143 (:func:`gradprobe.cli.probe.terminate_cleanly`), each with one line, as
``gradprobe train`` does; the unfinished build's temporary folder is removed and an earlier build is kept.
"""

from __future__ import annotations

import sys

from ..tables import shown
from ..tiers import TIERS
from .args import HelpFormatter, out_path, seed_int
from .probe import Terminated, terminate_cleanly

__all__ = ["add_warmstart_parser", "warmstart_main"]


def add_warmstart_parser(subparsers) -> None:
    """Add ``gradprobe warmstart --tier tiny [--seed S] [--force] [--out DIR]`` to ``subparsers``."""
    p = subparsers.add_parser("warmstart", help="build (or reuse) a model tier by supervised warm start",
                              formatter_class=HelpFormatter)
    p.add_argument("--tier", default="tiny", choices=sorted(TIERS),
                   help="the warm-started tier to build (its recipe: gradprobe.tiers.TIERS)")
    p.add_argument("--seed", type=seed_int, default=0, help="initialisation and SFT-data seed")
    p.add_argument("--force", action="store_true",
                   help="rebuild even when built, and replace another or a damaged build in --out")
    p.add_argument("--out", type=out_path, default=None, help="output folder (default: the cache, see `cache_root`)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")


def warmstart_main(args) -> int:
    """Run ``gradprobe warmstart``; prints the folder, whether it was built now or reused (with the earlier build's
    time) and its measured accuracy; returns the exit status: 0 built or reused, 2 refused (bad input, another or a
    damaged build in ``--out``, another process building into the same folder, a folder that cannot be written),
    130 Ctrl-C, 143 SIGTERM."""
    try:
        with terminate_cleanly():  # SIGTERM raises Terminated: the build stops and cleans up as on Ctrl-C
            return _warmstart_command(args)
    except Terminated:  # after the build had finished, while its lines were printed
        print("gradprobe warmstart: terminated (SIGTERM) after the build had finished; its folder is kept",
              file=sys.stderr)
        return 143


def _stopped(args, how: str) -> str:
    where = f"--out {shown(args.out)}" if args.out is not None else "the tier cache"
    return (f"gradprobe warmstart: {how}; the unfinished build was removed and nothing was written to {where} (an "
            "earlier build there, if any, is kept); run the same command again to build the tier")


def _warmstart_command(args) -> int:
    """``gradprobe warmstart`` inside :func:`warmstart_main`'s SIGTERM handler."""
    try:
        from ..warmstart import build_or_reuse_tier, tier_record  # torch: deferred: parsing the command line loads none

        path, reused = build_or_reuse_tier(args.tier, seed=args.seed, out=args.out, force=args.force,
                                           progress=not args.no_progress)
        record = tier_record(path)
    except KeyboardInterrupt:
        print(_stopped(args, "interrupted"), file=sys.stderr)
        return 130
    except Terminated:
        print(_stopped(args, "terminated (SIGTERM)"), file=sys.stderr)
        return 143
    except (ValueError, RuntimeError, OSError) as e:
        print(f"gradprobe warmstart: error: {e}", file=sys.stderr)
        return 2
    ev = record["eval"]
    when = (f"reused an earlier build (which took {record['seconds']:.0f} s; --force rebuilds it)" if reused
            else f"built in {record['seconds']:.0f} s")
    print(f"tier {args.tier} (seed {args.seed}): {shown(str(path))}\n"
          f"  parameters {record['parameters']:,}, final SFT loss {record['final_sft_loss']:.4f}, {when}\n"
          f"  train pool ({ev['prompts']} prompts): greedy accuracy {ev['greedy_accuracy']:.3f}, "
          f"sampled (T=1, {ev['samples']}/prompt) {ev['sampled_accuracy']:.3f}, "
          f"prompts with 0 < success < 1: {ev['spread_fraction']:.2f}")
    return 0
