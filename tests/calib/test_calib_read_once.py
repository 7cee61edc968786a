"""calib reads a study's runs.csv once where it checks it (:func:`calib.integrity.read_study_runs`): the lost-line
check takes the frame and bytes the cell checks read (it read and parsed the file a second time). What the check
tells is unchanged: a line deleted whole is refused, a line cut short is no lost line, and a file cut off after a
line (its later lines gone with the cut) is refused as the analysis refuses it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from calib.dataset import StudyFormatError, build_rows
from calib.integrity import read_runs, read_study_runs

REPO = Path(__file__).resolve().parents[2]
COLS = ("arm", "seed", "update", "generated_tokens", "accuracy")


def _study(tmp_path) -> Path:
    """A copy of the shipped ``data/study_tiny`` (per-item results included, figures left out)."""
    return Path(shutil.copytree(REPO / "data" / "study_tiny", tmp_path / "study_tiny",
                                ignore=shutil.ignore_patterns("figures")))


@pytest.fixture
def counted(monkeypatch):
    """Counts of runs.csv reads (``Path.read_bytes`` of a file named runs.csv) and of ``pandas.read_csv`` parses."""
    seen = {"reads": 0, "parses": 0}
    read_bytes, read_csv = Path.read_bytes, pd.read_csv

    def counting_read_bytes(self):
        seen["reads"] += self.name == "runs.csv"
        return read_bytes(self)

    def counting_read_csv(*args, **kwargs):
        seen["parses"] += 1
        return read_csv(*args, **kwargs)

    monkeypatch.setattr(Path, "read_bytes", counting_read_bytes)
    monkeypatch.setattr(pd, "read_csv", counting_read_csv)
    return seen


def test_read_study_runs_reads_and_parses_runs_csv_once(tmp_path, counted):
    study = _study(tmp_path)
    runs, cut = read_study_runs(study)
    assert counted == {"reads": 1, "parses": 1}  # was 2 and 2: the lost-line check read the file again
    expected, expected_cut = read_runs(study, COLS)
    pd.testing.assert_frame_equal(runs, expected)  # the same checked frame as before
    assert cut == expected_cut == [] and len(runs) == len(pd.read_csv(study / "runs.csv")) == 150
    assert runs["seed"].dtype.kind == "i" and runs["update"].dtype.kind == "f"


def test_a_deleted_line_is_still_refused_from_the_one_read(tmp_path, counted):
    study = _study(tmp_path)
    path = study / "runs.csv"
    lines = path.read_text().splitlines()
    gone = next(i for i, x in enumerate(lines) if x.startswith("mc_value,2,5,"))
    path.write_text("\n".join(lines[:gone] + lines[gone + 1:]) + "\n")
    counted.update(reads=0, parses=0)
    with pytest.raises(StudyFormatError) as info:
        read_study_runs(study)
    assert str(info.value).startswith(f"{path} lost eval lines: arm mc_value, seed 2 lacks update(s) 5 (plan)")
    assert counted == {"reads": 1, "parses": 1}


def test_a_line_cut_in_the_middle_is_no_lost_line(tmp_path):
    """The lost-line check reads the file whole, the cut line kept (its cells blank where cut), as the analysis
    does; the cell checks leave the cut line out. Given the checked frame instead, the cut line's update would read
    as lost (it is an eval the plan and the per-item results record)."""
    study = _study(tmp_path)
    path = study / "runs.csv"
    lines = path.read_text().splitlines()
    arm, seed, update = lines[10].split(",")[:3]
    lines[10] = lines[10].rsplit(",", 1)[0]  # a field short: cut
    path.write_text("\n".join(lines) + "\n")
    runs, cut = read_study_runs(study)
    assert [n for n, _ in cut] == [11] and 11 not in runs.index and len(runs) == 149
    assert not ((runs["arm"] == arm) & (runs["seed"] == int(seed)) & (runs["update"] == float(update))).any()
    rows = build_rows(study)  # calib rows reads on, as before
    assert len(rows) == 20


def test_a_runs_csv_cut_off_after_a_line_is_refused_as_the_analysis_refuses_it(tmp_path):
    """The last line gone and the one before it cut inside its last value: calib's lost-line check exempted the cut
    line's run after it (calib rows read 20 rows; the analysis read the run as ending at update 43). Its end, update
    57 in study.json, went with the cut: refused, from the one read of the file."""
    from gradprobe.study.reading import restore_runs_csv_fix

    study = _study(tmp_path)
    path = study / "runs.csv"
    text = path.read_text()
    path.write_text(text[:text.rindex("grpo_2xlr,3,57,")].rstrip("\n")[:-3])
    with pytest.raises(StudyFormatError) as info:
        read_study_runs(study)
    assert str(info.value) == (
        f"{path} lost eval lines: arm grpo_2xlr, seed 3 lacks update(s) 57 (study.json), its later lines gone with "
        "the file's cut last line (this run's) (study.json: a finished run's final eval is at the update study.json "
        "records): lines were deleted from or cut off the end of runs.csv, which calibration would read as runs with "
        f"fewer evals; {restore_runs_csv_fix(study)}")
    with pytest.raises(StudyFormatError):
        build_rows(study)  # calib rows, fit and report alike
