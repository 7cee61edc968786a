"""A leading ``~`` in a path given to the public Python API is the home folder, as in a shell, pandas' ``to_csv`` and
gradprobe's model specs: ``ProbeResult.write("~/x")`` made a folder literally named ``~`` in the current folder and
``load_probe("~/x")`` refused with a hint to call ``os.path.expanduser``; ``load_plan``, ``Study``, ``load_study``,
``train``, ``rank_prompts``, ``probe(out=, reference_curve=)`` and ``load_task``'s data paths did not expand either,
nor did ``--out=~/x`` (which bash leaves as it is) on the command line.

Each test points HOME at a temporary folder and works in another, so a ``~`` folder made in the working folder (the
old behaviour) is seen and never lands in the real home.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

import gradprobe
from gradprobe.api.probe import ProbeFileError
from home_helpers import home, nothing_in_cwd  # noqa: F401 (home: a fixture)
from study_helpers import shipped_copy, toy_plan, write_plan

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_PROBE = ROOT / "data" / "study_tiny_heldout4k" / "probe"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_write_into_tilde_writes_under_home(home):
    result = gradprobe.load_probe(SHIPPED_PROBE)
    out = result.write("~/x")
    assert out == home / "x"
    assert (home / "x" / "probe.json").read_bytes() == (SHIPPED_PROBE / "probe.json").read_bytes()
    nothing_in_cwd()
    again = gradprobe.load_probe("~/x")  # and read back from there
    assert again.folder == home / "x"
    assert again.raw == json.loads((SHIPPED_PROBE / "probe.json").read_text())


def test_load_probe_reads_tilde_path_and_names_the_expanded_path_when_missing(home):
    shutil.copytree(SHIPPED_PROBE, home / "p")
    result = gradprobe.load_probe("~/p/probe.json")
    assert result.folder == home / "p"
    assert [r["name"] for r in result.raw["rewards"]] == [r["name"] for r in json.loads(
        (SHIPPED_PROBE / "probe.json").read_text())["rewards"]]
    with pytest.raises(ProbeFileError) as info:
        gradprobe.load_probe("~/missing")
    msg = str(info.value)
    assert msg.startswith(f"{home / 'missing'} not found; pass a `gradprobe probe --out` folder"), msg
    assert "expanduser" not in msg and "not your home folder" not in msg, msg


def test_a_tilde_name_no_user_has_is_a_folder_of_that_name(home):
    # as a shell and os.path.expanduser leave it: an existing folder named like `~exp` keeps working
    shutil.copytree(SHIPPED_PROBE, Path.cwd() / "~no_such_user_gp9")
    result = gradprobe.load_probe("~no_such_user_gp9")
    assert result.folder.resolve() == (Path.cwd() / "~no_such_user_gp9").resolve()
    out = result.write("~no_such_user_gp9_copy")
    assert out == Path("~no_such_user_gp9_copy") and (Path.cwd() / "~no_such_user_gp9_copy" / "probe.json").is_file()
    with pytest.raises(ProbeFileError) as e:
        gradprobe.load_probe("~no_such_user_gp9_missing")
    assert str(e.value).startswith("~no_such_user_gp9_missing not found; ")


def test_load_plan_expands_tilde(home):
    plan_file = write_plan(home, toy_plan("toyhome"))
    plan = gradprobe.load_plan("~/plan.toml")
    assert plan.path == str(plan_file) and plan.name == "toyhome" and list(plan.seeds) == [0, 1, 2]
    (Path.cwd() / "~no_such_user_gp9").mkdir()  # a ~name no user has is a name, as a shell leaves it
    literal = write_plan(Path.cwd() / "~no_such_user_gp9", toy_plan("toyliteral"))
    assert gradprobe.load_plan("~no_such_user_gp9/plan.toml").path == str(Path("~no_such_user_gp9") / "plan.toml")
    assert literal.is_file()


def test_study_takes_tilde_plan_and_out(home):
    plan_file = write_plan(home, toy_plan("toyhome"))
    study = gradprobe.Study("~/plan.toml", "~/out")
    assert (study.plan_path, study.out) == (plan_file, home / "out")
    assert repr(study) == f"Study(plan={str(plan_file)!r}, out={str(home / 'out')!r})"
    nothing_in_cwd()


def test_load_study_expands_tilde(home):
    shipped_copy("study_tiny_heldout4k", home / "s")
    loaded = gradprobe.load_study("~/s")
    assert loaded.folder == home / "s"
    expected = (home / "s" / "runs.csv").read_text().splitlines()
    assert len(loaded.runs) == len(expected) - 1  # the header
    nothing_in_cwd()


@pytest.mark.filterwarnings("ignore:updates .* no group trained:RuntimeWarning")  # the random tiny model
def test_train_expands_tilde_in_plan_and_out(home):
    write_plan(home, toy_plan("toyhome", seeds=(0,), generated_tokens=300, every_tokens=150, checkpoint_every=None))
    result = gradprobe.train("~/plan.toml", "~/run", arm="grpo", seed=0)
    assert result.folder == home / "run"
    metrics = _rows(home / "run" / "metrics.jsonl")
    assert len(result.metrics) == len(metrics) >= 1
    assert json.loads((home / "run" / "config.json").read_text())["run"]["arm"] == "grpo"
    nothing_in_cwd()


@pytest.mark.parametrize("call", ["probe", "rank_prompts"])
def test_out_refusals_name_the_expanded_folder(home, call):
    from gradprobe.outputs import OutputDirError

    (home / "f").write_text("mine")  # a file where the folder would go: refused before any model loads
    with pytest.raises(OutputDirError) as info:
        if call == "probe":
            gradprobe.probe("tiny", out="~/f")
        else:
            gradprobe.rank_prompts("tiny", "chain_sum", 4, out="~/f")
    assert str(home / "f") in str(info.value), str(info.value)
    assert (home / "f").read_text() == "mine"
    nothing_in_cwd()


def test_probe_reference_curve_tilde_is_read_and_recorded_expanded(home):
    from gradprobe.api.probe import _reference_curve
    from gradprobe.forecast import load_reference_curve

    shipped = load_reference_curve("default")
    shipped.save(home / "curve.json")
    curve, spec = _reference_curve("~/curve.json")
    assert spec == str(home / "curve.json")
    assert curve.points["accuracy"].tolist() == shipped.points["accuracy"].tolist()
    assert curve.points["update"].tolist() == shipped.points["update"].tolist()


def test_load_task_jsonl_and_gsm8k_paths_expand_tilde(home):
    from gradprobe.tasks import task_data_files

    rows = [{"question": f"What is {i} + 1?", "answer": f"#### {i + 1}"} for i in range(10)]
    (home / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = gradprobe.load_task("jsonl:~/d.jsonl")
    assert task.source == home / "d.jsonl"
    golds = sorted(p.answer for p in task.split_rows("train") + task.split_rows("heldout"))
    assert golds == sorted(str(i + 1) for i in range(10))
    gsm = gradprobe.load_task("gsm8k:~/d.jsonl")
    assert gsm.path == home / "d.jsonl"
    assert len(gsm.split_rows("train")) + len(gsm.split_rows("heldout")) == 10
    assert task_data_files("jsonl:~/d.jsonl") == {"jsonl:~/d.jsonl": (home / "d.jsonl").resolve()}
    nothing_in_cwd()


def test_cli_out_equals_tilde_is_expanded(home):
    """bash leaves ``--out=~/x`` as it is: the options' types expand it, as the shell does for ``--out ~/x``."""
    from gradprobe.cli.args import CommandParser
    from gradprobe.cli.probe import _add_probe
    from gradprobe.cli.train import add_train_parser

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", parser_class=CommandParser)
    _add_probe(sub)
    add_train_parser(sub)
    args = parser.parse_args(["probe", "--out=~/x", "--reference-curve=~/c.json", "--calibration=~/cal.json",
                              "--trl-config=~/trl.yaml"])
    assert (args.out, args.reference_curve, args.calibration, args.trl_config) == (
        str(home / "x"), str(home / "c.json"), str(home / "cal.json"), str(home / "trl.yaml"))
    args = parser.parse_args(["train", "--plan=~/p.toml", "--arm=grpo", "--out=~/run"])
    assert args.out == str(home / "run")
    assert parser.parse_args(["probe", "--calibration=default"]).calibration == "default"


def test_freeze_copies_and_records_the_home_plan_it_checked_not_a_folder_named_tilde(home):
    from gradprobe.layout import PLAN_COPY, STUDY_JSON
    from gradprobe.study.freeze import freeze_plan

    plan_file = write_plan(home, toy_plan("toyhome"))
    (Path.cwd() / "~").mkdir()  # a decoy: a folder literally named ~ holding another plan
    write_plan(Path.cwd() / "~", toy_plan("decoy"))
    plan, study = freeze_plan("~/plan.toml", Path.cwd() / "s")
    assert plan.name == "toyhome"
    frozen = (Path.cwd() / "s" / PLAN_COPY).read_bytes()
    assert frozen == plan_file.read_bytes()  # was the decoy's bytes beside the home plan's sha256
    recorded = json.loads((Path.cwd() / "s" / STUDY_JSON).read_text())
    assert recorded["plan_sha256"] == plan.sha256 and recorded["plan_path"] == str(plan_file)
