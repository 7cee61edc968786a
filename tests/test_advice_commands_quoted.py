"""The commands that gradprobe's study, probe and run-folder messages advise to run (``gradprobe study PLAN --out
DIR``, ``gradprobe probe --out DIR``, ``ln -sfn TARGET LINK``) quote their paths for a shell
(:func:`gradprobe.outputs.shell_word`): they pasted the path raw, so a study folder named ``my study`` gave
``gradprobe study my study/plan.toml --out my study``, four words where two paths were meant. Each command below is
split as bash splits it (:func:`helpers_shell.shell_split`: a path holding a tab or a newline is written in bash's
``$'...'`` quoting, on one line) and gives back exactly the paths; a plain path is quoted too."""

from __future__ import annotations

import pytest

from calib.noise_floor import _never_trained_fix
from gradprobe.forecast.analysis_reads import rebuild_analysis
from gradprobe.forecast.study_items import restore_runs_csv_fix
from gradprobe.layout import rerun_advice
from gradprobe.study.folder import study_json_fix
from gradprobe.training.run_folder import _relinked_fix
from helpers_shell import shell_split

#: folder names a command must quote: a space, a tab, a quote, a shell variable, a newline
ODD = ["my study", "tab\there", "it's", "cost $HOME", "new\nline"]


def _command(message: str, opening: str) -> list[str]:
    """The words of the first command in backticks of ``message`` that begins with ``opening``, split as a shell
    splits them (bash), each command on one line."""
    start = message.index(f"`{opening}") + 1
    command = message[start:message.index("`", start)]
    assert "\n" not in command
    return shell_split(command)


def _study(tmp_path, name: str):
    study = tmp_path / name
    (study / "runs").mkdir(parents=True)  # a study that keeps its run folders: the fix resumes it
    return study


@pytest.mark.parametrize("name", ODD)
def test_the_rebuild_of_runs_csv_names_the_study_as_two_shell_words(tmp_path, name):
    study = _study(tmp_path, name)
    assert _command(restore_runs_csv_fix(study), "gradprobe study") == [
        "gradprobe", "study", str(study / "plan.toml"), "--out", str(study)]
    assert _command(study_json_fix(study), "gradprobe study") == [
        "gradprobe", "study", str(study / "plan.toml"), "--out", str(study)]


@pytest.mark.parametrize("name", ODD)
def test_the_re_analysis_command_names_the_study_as_shell_words(tmp_path, name):
    study = _study(tmp_path, name)
    words = ["gradprobe", "study", str(study / "plan.toml"), "--analyze-only", "--overwrite-analysis", "--out",
             str(study)]
    assert _command(rebuild_analysis(study), "gradprobe study") == words
    assert _command(rebuild_analysis(str(study)), "gradprobe study") == words
    assert _command(_never_trained_fix(study), "gradprobe study") == words  # calib's own wording of the same


def test_the_re_analysis_fix_is_one_plain_function_for_gradprobe_and_calib():
    import calib.integrity
    import gradprobe.forecast.study

    fix = rebuild_analysis("my study")
    assert type(fix) is str
    assert fix == ("re-analyse the study with `gradprobe study 'my study/plan.toml' --analyze-only "
                   "--overwrite-analysis "
                   "--out 'my study'` (it rebuilds analysis.json from runs.csv)")
    assert gradprobe.forecast.study.rebuild_analysis is rebuild_analysis is calib.integrity.rebuild_analysis


@pytest.mark.parametrize("name", ODD)
def test_a_probes_rerun_names_its_folder_as_one_shell_word(tmp_path, name):
    folder = tmp_path / name
    assert _command(rerun_advice(folder), "gradprobe probe") == ["gradprobe", "probe", "--out", str(folder)]


@pytest.mark.parametrize("name", ODD)
def test_a_relinked_weights_fix_names_both_paths_as_shell_words(tmp_path, name):
    folder, weights = tmp_path / name, tmp_path / f"weights {name}.safetensors"
    folder.mkdir()
    weights.write_bytes(b"w")
    then = {"links": {"model.safetensors": str(weights)}, "digest": "0" * 64}
    now = {"path": str(folder), "links": {"model.safetensors": str(tmp_path / "other")}}
    fix = _relinked_fix(then, now, ["model.safetensors"])
    assert fix.startswith("to resume it, point the link back: `ln -sfn ")
    assert _command(fix, "ln -sfn") == ["ln", "-sfn", str(weights), str(folder / "model.safetensors")]


def test_a_plain_path_is_quoted_too(tmp_path):
    study = _study(tmp_path, "s")
    assert f"`gradprobe study '{study}/plan.toml' --out '{study}'`" in restore_runs_csv_fix(study)
