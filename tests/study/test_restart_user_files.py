"""``gradprobe study --restart`` deleted a user's own files inside the study outputs it deletes whole, without naming
them (a trial user's ``runs/grpo/seed0/notes.txt`` and ``runs/grpo/seed0/my_eval/res.csv``): it now refuses, naming
them and the fix, and deletes nothing (:func:`gradprobe.study.freeze._restart_study`,
:func:`gradprobe.study.folder.not_written_by_study`); a study's own files are still deleted.
"""

import json
from pathlib import Path

import pytest

from gradprobe.layout import run_dir
from gradprobe.study.folder import CHECKPOINT_FILES, StudyError, not_written_by_study
from gradprobe.study.freeze import freeze_plan

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "data" / "study_tiny" / "plan.toml"  # arms grpo, mc_value, ...; seeds 0-3
TINY_LR = ROOT / "data" / "study_tiny_lr" / "plan.toml"


def _tree(d: Path) -> dict:
    return {str(p.relative_to(d)): (p.read_bytes() if p.is_file() else None) for p in sorted(d.rglob("*"))}


def _partial_run(out: Path, arm: str = "grpo", seed: int = 0) -> Path:
    """A run folder of the frozen plan as an interrupted study leaves it (every kind of file gradprobe writes)."""
    d = run_dir(out, arm, seed)
    (d / "checkpoint-000007").mkdir(parents=True)
    for name in CHECKPOINT_FILES:
        (d / "checkpoint-000007" / name).write_bytes(b"w")
    (d / "weights").mkdir()
    (d / "weights" / "update-000004.safetensors").write_bytes(b"w")
    for name in (".lock", "train.log", ".invocation.json", "checkpoint.json", "eval_items.jsonl", "summary.json.tmp"):
        (d / name).write_text("")
    (d / "config.json").write_text(json.dumps({"run": {}}))
    (d / "metrics.jsonl").write_text('{"update": 1}\n')
    return d


def test_restart_refuses_a_users_files_in_a_run_folder_and_deletes_nothing(tmp_path, capsys):
    out = tmp_path / "s6"
    freeze_plan(TINY, out)
    d = _partial_run(out)
    (d / "notes.txt").write_text("my notes")
    (d / "my_eval").mkdir()
    (d / "my_eval" / "res.csv").write_text("a,b\n1,2\n")
    before = _tree(out)
    capsys.readouterr()
    with pytest.raises(StudyError) as info:
        freeze_plan(TINY_LR, out, restart=True)
    msg = str(info.value)
    assert msg.startswith(f"--restart refused: {out} holds 2 file(s) that gradprobe does not write there: "
                          "runs/grpo/seed0/my_eval/res.csv, runs/grpo/seed0/notes.txt; "), msg
    assert f"move them out of {out} and rerun with --restart" in msg and msg.endswith("nothing was deleted"), msg
    assert _tree(out) == before  # the user's files, the frozen plan and the partial run all kept
    assert "deleting" not in capsys.readouterr().err


def test_restart_names_six_then_a_count_in_probe_figures_and_reanalysis(tmp_path):
    out = tmp_path / "S"
    freeze_plan(TINY, out)
    _partial_run(out)
    mine = ["figures/mine.png", "probe/guided/ppo/notes.md", "probe/batch_0/extra.csv", "probe/scratch.txt",
            "reanalysis/figures/my_plot.png", "reanalysis/my.txt", "runs/grpo/seed0/checkpoint-000007/my.bin",
            "runs/grpo/seed0/weights/best.pt"]
    ours = ["figures/accuracy_vs_updates.png", "figures/lr_sweep.png", "probe/arms.json", "probe/probe.json",
            "probe/calibrated.json", "probe/batch_0/tokens.jsonl", "probe/guided/ppo/probe.json",
            "reanalysis/analysis.json", "reanalysis/report.txt", "reanalysis/figures/accuracy_vs_flops.png"]
    for rel in mine + ours:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text("x")
    found = [str(p.relative_to(out)) for p in not_written_by_study(out, [run_dir(out, "grpo", 0)])]
    assert found == sorted(mine)
    with pytest.raises(StudyError) as info:
        freeze_plan(TINY_LR, out, restart=True)
    msg = str(info.value)
    assert f"holds 8 file(s) that gradprobe does not write there: {', '.join(sorted(mine)[:6])} and 2 more; " in msg
    assert all((out / rel).read_text() == "x" for rel in mine + ours)


def test_restart_still_deletes_a_studys_own_run_folders_probe_and_figures(tmp_path, capsys):
    out = tmp_path / "S"
    freeze_plan(TINY, out)
    _partial_run(out)
    _partial_run(out, "mc_value", 3)
    for rel in ("probe/arms.json", "probe/.lock", "probe/tokens.jsonl.tmp", "figures/accuracy_vs_flops.png"):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text("x")
    (out / "reanalysis").mkdir()  # empty folders are no one's loss
    (out / "runs" / "grpo" / "seed0" / "empty").mkdir()
    (out / "notes.txt").write_text("mine")  # beside the study outputs: never touched
    capsys.readouterr()
    plan, study = freeze_plan(TINY_LR, out, restart=True)
    err = capsys.readouterr().err
    assert "(plan.toml, study.json, figures/, reanalysis/, probe/, runs/; 2 run folder(s) in runs/)" in err, err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "plan.toml", "study.json"]
    assert study["plan_sha256"] == plan.sha256 and (out / "notes.txt").read_text() == "mine"


def test_a_real_checkpoint_holds_only_the_names_restart_takes_for_gradprobes(tmp_path):
    torch = pytest.importorskip("torch")
    from gradprobe.training.checkpoint import save_checkpoint, save_weights

    out = tmp_path / "S"
    freeze_plan(TINY, out)
    d = run_dir(out, "grpo", 0)
    d.mkdir(parents=True)
    model = torch.nn.Linear(2, 2)
    save_checkpoint(d, 3, model, {"update": 3})
    save_weights(d, 3, model)
    assert {p.name for p in (d / "checkpoint-000003").iterdir()} == set(CHECKPOINT_FILES)
    assert not_written_by_study(out, [d]) == []


def test_the_cli_writes_reanalysis_where_restart_looks():
    from gradprobe.cli.study import REANALYSIS
    from gradprobe.study.folder import REANALYSIS as STUDY_REANALYSIS, STUDY_OUTPUTS

    assert REANALYSIS == STUDY_REANALYSIS and REANALYSIS in STUDY_OUTPUTS


def test_a_reused_run_and_an_earlier_probe_left_aside_are_gradprobes(tmp_path):
    """A reviewer: ``reused_from.json`` (``--reuse-runs``) and a killed probe's ``.earlier-probe/`` (its files, a
    batch folder and the manifest) were named as the user's files, so --restart would refuse with a false reason."""
    from gradprobe.study.reuse import REUSED_JSON

    d = _partial_run(tmp_path)
    (d / REUSED_JSON).write_text("{}")
    aside = tmp_path / "probe" / ".earlier-probe"
    (aside / "batch_0").mkdir(parents=True)
    for name in ("probe.json", "manifest.json", "batch_0/probe.json"):
        (aside / name).write_text("{}")
    assert not_written_by_study(tmp_path, [d]) == []
    (aside / "notes.txt").write_text("mine")
    assert not_written_by_study(tmp_path, [d]) == [aside / "notes.txt"]


def test_a_file_managers_own_files_are_not_the_users(tmp_path):
    """Opening a run folder in macOS Finder or Windows Explorer writes ``.DS_Store`` / ``Thumbs.db`` / ``desktop.ini``
    there (in ``runs/`` and ``runs/<arm>/`` too, on the way): ``--restart`` refused the study for them as the user's
    files. A real file of the user's beside them, or a link under such a name, is still named. (A reviewer: a first
    version took them in ``runs/`` and ``runs/<arm>/`` for the user's, and left them in the way of deleting those
    folders after the run folders were gone.)"""
    out = tmp_path / "S"
    freeze_plan(TINY, out)
    d = _partial_run(out)
    for rel in ("runs/grpo/seed0/.DS_Store", "runs/grpo/seed0/weights/Thumbs.db", "runs/grpo/seed0/Desktop.ini",
                "figures/.DS_Store", "probe/batch_0/.DS_Store", "probe/._.DS_Store", "runs/.DS_Store",
                "runs/grpo/.DS_Store", "runs/grpo/thumbs.db"):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(b"\x00\x00\x00\x01Bud1")
    assert not_written_by_study(out, [d]) == []
    (d / "notes.txt").write_text("mine")
    (out / "figures" / "desktop.ini").symlink_to(d / "notes.txt")
    assert not_written_by_study(out, [d]) == [out / "figures" / "desktop.ini", d / "notes.txt"]
    (d / "notes.txt").unlink()
    (out / "figures" / "desktop.ini").unlink()
    freeze_plan(TINY_LR, out, restart=True)
    assert sorted(p.name for p in out.iterdir()) == ["plan.toml", "study.json"]
