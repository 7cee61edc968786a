"""No command deletes or overwrites a file it did not write, and none says it replaces before it does.

F6: ``gradprobe probe --out D`` where D held only the user's ``report.html`` (no ``probe.json``) took it for an
earlier probe's, moved it aside and deleted it ("replaced the earlier probe in D: its files (report.html) were
removed"). Only a folder holding ``probe.json`` holds an earlier probe now; files of a probe's names without it
are refused, named with the fix, and kept. The same rule for ``rank-prompts`` (``rank.json``), ``difficulty-eval``
(a ``metrics.json`` it wrote) and ``calib report`` (a ``metrics.json`` recording ``"command": "calib report"``).
F12: ``rank-prompts --decay 2`` (or an unknown model) into an earlier ranking printed "replacing the ranking in
D" and then failed: nothing was replaced. The line now comes just before the new files are written.
F13: ``calib report --out D`` accepted a folder holding only a killed probe's ``.earlier-probe/``, after which
``gradprobe probe --out D`` refused D as a report's folder and the earlier probe was stranded there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import gradprobe.probe.batches as probe_batches
from gradprobe.cli import main
from gradprobe.difficulty.folder import check_output_folder
from gradprobe.difficulty.rank import RankSettings, rank_prompts
from gradprobe.forecast import default_curve_path
from gradprobe.layout import output_kind
from gradprobe.outputs import OutputDirError
from gradprobe.probe.output import EARLIER, replacing_earlier_probe

_PROBE_FILES = "probe.json, tokens.jsonl, alignment.safetensors, report.html, calibrated.json"


def _folder(path: Path, files: dict) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    return path


def _tree(path: Path) -> dict:
    return {str(p.relative_to(path)): p.read_text() for p in sorted(path.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------------------- F6: gradprobe probe
@pytest.mark.parametrize("mine, shown, it", [
    ({"report.html": "mine"}, "report.html", "it is"),
    ({"tokens.jsonl": "my tokens", "calibrated.json": "{}"}, "calibrated.json, tokens.jsonl", "they are"),
    ({"report.html": "mine", "probe.json.tmp": "cut"}, "report.html", "it is"),  # a partial beside it: still refused
])
def test_files_named_as_a_probes_without_probe_json_are_refused_and_kept(tmp_path, mine, shown, it):
    out = _folder(tmp_path / "d", {**mine, "notes.txt": "kept"})
    with pytest.raises(OutputDirError) as info:
        with replacing_earlier_probe(out):
            pytest.fail("the probe ran in a folder of the user's files")
    them = "it" if it == "it is" else "them"
    assert str(info.value) == (
        f"--out {str(out)!r} holds {shown} but no probe.json, so {it} no earlier probe's (a probe writes "
        f"{_PROBE_FILES}): a probe there would overwrite {them}. Choose another --out, or move {shown} out of "
        f"{str(out)!r} (delete {them} if left by a probe that was killed before it wrote probe.json)")
    assert _tree(out) == {**mine, "notes.txt": "kept"} and not (out / EARLIER).exists()
    (out / "probe.json").write_text('{"old": true}')  # with probe.json the folder is an earlier probe: replaced
    with replacing_earlier_probe(out) as folder:
        assert folder.earlier == sorted([*mine, "probe.json"])
        (out / "probe.json").write_text("new")
    assert _tree(out) == {"probe.json": "new", "notes.txt": "kept"}


def test_gradprobe_probe_refuses_the_users_report_html_before_any_compute(tmp_path, capsys, monkeypatch):
    """The trial's command: the user's report.html was deleted with no copy."""
    out = _folder(tmp_path / "d", {"report.html": "mine"})
    monkeypatch.setattr(probe_batches, "run_probe_batches", lambda *a, **k: pytest.fail("the probe computed"))
    argv = ["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--rewards", "outcome", "--prompts", "2",
            "--group", "2", "--no-progress", "--reference-curve", str(default_curve_path()), "--out", str(out)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"gradprobe probe: error: --out {str(out)!r} holds report.html but no probe.json")
    assert "replaced" not in captured.out + captured.err
    assert _tree(out) == {"report.html": "mine"}


# ---------------------------------------------------------------------------- F6: rank-prompts, difficulty-eval
@pytest.mark.parametrize("command, files, shown, why", [
    ("rank-prompts", {"ranking.csv": "my table"}, "ranking.csv", "no rank.json"),
    ("difficulty-eval", {"metrics.json": '{"loss": 0.5}'}, "metrics.json",
     'metrics.json was not written by difficulty-eval (it holds no "command": "difficulty-eval")'),
    ("difficulty-eval", {"metrics.json": "not json"}, "metrics.json",
     'metrics.json was not written by difficulty-eval (it holds no "command": "difficulty-eval")'),
    ("difficulty-eval", {"reliability.png": "my figure"}, "reliability.png", "no metrics.json"),
    ("rank-prompts", {"rank.json": '{"my": "notes"}'}, "rank.json",
     'rank.json was not written by rank-prompts (it holds no "command": "rank-prompts")'),
])
def test_a_difficulty_commands_file_names_without_its_output_are_refused(tmp_path, command, files, shown, why):
    out = _folder(tmp_path / "d", files)
    noun = "a ranking" if command == "rank-prompts" else "an evaluation"
    with pytest.raises(OutputDirError) as info:
        check_output_folder(out, command)
    assert str(info.value) == (
        f"--out {str(out)!r} holds {shown} but {why}, so it is no earlier {noun.split()[1]}'s: {noun} there would "
        f"overwrite it. Choose another --out, or move {shown} out of {str(out)!r} (delete it if left by a "
        f"`gradprobe {command}` that was killed)")
    assert _tree(out) == files


def test_a_complete_earlier_evaluation_is_still_replaced(tmp_path):
    out = _folder(tmp_path / "e", {"metrics.json": '{"command": "difficulty-eval"}', "reliability.png": "png"})
    with pytest.raises(OutputDirError, match="not written by difficulty-eval"):  # the same names, another writer
        check_output_folder(_folder(tmp_path / "u", {"metrics.json": '{"command": "mine"}'}), "difficulty-eval")
    assert check_output_folder(out, "difficulty-eval").startswith(f"replacing the evaluation in {out} (written ")


# ---------------------------------------------------------------------------- F12: said only when it replaces
@pytest.mark.parametrize("settings", [RankSettings(decay=2.0), RankSettings()])
def test_rank_prompts_says_nothing_of_replacing_when_it_fails_before_writing(tmp_path, settings):
    """decay 2 (refused by the estimator's settings) and an unknown model both fail after the folder check."""
    earlier = {"ranking.csv": "rank,prompt_id\n1,p0\n", "rank.json": '{"command": "rank-prompts"}'}
    out = _folder(tmp_path / "r", earlier)
    said = []
    with pytest.raises((ValueError, OSError)):
        rank_prompts("no-such-model", "chain_sum", 4, out=out, settings=settings, say=said.append)
    assert said == [] and _tree(out) == earlier


@pytest.mark.parametrize("command, earlier", [
    ("rank-prompts", {"ranking.csv": "rank\n1\n", "rank.json": '{"command": "rank-prompts"}'}),
    ("difficulty-eval", {"reliability.png": "png", "metrics.json": '{"command": "difficulty-eval"}'}),
])
def test_a_refused_option_prints_no_replacing_line(tmp_path, capsys, command, earlier):
    out = _folder(tmp_path / "r", earlier)
    sizes = ["--samples", "4"] if command == "difficulty-eval" else ["--fit-prompts", "2", "--probe-samples", "1"]
    assert main([command, "--model", "tiny", "--task", "chain_sum", "--pool", "4", *sizes, "--decay", "2",
                 "--no-progress", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "decay (gamma, --decay) must lie in (0, 1], got 2.0" in captured.err
    assert _tree(out) == earlier


# ---------------------------------------------------------------------------- F13: a killed probe's leftover
def test_a_folder_holding_only_a_killed_probes_leftover_is_the_probes(tmp_path):
    from calib.files import prepare_report_folder
    from gradprobe.study.folder import refuse_other_output as refuse_study
    from gradprobe.training.run_folder import other_output as run_other

    leftover = {f"{EARLIER}/probe.json": '{"old": true}', f"{EARLIER}/report.html": "<p>old</p>"}
    out = _folder(tmp_path / "d", leftover)
    assert output_kind(out) == ("killed probe", ".earlier-probe/")
    with pytest.raises(OutputDirError) as info:
        prepare_report_folder(out)
    assert str(info.value) == (
        f"--out {str(out)!r} holds .earlier-probe/, the earlier probe a `gradprobe probe` that was killed left aside; "
        f"a report there would strand it (`gradprobe probe` refuses a report's folder). Recover it first: "
        f"`gradprobe probe --out {out}` puts it back before probing, or move the files of {out / EARLIER} back into "
        f"{out}; else choose another --out (a new or empty folder, or an earlier `calib report` folder)")
    what = ("the earlier probe a killed `gradprobe probe` left aside (`gradprobe probe --out` on this folder puts it "
            "back first; or move its files back by hand) (.earlier-probe/)")
    assert run_other(out) == what
    with pytest.raises(OutputDirError, match=r"holds the earlier probe a killed `gradprobe probe` left aside"):
        refuse_study(out)
    for command in ("rank-prompts", "difficulty-eval"):
        with pytest.raises(OutputDirError, match=r"holds the earlier probe a killed `gradprobe probe` left aside"):
            check_output_folder(out, command)
    assert _tree(out) == leftover
    said = []
    with replacing_earlier_probe(out, say=said.append) as folder:  # the probe still takes it and puts it back
        assert folder.earlier == ["probe.json", "report.html"]
    assert said[0].startswith(f"restored the earlier probe in {out} from {EARLIER}/")
    assert output_kind(_folder(tmp_path / "empty", {})) is None
    (tmp_path / "empty" / EARLIER).mkdir()  # an empty leftover holds nothing to strand
    assert output_kind(tmp_path / "empty") is None


# ---------------------------------------------------------------------------- F6: calib report
@pytest.mark.parametrize("mine, shown", [
    ({"report.html": "<p>mine</p>"}, "report.html"),
    ({"rows.csv": "a,b\n", "metrics.json": "{}"}, "rows.csv, metrics.json"),
])
def test_calib_report_refuses_files_of_its_names_without_an_earlier_report(tmp_path, mine, shown):
    from calib.files import prepare_report_folder

    out = _folder(tmp_path / "rep", {**mine, "notes.txt": "kept"})
    them = "it" if len(mine) == 1 else "them"
    with pytest.raises(OutputDirError) as info:
        prepare_report_folder(out)
    assert str(info.value) == (
        f"--out {str(out)!r} holds {shown} but no cv_predictions.csv, so {'it is' if len(mine) == 1 else 'they are'}"
        f" no earlier calibration report's: the report would overwrite {them}. Move {shown} out of {str(out)!r} "
        f"(delete {them} if left by a `calib report` that was killed), or choose another --out (a new or empty "
        f"folder, or an earlier `calib report` folder)")
    assert _tree(out) == {**mine, "notes.txt": "kept"}
    (out / "cv_predictions.csv").write_text("x\n")  # a user's own predictions beside them: still no earlier report
    with pytest.raises(OutputDirError, match=r"but (no metrics\.json|metrics\.json was not written by `calib report`)"):
        prepare_report_folder(out)
    (out / "metrics.json").write_text('{"command": "calib report"}')  # an earlier report: its files are replaced
    assert prepare_report_folder(out) == out


def test_report_files_name_every_file_calib_report_writes():
    from calib.files import REPORT_FILES
    from calib.report import FIGURES

    assert sorted(REPORT_FILES) == sorted(["rows.csv", "cv_predictions.csv", "metrics.json", "report.html",
                                           *(f"{name}.png" for name in FIGURES)])


def test_a_probe_killed_before_probe_json_leaves_partials_the_next_probe_removes(tmp_path):
    """A first probe killed before its probe.json leaves .tmp partials and batch_K folders of those only (or empty):
    no user's, so the next probe removes them, saying so (it refused the folder); a user's file beside them is kept."""
    out = _folder(tmp_path / "p", {"alignment.safetensors.tmp": "cut", "batch_0/tokens.jsonl.tmp": "x",
                                   "notes.txt": "k"})
    (out / "batch_1").mkdir()
    said = []
    with replacing_earlier_probe(out, say=said.append) as folder:
        assert folder.earlier == []
        (out / "probe.json").write_text("new")
    assert said == [f"removed what a probe killed before it was complete left in {out} "
                    "(alignment.safetensors.tmp, batch_0, batch_1)"]
    assert _tree(out) == {"probe.json": "new", "notes.txt": "k"}


@pytest.mark.parametrize("files", [{"batch_0/tokens.jsonl": "mine"},  # a user's lone file of a probe's name
                                   {"batch_0/probe.json": "{}", "batch_0/report.html": "<p>",  # a probe copied there
                                    "batch_0/tokens.jsonl": "x", "batch_0/alignment.safetensors": "y"}])
def test_a_batch_folder_holding_complete_files_without_probe_json_is_refused_and_kept(tmp_path, files):
    """Without probe.json a batch_K of complete probe files (a user's, or a whole probe written into DIR/batch_0) cannot
    be told from a killed probe's: refused, as a complete file of a probe's name at the top is, and kept; it was
    deleted as a killed probe's leftover."""
    out = _folder(tmp_path / "p", files)
    with pytest.raises(OutputDirError, match=r"holds batch_0 but no probe\.json, so it is no earlier probe's "
                                             r".*\(delete it if left by a probe that was killed before it wrote "
                                             r"probe\.json\)$"):
        with replacing_earlier_probe(out, say=pytest.fail, batch_folders=2):
            pytest.fail("the block ran")
    assert _tree(out) == files
