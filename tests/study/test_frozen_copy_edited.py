"""A study's own frozen plan (``DIR/plan.toml``) edited and given as the plan (``gradprobe study DIR/plan.toml --out
DIR``): refused naming the file, both sha256s and a fix that works (copy it out first); with ``--restart`` the edited
file was deleted as a study output before being frozen (a FileNotFoundError traceback, the edit lost)."""

from __future__ import annotations

import hashlib

from study_helpers import stopped_before_any_run, toy_plan, write_plan

from gradprobe.cli import main


def _edited_study(tmp_path):
    """A study stopped before any run, its frozen plan.toml edited (a second seed); returns (folder, edited text)."""
    out = tmp_path / "study"
    stopped_before_any_run(write_plan(tmp_path, toy_plan("edited", seeds=(0,))), out)
    text = (out / "plan.toml").read_text().replace("seeds = [0]", "seeds = [0, 1]")
    (out / "plan.toml").write_text(text)
    return out, text


def _study(out, *more) -> int:
    return main(["study", str(out / "plan.toml"), "--out", str(out), "--executor", "inline", "--no-probe",
                 "--no-analysis", *more])


def test_restart_with_the_edited_frozen_copy_keeps_it_and_says_to_copy_it_out(tmp_path, capsys):
    out, text = _edited_study(tmp_path)
    assert _study(out, "--restart") == 2
    err = capsys.readouterr().err
    assert "is the study's frozen plan, and it was edited after the study froze it" in err
    assert hashlib.sha256(text.encode()).hexdigest()[:12] in err and "--restart deletes the frozen plan" in err
    assert "CHANGED.toml --out" in err and "--restart` (no run of the frozen plan has finished)" in err
    assert (out / "plan.toml").read_text() == text  # the user's edit is kept; nothing ran
    assert not (out / "runs").exists()


def test_the_edited_frozen_copy_is_not_named_as_the_original_to_restore(tmp_path, capsys):
    out, text = _edited_study(tmp_path)
    assert _study(out) == 2
    err = capsys.readouterr().err
    assert "restore the original plan" not in err  # the old hint named the edited file itself as the original
    assert f"cp '{out / 'plan.toml'}' CHANGED.toml" in err and "nothing was run or deleted" in err
    assert (out / "plan.toml").read_text() == text
