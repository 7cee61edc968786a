"""``gradprobe study --analyze-only`` on a study whose analysis.json is valid JSON but no object (null, an array, a
number: an edit or a tool that wrote the wrong thing) warns that it is damaged and that calib refuses the study, with
the command that rewrites it, as it warns of an analysis.json that is not JSON; before, it said nothing. The
re-analysis goes to reanalysis/ and the file is kept."""

from __future__ import annotations

import pytest

from gradprobe.cli import main as cli_main
from gradprobe.forecast.analysis_reads import analysis_damage
from gradprobe.outputs import shell_word

from study_helpers import shipped_copy


@pytest.mark.parametrize("text, kind", [("null", "null"), ("[1, 2]", "array")])
def test_an_analysis_json_that_is_no_object_is_named_damaged(tmp_path, capsys, text, kind):
    study = shipped_copy("study_tiny", tmp_path / "s")
    (study / "analysis.json").write_text(text)
    assert analysis_damage(study) is not None  # calib refuses this study
    assert cli_main(["study", "--analyze-only", "--out", str(study)]) == 0
    err = capsys.readouterr().err
    assert (f"gradprobe study: warning: {study}/analysis.json is damaged (it holds a JSON {kind}, not an object), so "
            f"calib refuses this study; run `gradprobe study --analyze-only --out {shell_word(study)} "
            "--overwrite-analysis` to rewrite it") in err
    assert (study / "analysis.json").read_text() == text and (study / "reanalysis" / "analysis.json").exists()
