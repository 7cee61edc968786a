"""Two defects of calib's inputs and outputs.

1. A probe.json read from the current folder (``calib apply .``, ``calib apply probe.json``,
   ``calib.apply("default", ".")``) is named ``probe.json`` in messages, the text calib took for a result passed as a
   dict: calib's own refusals (a null ``config.budget_tokens``, a forecast section missing a row) then ended with the
   dict's fix (:data:`calib.probe_input.DICT_FIX`) instead of the file's. A dict is now marked by its ``where``'s type
   (:data:`calib.probe_input.DICT_WHERE`), not by that text: the file gets what the same file gets by an absolute path.
2. An ``--out`` through a symlink loop (``a -> b -> a``, ``self -> self``): ``calib report`` failed at mkdir with
   errno EEXIST ("File exists") where every gradprobe command refuses it with ELOOP naming the loop; ``calib rows``
   (and fit, apply) replaced a looping link with a regular file; a file under a looping folder was refused in the
   words of a folder. Now refused before anything is written, naming the loop.
"""

from __future__ import annotations

import copy
import errno
import json
import os
from pathlib import Path

import pytest

from calib.apply import apply_calibration
from calib.cli import main
from calib.files import prepare_report_folder, write_json
from calib.probe_input import DICT_FIX
from gradprobe.forecast import forecast_section
from gradprobe.layout import restore_advice
from gradprobe.outputs import OutputDirError, json_safe, refuse_file_in_the_way

REPO = Path(__file__).resolve().parents[2]
STUDY = REPO / "data" / "study_tiny"
#: the shipped probe records the task by name only, outside the default calibration's domain: not tested here
pytestmark = pytest.mark.filterwarnings("ignore::calib.domain.CalibrationDomainWarning")


def _no_budget(raw: dict) -> None:
    del raw["config"]["budget_tokens"]


def _row_missing(raw: dict) -> None:
    raw["forecast"] = json_safe(forecast_section(raw))
    raw["forecast"]["rows"] = raw["forecast"]["rows"][:1]


def _damaged(damage) -> dict:
    raw = json.loads((REPO / "data" / "study_tiny_heldout4k" / "probe" / "probe.json").read_text())
    damage(raw)
    return json.loads(json.dumps(raw))


def _cli_error(capsys, arg: str) -> str:
    assert main(["apply", arg]) == 2
    err = capsys.readouterr().err
    assert err.startswith("calib apply: error: ") and err.endswith("\n")
    return err[len("calib apply: error: "):-1]


@pytest.mark.parametrize("damage, field", [(_no_budget, "config.budget_tokens is null"),
                                           (_row_missing, "forecast.rows has no row of arm")])
def test_a_probe_json_of_the_current_folder_gets_the_files_fix_not_the_dicts(tmp_path, monkeypatch, capsys, damage,
                                                                            field):
    folder = tmp_path / "p"
    folder.mkdir()
    raw = _damaged(damage)
    (folder / "probe.json").write_text(json.dumps(raw))
    absolute = _cli_error(capsys, str(folder))
    assert absolute.startswith(f"{folder / 'probe.json'} field {field}") and DICT_FIX not in absolute
    # the same advice, the path as the user gave it: probe.json, and the folder '.' where the fix names it
    expected = absolute.replace(str(folder / "probe.json"), "probe.json").replace(restore_advice(folder),
                                                                                  restore_advice(Path(".")))
    if damage is _no_budget:
        assert absolute.endswith("; re-run `gradprobe probe` (calib never edits probe.json)")
    else:
        assert restore_advice(folder) in absolute and "--out '.'" in expected
    monkeypatch.chdir(folder)  # restored by monkeypatch at the end of the test
    assert _cli_error(capsys, ".") == expected  # was: ...; pass the probe's result as gradprobe.probe returned it...
    assert _cli_error(capsys, "probe.json") == expected
    with pytest.raises(ValueError) as e:
        apply_calibration("default", ".")
    assert str(e.value) == expected
    with pytest.raises(ValueError) as e:  # a dict keeps the dict's fix, in the same folder
        apply_calibration("default", copy.deepcopy(raw))
    assert str(e.value).startswith(f"probe.json field {field}") and DICT_FIX in str(e.value)
    assert restore_advice(Path(".")) not in str(e.value) and "re-run" not in str(e.value)


@pytest.fixture
def loops(tmp_path) -> Path:
    """``a -> b -> a`` and ``self -> self`` in a fresh folder."""
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    (tmp_path / "self").symlink_to("self")
    return tmp_path


def _gradprobes_refusal(out: Path) -> OutputDirError:
    with pytest.raises(OutputDirError) as e:
        refuse_file_in_the_way(out)  # what train/probe/study/rank-prompts say of this --out
    return e.value


@pytest.mark.parametrize("name", ["a", "self", "b/sub"])
def test_a_report_folder_through_a_symlink_loop_is_refused_as_gradprobe_refuses_it(loops, name):
    out = loops / name
    want = _gradprobes_refusal(out)
    assert want.errno == errno.ELOOP and "is a symlink loop (" in str(want)
    with pytest.raises(OutputDirError) as e:
        prepare_report_folder(out)  # was: errno EEXIST (a, self), "creating the report folder ... failed (...)"
    assert e.value.errno == errno.ELOOP and str(e.value) == str(want)
    assert sorted(os.listdir(loops)) == ["a", "b", "self"] and os.readlink(loops / "a") == "b"


def test_calib_report_names_the_loop(loops, capsys):
    assert main(["report", str(STUDY), "--out", str(loops / "self")]) == 2
    assert capsys.readouterr().err == f"calib report: error: {_gradprobes_refusal(loops / 'self')}\n"


def test_an_output_file_that_is_a_looping_link_is_refused_and_the_link_kept(loops, capsys):
    out = loops / "self"
    assert main(["rows", str(STUDY), "--out", str(out)]) == 2  # was: 0, the link replaced by the rows CSV
    assert capsys.readouterr().err == (
        f"calib rows: error: {str(out)!r} is a symlink loop ({str(out)!r} -> {str(out)!r}: each link points to the "
        "next, so it leads to no file, and the write would replace the link with a regular file): remove the link "
        f"(rm {str(out)!r}) so that the file is written there, or point it at a file (ln -sfn FILE {str(out)!r}), or "
        "choose another --out\n")
    assert out.is_symlink() and os.readlink(out) == "self"
    with pytest.raises(OutputDirError) as e:
        write_json(loops / "a", {"x": 1})  # calib fit's and apply's writer
    assert e.value.errno == errno.ELOOP and str(e.value).startswith(
        f"{str(loops / 'a')!r} is a symlink loop ({str(loops / 'a')!r} -> {str(loops / 'b')!r} -> "
        f"{str(loops / 'a')!r}: each link points to the next, so it leads to no file")
    assert os.readlink(loops / "a") == "b" and sorted(os.listdir(loops)) == ["a", "b", "self"]


def test_an_output_file_under_a_looping_folder_is_refused_in_the_folders_words(loops):
    with pytest.raises(OutputDirError) as e:  # was: "writing ... failed (...); ... is created as a folder" (the file)
        write_json(loops / "a" / "c.json", {"x": 1})
    want = _gradprobes_refusal(loops / "a")
    assert e.value.errno == errno.ELOOP and str(e.value) == str(want)
    assert f"so that {str(loops / 'a')!r} is created as a folder" in str(want)


@pytest.mark.parametrize("command", ["rows", "apply"])
def test_calib_rows_and_apply_refuse_an_out_under_a_looping_folder_before_any_work(loops, capsys, command):
    """`calib rows|apply ... --out LOOP/c.json` names the loop before any work (was: a raw "[Errno 17] File exists"
    from the folder's mkdir, after the rows were built)."""
    source = str(STUDY) if command == "rows" else str(STUDY / "probe")
    assert main([command, source, "--out", str(loops / "a" / "c.json")]) == 2
    assert capsys.readouterr().err == f"calib {command}: error: {_gradprobes_refusal(loops / 'a')}\n"
    assert sorted(os.listdir(loops)) == ["a", "b", "self"]
