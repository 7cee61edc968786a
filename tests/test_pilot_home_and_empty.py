"""A plan's ``[power] pilot = "~/x"`` is the home folder's x (as every other path of a plan, an option or the
API), and ``gradprobe study --pilot ""`` / ``--replicate ""`` (an unset shell variable) are refused by name
instead of meaning "not given" (the plan's [power] pilot; no replicate).

Each test points HOME at a temporary folder and works in another (both restored by monkeypatch).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gradprobe.cli import main
from gradprobe.study.power import resolve_pilot
from gradprobe.training.plan import parse_plan

from study_helpers import PLAN, make_study

HOME_PLAN = PLAN.replace("seeds = SEEDS", "seeds = [0, 1]") + '\n[power]\nmin_effect = 1.5\npilot = "~/pilot"\n'


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """HOME set to ``tmp_path/home`` (a finished pilot study at ``home/pilot``), the working folder
    ``tmp_path/cwd``."""
    folder, cwd = tmp_path / "home", tmp_path / "cwd"
    make_study(folder / "pilot")
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.chdir(cwd)
    return folder


def _plan_file(tmp_path: Path) -> Path:
    (tmp_path / "plans").mkdir()
    path = tmp_path / "plans" / "plan.toml"
    path.write_text(HOME_PLAN)
    return path


def test_plan_pilot_tilde_is_the_home_folder(home, tmp_path):
    path = _plan_file(tmp_path)
    assert resolve_pilot(parse_plan(HOME_PLAN, path=str(path))) == home / "pilot"


def test_study_power_reads_the_plans_home_pilot(home, tmp_path, capsys):
    path = _plan_file(tmp_path)
    assert main(["study", "--power", str(path)]) == 0
    assert "needed:" in capsys.readouterr().out
    assert sorted(p.name for p in Path.cwd().iterdir()) == []


def test_study_empty_pilot_is_refused_by_name(home, tmp_path, capsys):
    path = _plan_file(tmp_path)  # its [power] pilot is a finished study: "" must not fall back to it
    with pytest.raises(SystemExit) as e:  # argparse's refusal of an option's value: exit status 2
        main(["study", "--power", str(path), "--pilot", ""])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        "gradprobe study: error: argument --pilot: is empty (''): give a finished study folder as the pilot, or "
        "leave --pilot out for the plan's [power] pilot (an unset shell variable gives an empty value)")


def test_study_empty_replicate_is_refused_by_name(home, tmp_path, capsys):
    new = tmp_path / "new"
    with pytest.raises(SystemExit) as e:
        main(["study", "--replicate", "", "--out", str(new)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        "gradprobe study: error: argument --replicate: is empty (''): give the finished study folder to replicate "
        "(an unset shell variable gives an empty value)")
    assert not new.exists()
    with pytest.raises(SystemExit):
        main(["study", "--replicate= ", "--out", str(new)])
    assert "argument --replicate: is empty (' ')" in capsys.readouterr().err


def test_study_empty_reuse_runs_is_refused_by_name(home, tmp_path, capsys):
    plan, out = _plan_file(tmp_path), tmp_path / "s"
    with pytest.raises(SystemExit) as e:  # "" meant "reuse nothing", silently
        main(["study", str(plan), "--out", str(out), "--reuse-runs", ""])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "gradprobe study: error: argument --reuse-runs: is empty (''): give a finished study folder whose runs this "
        "plan may reuse (an unset shell variable gives an empty value)")
    assert not out.exists()


def test_study_pilot_and_replicate_options_still_expand_tilde(home):
    from gradprobe.cli.args import CommandParser
    from gradprobe.cli.study import add_study_parser

    parser = argparse.ArgumentParser(prog="gradprobe")
    add_study_parser(parser.add_subparsers(dest="command", required=True, parser_class=CommandParser))
    args = parser.parse_args(["study", "--replicate=~/src", "--pilot=~/pilot", "--out=~/new"])
    assert (args.replicate, args.pilot) == (str(home / "src"), str(home / "pilot"))
