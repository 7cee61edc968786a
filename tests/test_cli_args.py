"""The shared argument pieces of the command line (gradprobe.cli.args): one definition, every command's errors."""

from __future__ import annotations

import argparse

import pytest

from gradprobe.cli import main
from gradprobe.cli.args import add_report_to, nonneg_int, out_path, positive_int
from gradprobe.tracking import REPORT_TO


@pytest.mark.parametrize("check, text, value", [(positive_int, "1", 1), (positive_int, "12", 12),
                                                (nonneg_int, "0", 0), (nonneg_int, "7", 7)])
def test_range_checkers_accept_their_range(check, text, value):
    assert check(text) == value


@pytest.mark.parametrize("check, text, message", [
    (positive_int, "0", "must be >= 1, got 0"), (positive_int, "-3", "must be >= 1, got -3"),
    (nonneg_int, "-1", "must be >= 0, got -1"),
    (positive_int, "x", "expected an integer, got 'x'"), (nonneg_int, "1.5", "expected an integer, got '1.5'"),
])
def test_range_checkers_refuse_with_the_value(check, text, message):
    with pytest.raises(argparse.ArgumentTypeError) as err:
        check(text)
    assert str(err.value) == message


def test_report_to_flag():
    parser = argparse.ArgumentParser()
    add_report_to(parser, "where the tracker files go")
    assert parser.parse_args([]).report_to == "none"
    assert parser.parse_args(["--report-to", "tensorboard"]).report_to == "tensorboard"
    (action,) = [a for a in parser._actions if "--report-to" in a.option_strings]
    assert list(action.choices) == list(REPORT_TO) and action.help == "where the tracker files go"


@pytest.mark.parametrize("argv, error", [
    (["rank-prompts", "--model", "m", "--task", "t", "--pool", "0", "--out", "o"],
     "argument --pool: must be >= 1, got 0"),
    (["difficulty-eval", "--model", "m", "--task", "t", "--pool", "3", "--observed", "-1", "--out", "o"],
     "argument --observed: must be >= 0, got -1"),
    (["train", "--plan", "p", "--arm", "a", "--out", "o", "--report-to", "x"],
     "argument --report-to: invalid choice: 'x'"),
    (["study", "p", "--report-to", "x"], "argument --report-to: invalid choice: 'x'"),
])
def test_commands_use_the_shared_pieces(argv, error, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and error in capsys.readouterr().err


_EMPTY = ("is empty ({!r}): give a path (an unset shell variable, --out \"$OUT\", gives an empty one; --out . is "
          "the current folder)")


@pytest.mark.parametrize("argv", [
    ["probe"], ["train", "--plan", "p", "--arm", "a"], ["study", "p"], ["warmstart"],
    ["rank-prompts", "--model", "m", "--task", "t"], ["difficulty-eval", "--model", "m", "--task", "t"],
])
@pytest.mark.parametrize("out", ["", "  "])
def test_an_empty_out_is_refused_before_anything_runs(argv, out, capsys, tmp_path, monkeypatch):
    """``--out ""`` (an unset shell variable) would write into the current folder, and ``gradprobe probe
    --calibration`` joined it as ``/calibrated.json``, at the filesystem root."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--out", out])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and f"argument --out: {_EMPTY.format(out)}" in err, err
    assert list(tmp_path.iterdir()) == []  # nothing written where the command ran


@pytest.mark.parametrize("command", [["rows", "s"], ["fit", "r.csv"], ["report", "s"]])
def test_calib_refuses_an_empty_out_too(command, capsys, tmp_path, monkeypatch):
    from calib.cli import main as calib_main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        calib_main([*command, "--out", ""])
    assert exit_.value.code == 2 and f"argument --out: {_EMPTY.format('')}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_out_path_keeps_a_real_path():
    assert out_path("runs/probe") == "runs/probe" and out_path(".") == "."


def test_every_option_of_every_command_has_a_help_text_and_no_default_reads_none(monkeypatch, capsys):
    """``gradprobe probe --help`` listed --heldout-prompts, --seed, --dtype... without a word, and printed
    ``(default: None)`` after help texts that name their own default (``--reference-curve-scale``: auto)."""
    made = _parsers("probe", monkeypatch, capsys)
    assert set(made) == {"probe", "train", "warmstart", "study", "rank-prompts", "difficulty-eval"}
    bare = [(name, a.option_strings[-1]) for name, p in made.items() for a in p._actions
            if a.option_strings and a.dest != "help" and a.help is not argparse.SUPPRESS and not a.help]
    assert bare == []
    for name, p in made.items():
        text = " ".join(p.format_help().split())
        assert "(default: None)" not in text, name
    probe = " ".join(made["probe"].format_help().split())
    assert "--heldout-prompts HELDOUT_PROMPTS prompts of the held-out batch" in probe and "(default: 8)" in probe
    assert "[0, 1]) --initial-accuracy" in probe  # --reference-curve-scale's help ends with its own default



def test_no_progress_hides_bars_drawn_with_tqdm_directly():
    """``--no-progress`` left transformers' GGUF "Converting and de-quantizing" bar (plain ``tqdm.auto``) on. tqdm
    reads ``TQDM_DISABLE`` when it is imported, as the command imports it after reading its flags: a fresh process."""
    import os
    import subprocess
    import sys

    code = ("import gradprobe.cli as cli, sys; assert 'tqdm' not in sys.modules; cli._no_library_progress_bars(); "
            "from tqdm.auto import tqdm; [x for x in tqdm(range(3), desc='Converting and de-quantizing')]")
    env = {k: v for k, v in os.environ.items() if k not in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_no_progress_given_to_main_in_process_leaves_the_callers_bars_as_they_were(monkeypatch, capsys):
    """A reviewer: ``gradprobe.cli.main([..., "--no-progress"])`` from a notebook left ``TQDM_DISABLE`` set and
    transformers' bars off for the rest of the session (and for study workers started later)."""
    import os

    from transformers.utils import logging as hf_logging

    for key in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")
    seen = {}

    def command(args):
        seen.update(TQDM_DISABLE=os.environ.get("TQDM_DISABLE"), bars=hf_logging.is_progress_bar_enabled())
        return 7

    import gradprobe.cli as cli

    monkeypatch.setattr(cli, "warmstart_main", command)
    assert main(["warmstart", "--no-progress"]) == 7
    assert seen == {"TQDM_DISABLE": "1", "bars": False}  # off while the command ran
    assert "TQDM_DISABLE" not in os.environ and os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "0"
    assert hf_logging.is_progress_bar_enabled()
    from huggingface_hub.utils import are_progress_bars_disabled

    assert not are_progress_bars_disabled()  # the hub's bars too (a tester: off after main returned)


def _parsers(argv_command: str, monkeypatch, capsys) -> dict:
    """Every command's parser, by name, as ``gradprobe ARGV_COMMAND --help`` builds them (its output discarded)."""
    made = {}
    add_parser = argparse._SubParsersAction.add_parser

    def recording(self, name, **kw):
        made[name] = add_parser(self, name, **kw)
        return made[name]

    monkeypatch.setattr(argparse._SubParsersAction, "add_parser", recording)
    with pytest.raises(SystemExit):
        main([argv_command, "--help"])
    capsys.readouterr()
    return made


def _option_help(argv_command: str, option: str, monkeypatch, capsys) -> str:
    """The help text of ``option`` of the command ``argv_command``, as the parser holds it (one line)."""
    (action,) = [a for a in _parsers(argv_command, monkeypatch, capsys)[argv_command]._actions
                 if option in a.option_strings]
    return action.help


@pytest.mark.parametrize("command", ["probe", "rank-prompts", "difficulty-eval"])
def test_the_model_help_lists_every_alias_the_loader_accepts(command, monkeypatch, capsys):
    """A tester: ``--model``'s help named tiny, tiny-qwen2 and smollm2-135m (rank-prompts, difficulty-eval) or left
    out tiny-llama-sft (probe), aliases :func:`gradprobe.models.load_policy` accepts; the lists are now read from
    the loader's constants (kept torch-free in gradprobe.tiers, re-exported by gradprobe.models)."""
    import re

    from gradprobe import models, tiers

    text = _option_help(command, "--model", monkeypatch, capsys)
    listed = [name for group in re.findall(r"\(([^)]*)\)", text) for name in group.split(", ")]
    assert sorted(listed) == sorted(models.ALIASES)
    assert len(listed) == len(set(listed))
    assert models.ALIASES is tiers.ALIASES and models.TIER_ALIASES is tiers.TIER_ALIASES
    assert models.TINY_ARCHITECTURES is tiers.TINY_ARCHITECTURES
    assert text == ("a shipped warm-started tier (tiny, tiny-llama-sft), a randomly initialised tiny model "
                    "(tiny-qwen2, tiny-llama), another alias (smollm2-135m), a local folder, a .gguf file or a hub id")


def test_the_reuse_runs_help_says_what_a_reused_run_must_match(monkeypatch, capsys):
    """A tester: ``gradprobe study --help`` did not say that a run is reused only when its recorded initial weights
    (config.json ``model_weights``) match what the model's files hold now (gradprobe.study.reuse)."""
    text = _option_help("study", "--reuse-runs", monkeypatch, capsys)
    assert ("A run is reused only when its config.json records the same resolved configuration, "
            "gradprobe/torch/transformers versions, task data files (task_data), plug-in reward code (reward_plugin) "
            "and initial weights (model_weights: what the model's tier, folder or .gguf file holds now, with its "
            "config.json and tokenizer files; a rebuilt tier differs), compared by content; a run that did not record one that applies is not reused.") in text


@pytest.mark.parametrize("argv", [["train", "--plan", "p.toml", "--arm", "grpo", "--updates"],
                                  ["probe", "--prompts"], ["study", "p.toml", "--workers"], ["warmstart", "--seed"]])
def test_an_integer_flag_echoes_a_pasted_5000_digit_value_shortened(argv, capsys):
    """A breaker: ``--updates`` with 5,000 digits printed argparse's ``invalid int value`` with all 5,000 of them (a
    typed flag of every command goes through gradprobe.cli.args.integer, seed_int or _int_at_least now)."""
    with pytest.raises(SystemExit) as e:
        main([*argv, "9" * 5000])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(f"expected an integer, got '{'9' * 40}'... (5,000 characters) (5,000 digits: more than "
                        "Python reads as a number)")
    assert len(err) < 250


def test_the_integer_type_reads_what_int_reads_and_shortens_what_it_refuses():
    from gradprobe.cli.args import integer, seed_int

    assert [integer(t) for t in ("12", "-3", "1_000", " 7 ")] == [12, -3, 1000, 7]
    with pytest.raises(argparse.ArgumentTypeError) as e:
        integer("x" * 100)
    assert str(e.value) == f"expected an integer, got '{'x' * 40}'... (100 characters)"
    with pytest.raises(argparse.ArgumentTypeError) as e:
        seed_int("1" * 100)
    assert str(e.value) == f"must be in [0, 2**63 - 1] (it seeds numpy and torch), got {'1' * 40}... (100 characters)"
