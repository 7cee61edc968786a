"""Helpers of the warm-start tests: the shipped tiny tier and a stand-in for its build step."""

from __future__ import annotations

import argparse
import json
import shutil

from gradprobe import tiers
from gradprobe.cli import warmstart as warmstart_cli

#: the shipped tiny tier's folder (its files are what a build of seed 0 writes)
SHIPPED = tiers.shipped_root() / "tiny-ef0cbbe61f4b"


def fake_build(calls: list, *, check=None):
    """A stand-in for ``gradprobe.warmstart._build_into``: copies the shipped tier's files and returns its record,
    appending the build folder's name to ``calls``; ``check(folder)`` runs first when given."""
    def build(folder, config, seed, progress, name="tiny"):
        if check is not None:
            check(folder)
        calls.append(folder.name)
        for f in SHIPPED.iterdir():
            if f.name != "warmstart.json":
                shutil.copy(f, folder / f.name)
        return json.loads((SHIPPED / "warmstart.json").read_text())
    return build


def run_warmstart(argv, capsys) -> tuple[int, str, str]:
    """``gradprobe warmstart ARGV`` in process: (exit status, stdout, stderr)."""
    parser = argparse.ArgumentParser(prog="gradprobe")
    warmstart_cli.add_warmstart_parser(parser.add_subparsers(dest="command"))
    rc = warmstart_cli.warmstart_main(parser.parse_args(["warmstart", *argv]))
    out, err = capsys.readouterr()
    return rc, out, err
