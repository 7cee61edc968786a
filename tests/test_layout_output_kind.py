"""gradprobe.layout.output_kind: the one answer every command's folder refusal reads."""

from __future__ import annotations

import pytest

from gradprobe.layout import OUTPUT_KINDS, output_kind


@pytest.mark.parametrize("files, expected", [
    (["metrics.jsonl", "config.json"], ("run", "metrics.jsonl")),
    (["study.json", "runs.csv"], ("study", "study.json")),
    (["probe.json", "report.html"], ("probe", "probe.json")),
    (["arms.json", "probe.json"], ("study probe", "arms.json")),
    (["cv_predictions.csv", "report.html"], ("calib report", "cv_predictions.csv")),
    (["cv_predictions.csv", "metrics.json"], ("calib report", "cv_predictions.csv")),
    (["ranking.csv", "rank.json"], ("ranking", "ranking.csv")),
    (["reliability.png", "metrics.json"], ("difficulty eval", "reliability.png")),
    (["metrics.json"], None),  # a difficulty evaluation's and a calibration report's: no marker
    (["notes.txt"], None),
    ([], None),
])
def test_each_kind_of_folder_is_named_with_its_evidence(tmp_path, files, expected):
    for name in files:
        (tmp_path / name).write_text("")
    assert output_kind(tmp_path) == expected
    assert expected is None or expected[0] in OUTPUT_KINDS


def test_a_guided_probe_folder_and_a_missing_folder(tmp_path):
    guided = tmp_path / "probe" / "guided" / "g1"
    guided.mkdir(parents=True)
    (tmp_path / "probe" / "arms.json").write_text("{}")
    assert output_kind(guided) == ("guided probe", "probe/guided/g1")
    assert output_kind(tmp_path / "nope") is None



@pytest.mark.parametrize("files, what", [
    (["ranking.csv", "rank.json"], "a ranking (`gradprobe rank-prompts`) (ranking.csv)"),
    (["reliability.png", "metrics.json"], "a difficulty evaluation (`gradprobe difficulty-eval`) (reliability.png)")])
def test_probe_train_and_calib_refuse_a_difficulty_folder(tmp_path, files, what):
    """``gradprobe probe --out`` a rank-prompts folder mixed its files into it."""
    from calib.files import prepare_report_folder
    from gradprobe.outputs import OutputDirError
    from gradprobe.probe.output import _other_output
    from gradprobe.training.run_folder import other_output

    for name in files:
        (tmp_path / name).write_text("x")
    assert _other_output(tmp_path) == (f"holds {what}, not a probe's output; a probe there would mix its files into "
                                       "it: choose another --out (an empty folder, or an earlier probe's)")
    assert other_output(tmp_path) == what
    with pytest.raises(OutputDirError, match=rf"holds {what.replace('(', '[(]').replace(')', '[)]')}, not a "):
        prepare_report_folder(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(files)
