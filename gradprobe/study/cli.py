"""``gradprobe study PLAN --out DIR [--executor local|ray]`` and ``gradprobe study --analyze-only --out DIR``."""

from __future__ import annotations

import sys


def add_study_parser(subparsers) -> None:
    """Register ``gradprobe study`` on an argparse sub-parser collection."""
    import argparse

    p = subparsers.add_parser(
        "study", help="run a preregistered study: every arm x seed of a plan, the probe, then the analysis",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Freeze the plan into DIR (sha256), run every arm x seed (a killed study resumes: finished runs "
                    "are never redone), probe every arm's reward on the initial policy, write runs.csv, "
                    "analysis.json and figures/. Exit status: 0 all done, 1 a run/probe/analysis failed (the "
                    "others are kept), 2 bad input.")
    p.add_argument("plan", nargs="?", help="plan TOML file (e.g. plans/tiny.toml); not needed with --analyze-only")
    p.add_argument("--out", required=True, help="study folder (a new one for a changed plan)")
    p.add_argument("--executor", choices=["local", "ray", "inline"], default="local",
                   help="local: process pool; ray: one Ray task per run; inline: serially in this process")
    p.add_argument("--workers", type=int, default=None,
                   help="parallel runs (default: min(runs, cpu cores)); each gets max(1, cores // workers) threads")
    p.add_argument("--ray-address", default=None, help="Ray cluster address (default: a local ray.init())")
    p.add_argument("--no-probe", action="store_true", help="skip the probe of the arms' rewards")
    p.add_argument("--no-analysis", action="store_true", help="only run; analyse later with --analyze-only")
    p.add_argument("--analyze-only", action="store_true", help="(re)write analysis.json and figures from DIR/runs.csv")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def study_main(args) -> int:
    """Run ``gradprobe study``; returns the exit status (0 done, 1 something failed, 2 bad input)."""
    from ..training.checkpoint import OutputDirError
    from ..training.plan import PlanError
    from .analysis import AnalysisError, analyze, format_rankings
    from .runner import StudyError, run_study

    def err(msg: str) -> int:
        print(f"gradprobe study: error: {msg}", file=sys.stderr)
        return 2

    if args.analyze_only:
        try:
            result = analyze(args.out)
        except (AnalysisError, PlanError, OSError, ValueError) as e:
            return err(str(e))
        print(format_rankings(result))
        print(f"\nwrote {args.out}/analysis.json and {args.out}/figures/")
        return 0
    if not args.plan:
        return err("give the plan file: gradprobe study PLAN --out DIR (or --analyze-only)")
    say = (lambda m: None) if args.quiet else None
    try:
        res = run_study(args.plan, args.out, executor=args.executor, workers=args.workers,
                        ray_address=args.ray_address, probe=not args.no_probe, analyze=not args.no_analysis, say=say)
    except (PlanError, StudyError, OutputDirError, ValueError) as e:
        return err(str(e))
    print(res.summary())
    if (not args.no_analysis) and res.analysis_error is None and res.done:
        import json
        from pathlib import Path

        analysis = json.loads((Path(args.out) / "analysis.json").read_text())
        print()
        print(format_rankings(analysis))
        print(f"\nwrote {args.out}/runs.csv, {args.out}/analysis.json, {args.out}/figures/")
    return 0 if res.ok else 1
