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
