"""Every path-valued option of every command expands a leading ``~`` to the home folder itself: bash expands it in
``--opt ~/x`` but leaves ``--opt=~/x`` as it is, and a caller that passes a list of words (``subprocess.run([...])``,
``gradprobe.cli.main([...])``) leaves the ``~`` of a positional path too. ``gradprobe study --replicate=~/src``,
``--pilot=~/p``, ``--reuse-runs=~/r``, the positional ``PLAN`` and ``train --plan``, ``probe --checkpoints=~/a,~/b``
and ``probe --reference=direction:~/v.safetensors`` read a folder literally named ``~`` in the working folder (and
refused naming ``'~/src'``); the options expanded already (their argparse type, or the code that reads them) are
listed too, so that they stay expanded.

Each test points HOME at a temporary folder and works in another (both restored after).
"""

from __future__ import annotations

import argparse

import pytest

from home_helpers import home, nothing_in_cwd  # noqa: F401 (home: a fixture)
from study_helpers import shipped_copy, toy_plan, write_plan


def _parser() -> argparse.ArgumentParser:
    """The ``gradprobe`` parser with every command, built as :func:`gradprobe.cli.main` builds it."""
    from gradprobe.cli.args import CommandParser
    from gradprobe.cli.difficulty import add_difficulty_parsers
    from gradprobe.cli.probe import _add_probe
    from gradprobe.cli.study import add_study_parser
    from gradprobe.cli.train import add_train_parser
    from gradprobe.cli.warmstart import add_warmstart_parser

    parser = argparse.ArgumentParser(prog="gradprobe")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    for add in (_add_probe, add_train_parser, add_warmstart_parser, add_study_parser, add_difficulty_parsers):
        add(sub)
    return parser


#: (argv, parsed attribute, the value under HOME: a path relative to it, or a list of them) of the options that read
#: ~ as a folder named ~ before: each must expand it when the command line is parsed
EXPANDED_NOW = [
    (["study", "~/plan.toml", "--out=~/s"], "plan", "plan.toml"),
    (["study", "--analyze-only", "~/plan.toml", "--out=~/s"], "plan", "plan.toml"),
    (["study", "--replicate=~/src", "--out=~/new"], "replicate", "src"),
    (["study", "--power", "~/plan.toml", "--pilot=~/pilot"], "pilot", "pilot"),
    (["study", "p.toml", "--out=~/s", "--reuse-runs=~/a", "--reuse-runs=~/b"], "reuse_runs", ["a", "b"]),
    (["train", "--plan=~/p.toml", "--arm=grpo", "--out=~/run"], "plan", "p.toml"),
]


@pytest.mark.parametrize("argv,attr,under_home", EXPANDED_NOW, ids=[f"{a[0]}-{f}-{i}" for i, (a, f, _) in
                                                                     enumerate(EXPANDED_NOW)])
def test_path_options_expand_tilde_when_parsed(home, argv, attr, under_home):
    args = _parser().parse_args(argv)
    want = [str(home / p) for p in under_home] if isinstance(under_home, list) else str(home / under_home)
    assert getattr(args, attr) == want


def test_probe_checkpoints_expands_each_path(home):
    args = _parser().parse_args(["probe", "--checkpoints=~/a, ~/b/w.safetensors,runs/g0"])
    assert args.checkpoints == f"{home / 'a'},{home / 'b' / 'w.safetensors'},runs/g0"
    assert _parser().parse_args(["probe"]).checkpoints is None


def test_probe_reference_direction_expands_tilde(home):
    from gradprobe.cli.probe import _config_from_args
    from gradprobe.probe_settings import ProbeConfig

    expected = {"direction:~/v.safetensors": f"direction:{home / 'v.safetensors'}",
                "direction:runs/v.safetensors": "direction:runs/v.safetensors", "heldout": "heldout"}
    for reference, want in expected.items():
        config = _config_from_args(_parser().parse_args(["probe", f"--reference={reference}"]))
        assert (config.reference.kind, config.reference.variant.name) == (want, reference.split(":")[0])
        # the Python API and a plan's [probe] table build the same settings
        assert ProbeConfig.from_dict({"reference": reference}).reference.kind == want


# ----------------------------------------------------------------------------- end to end: the refusals name the path

def _run(argv, capsys) -> tuple[int, str]:
    from gradprobe.cli import main

    rc = main(argv)
    return rc, capsys.readouterr().err


def test_study_replicate_tilde_refusal_names_the_home_folder(home, capsys):
    rc, err = _run(["study", "--replicate=~/src", "--out=~/new"], capsys)
    assert rc == 2
    assert err == (f"gradprobe study: error: --replicate: {str(home / 'src')!r} is not a folder; give the folder of a "
                   "study that `gradprobe study PLAN --out DIR` ran to the end\n")
    assert not (home / "new").exists()
    nothing_in_cwd()


def test_study_pilot_tilde_refusal_names_the_home_folder(home, capsys):
    write_plan(home, toy_plan("toyhome") + "[power]\nmin_effect = 1.5\n")
    rc, err = _run(["study", "--power", "~/plan.toml", "--pilot=~/pilot"], capsys)
    assert rc == 2
    assert err.startswith(f"gradprobe study: error: --pilot: {str(home / 'pilot')!r} is not a folder; "), err
    nothing_in_cwd()


def test_study_reuse_runs_tilde_refusal_names_the_home_folder(home, capsys):
    write_plan(home, toy_plan("toyhome"))
    rc, err = _run(["study", "~/plan.toml", "--out=~/s", "--reuse-runs=~/other"], capsys)
    assert rc == 2
    other = home / "other"
    assert err == (f"gradprobe study: error: --reuse-runs {other}: no runs/ folder there (the folder does not exist); "
                   f"reuse needs the folder a study ran in (its runs/): give such a folder, or drop --reuse-runs "
                   f"{other}\n")
    assert not (home / "s").exists()
    nothing_in_cwd()


def test_study_positional_plan_given_as_a_word_reads_the_home_file(home, capsys):
    """A caller passing words (no shell) gives PLAN as ``~/plan.toml``: the file under HOME is read (and found to be
    another plan than the study's), not refused as unreadable."""
    import hashlib

    shipped_copy("study_tiny_heldout4k", home / "s")
    plan = write_plan(home, toy_plan("toyhome"))
    rc, err = _run(["study", "~/plan.toml", "--analyze-only", "--out=~/s"], capsys)
    assert rc == 2
    given = hashlib.sha256(plan.read_bytes()).hexdigest()[:12]
    assert err.startswith(f"gradprobe study: error: PLAN {plan} (sha256 {given}) is not the plan of the study "
                          f"{home / 's'} (sha256 "), err
    assert not (home / "s" / "reanalysis").exists()
    nothing_in_cwd()


def test_probe_checkpoints_tilde_refusal_names_the_home_path(home, capsys):
    rc, err = _run(["probe", "--model=tiny-qwen2", "--checkpoints=~/missing", "--out=~/p"], capsys)
    assert rc == 2
    assert err == (f"gradprobe probe: error: --checkpoints: {home / 'missing'} does not exist; give a run folder, a "
                   "checkpoint-UUUUUU folder or a .safetensors weight file\n")
    assert not (home / "p").exists()
    nothing_in_cwd()


def test_probe_reference_direction_tilde_refusal_names_the_home_file(home, capsys):
    rc, err = _run(["probe", "--model=tiny-qwen2", "--reference=direction:~/v.safetensors", "--out=~/p",
                    "--prompts=2", "--group=2", "--no-progress"], capsys)
    assert rc == 2
    assert err == f"gradprobe probe: error: direction file {str(home / 'v.safetensors')!r} does not exist\n"
    assert not (home / "p").exists()
    nothing_in_cwd()


# ----------------------------------------------------------------------------- expanded already: kept so

def test_out_and_input_options_already_typed_stay_expanded(home):
    """``--out`` of warmstart, rank-prompts and difficulty-eval and calib's path arguments were expanded by their
    argparse types before (``probe``'s and ``train``'s: tests/test_home_paths.py); kept expanded."""
    from calib.cli import build_parser

    parser = _parser()
    assert parser.parse_args(["warmstart", "--out=~/w"]).out == str(home / "w")
    for command in ("rank-prompts", "difficulty-eval"):
        args = parser.parse_args([command, "--model=tiny", "--task=chain_sum", "--pool=8", "--out=~/d"])
        assert args.out == str(home / "d")
    calib = build_parser()
    args = calib.parse_args(["rows", "~/s1", "~/s2", "--out=~/rows.csv"])
    assert (args.studies, args.out) == ([str(home / "s1"), str(home / "s2")], str(home / "rows.csv"))
    args = calib.parse_args(["fit", "~/rows.csv", "--out=~/cal.json"])
    assert (args.rows, args.out) == ([str(home / "rows.csv")], str(home / "cal.json"))
    args = calib.parse_args(["report", "~/s1", "--out=~/rep", "--validation-out=~/v.json"])
    assert (args.studies, args.out, args.validation_out) == ([str(home / "s1")], str(home / "rep"),
                                                             str(home / "v.json"))
    args = calib.parse_args(["apply", "~/p", "--calibration=~/cal.json", "--out=~/c.json"])
    assert (args.probe, args.calibration, args.out) == (str(home / "p"), str(home / "cal.json"), str(home / "c.json"))


def test_model_and_reward_file_specs_expand_where_read(home):
    """``--model=~/m.gguf`` (or a folder) and a ``--rewards=~/file.py:FUNCTION`` plug-in are expanded by the code that
    reads them (:func:`gradprobe.models.pretrained_source`, :mod:`gradprobe.rewards.plugin`), not by the parser."""
    from gradprobe.models import pretrained_source
    from gradprobe.rewards import get_reward
    from gradprobe.rewards.base import UnknownRewardError

    (home / "m.gguf").write_bytes(b"")
    assert pretrained_source("~/m.gguf") == (str(home), {"gguf_file": "m.gguf"})
    (home / "gp_folder.py").mkdir()  # a folder where the file would be: refused as a folder only once found
    with pytest.raises(UnknownRewardError, match=r"~/gp_folder\.py is a folder, not a Python file"):
        get_reward("~/gp_folder.py:f")
    nothing_in_cwd()
