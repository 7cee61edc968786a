"""``gradprobe rank-prompts`` and ``gradprobe difficulty-eval``. SKELETON: being built (issue 5)."""

from __future__ import annotations


def add_difficulty_parsers(subparsers) -> None:
    for name in ("rank-prompts", "difficulty-eval"):
        p = subparsers.add_parser(name)
        p.add_argument("--out", required=True)


def difficulty_main(args) -> int:
    raise NotImplementedError(f"gradprobe {args.command} is being built")
