"""``gradprobe study PLAN --out DIR [--executor local|ray]``. SKELETON: being built (issue 3)."""

from __future__ import annotations


def add_study_parser(subparsers) -> None:
    p = subparsers.add_parser("study", help="run a preregistered study: every arm x seed of a plan, then the analysis")
    p.add_argument("plan", help="plan TOML file (e.g. plans/tiny.toml)")
    p.add_argument("--out", required=True, help="study folder")
    p.add_argument("--executor", choices=["local", "ray"], default="local")


def study_main(args) -> int:
    raise NotImplementedError("gradprobe study is being built")
