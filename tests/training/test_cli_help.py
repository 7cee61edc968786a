"""``gradprobe --help`` is written for users: what the tool does, every command on one line, a quick start and
where the docs are; no developer docstring."""

from __future__ import annotations

import re

import pytest

from gradprobe.cli import main


def _run(argv, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(argv)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_top_level_help_is_user_facing(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, text, _ = _run(["--help"], capsys)
    assert code == 0
    assert text.startswith("usage: gradprobe [-h] [-v] COMMAND [OPTIONS]\n")
    # the developer docstring is gone
    for dev in ("``", "add_*_parser", "only dispatches", "Command line:"):
        assert dev not in text
    assert "Is an RLVR (GRPO) training intervention" in text and "worth its compute?" in text
    # every registered command, one line each, in the order argparse knows them
    code, _, err = _run(["no-such-command"], capsys)
    assert code == 2
    registered = re.findall(r"'([\w-]+)'", err.split("choose from", 1)[1])
    assert sorted(registered) == sorted(["probe", "train", "warmstart", "study", "rank-prompts", "difficulty-eval"])
    block = text.split("\ncommands:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.split()[0] for line in block] == ["probe", "train", "study", "warmstart", "rank-prompts",
                                                   "difficulty-eval"]
    assert all(len(line.split(None, 1)[1]) > 20 for line in block)  # each has its one-line description
    # the quick start and where the docs are
    quick = text.split("quick start", 1)[1]
    assert "pip install torch==2.13.0 && pip install -e ." in quick
    assert "gradprobe probe --out runs/probe" in quick
    assert "gradprobe train --plan plans/tiny.toml --arm grpo --out runs/g0 --updates 1" in quick
    assert "gradprobe COMMAND --help" in quick
    assert "docs: README.md" in text
    assert max(len(line) for line in text.splitlines()) <= 79, [line for line in text.splitlines() if len(line) > 79]
    assert "-v, --verbose  log progress details and show Python warnings in full" in text


def test_quick_start_train_command_parses(capsys):
    code, text, _ = _run(["train", "--help"], capsys)
    assert code == 0 and text.startswith("usage: gradprobe train [-h] --plan PLAN")
    for flag in ("--plan", "--arm", "--out", "--updates", "--budget-tokens", "--budget-flops", "--budget-seconds"):
        assert flag in text
    assert "shortening a run" in text


def test_sigterm_outside_the_run_says_what_the_folder_holds(tmp_path, monkeypatch, capsys):
    """A tester's SIGTERM 1-3 s into `gradprobe train` (while the modules loaded) printed "terminated (SIGTERM)
    after the run in Z2 had finished; its files are kept", with no Z2 at all."""
    import json
    import types

    import gradprobe.cli.train as train_cli

    def stopped(args):
        raise train_cli.Terminated()

    monkeypatch.setattr(train_cli, "_train_command", stopped)
    out = tmp_path / "Z2"
    assert train_cli.train_main(types.SimpleNamespace(out=str(out))) == 143
    assert capsys.readouterr().err == ("gradprobe train: terminated (SIGTERM); it stopped before the first update and "
                                       "the first checkpoint: running the same command again starts the run from "
                                       "update 0\n")
    out.mkdir()
    (out / "summary.json").write_text(json.dumps({"completed": True}))
    assert train_cli.train_main(types.SimpleNamespace(out=str(out))) == 143
    assert capsys.readouterr().err == (f"gradprobe train: terminated (SIGTERM) after the run in {out} had finished; "
                                       "its files are kept\n")
