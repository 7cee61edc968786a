"""A plug-in reward's identity covers the helper modules it imports from its own folder (``modules``: path relative
to the folder -> sha256), so that a run resumed, or a study continued, after a helper was edited, added or removed is
refused naming the module file; a record from before ``modules`` resumes with one note, a damaged one is refused. A
``pkg.mod:fn`` reward that cannot be imported on a resume is told to put its package root back on PYTHONPATH, and a
whole moved folder is told what was recorded, what is found now and how to resume."""

from __future__ import annotations

import importlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from gradprobe.rewards.plugin import plugin_identity
from gradprobe.study.folder import StudyError
from gradprobe.study.runner import run_study
from gradprobe.training.errors import DamagedRunFolderError, RunConfigMismatchError
from gradprobe.training.run import run_training

from helpers_rollout import one_thread
from helpers_training import folder_files, killed_run, refused_before_loading, tiny_plan
from plugin_helpers import forget_reward as _forget, plugin_records_restored, sha256_of as _sha

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)


@pytest.fixture
def registry(monkeypatch, tmp_path):
    """The reward registry, sys.path and the plug-in's records restored after the test, and the modules it imported
    from tmp_path forgotten (:func:`plugin_helpers.plugin_records_restored`)."""
    with plugin_records_restored(monkeypatch, tmp_path):
        yield


def _write(folder: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)


def _resumed(run, out: Path, capsys) -> list[str]:
    """Resume ``run`` in ``out`` to its end (checked) and return the ``note:`` lines it printed on stderr."""
    capsys.readouterr()
    summary = run_training(run, out)
    assert summary["completed"] and summary["updates"] == 2 and summary["resumed_from_update"] == [1]
    return [x for x in capsys.readouterr().err.splitlines() if x.startswith("note:")]


def test_a_file_reward_records_the_helper_modules_it_imports_from_its_folder(tmp_path, registry):
    w = tmp_path / "w"
    _write(w, {
        "rw.py": "import mi1_helper\nfrom mi1_sub import util\nimport mi1_ext\n\n"
                 "def fn(prompts, completions, **kwargs):\n    return [mi1_helper.K * util.K for c in completions]\n",
        "mi1_helper.py": "K = 1.0\n",
        "mi1_sub/__init__.py": "",
        "mi1_sub/util.py": "K = 2.0\n",
        "mi1_unused.py": "X = 1\n",  # beside the reward, never imported: not its code
        "mi1_script.py": "Y = 1\n",  # imported before the reward (the user's own script): not its code
        ".venv/lib/python3.11/site-packages/mi1_ext.py": "Z = 1\n",  # an installed package inside the folder
    })
    sys.path.insert(0, str(w / ".venv/lib/python3.11/site-packages"))
    sys.path.insert(0, str(w))
    importlib.import_module("mi1_script")
    identity = plugin_identity(f"{w / 'rw.py'}:fn")
    assert identity == {"spec": f"{w / 'rw.py'}:fn", "file": str((w / "rw.py").resolve()), "sha256": _sha(w / "rw.py"),
                        "modules": {"mi1_helper.py": _sha(w / "mi1_helper.py"),
                                    "mi1_sub/__init__.py": _sha(w / "mi1_sub/__init__.py"),
                                    "mi1_sub/util.py": _sha(w / "mi1_sub/util.py")}}


def test_a_module_reward_records_its_package_and_a_shared_helper_whatever_was_loaded_first(tmp_path, registry):
    src = tmp_path / "src"
    _write(src, {
        "mi2pkg/__init__.py": "NAME = 'pkg'\n",
        "mi2pkg/scoring.py": "from . import shared\n\ndef fn(prompts, completions, **kwargs):\n"
                             "    return [shared.K for c in completions]\n",
        "mi2pkg/shared.py": "K = 1.0\n",
        "mi2pkg/other.py": "from .shared import K\nfrom . import only_other\n\n"
                           "def fn(prompts, completions, **kwargs):\n    return [K for c in completions]\n",
        "mi2pkg/only_other.py": "Q = 3\n",
    })
    sys.path.insert(0, str(src))
    pkg = src / "mi2pkg"
    first = plugin_identity("mi2pkg.other:fn")  # imports shared.py first
    second = plugin_identity("mi2pkg.scoring:fn")  # finds shared.py already imported: still its code
    assert first["file"] == str((pkg / "other.py").resolve())
    assert first["modules"] == {"__init__.py": _sha(pkg / "__init__.py"), "only_other.py": _sha(pkg / "only_other.py"),
                                "shared.py": _sha(pkg / "shared.py")}
    assert second["file"] == str((pkg / "scoring.py").resolve())
    assert second["modules"] == {"__init__.py": _sha(pkg / "__init__.py"), "shared.py": _sha(pkg / "shared.py")}


RW = ("import mi3_helper\ntry:\n    import mi3_extra\nexcept ImportError:\n    mi3_extra = None\n\n"
      "def brevity(prompts, completions, **kwargs):\n    return [-len(c) / mi3_helper.SCALE for c in completions]\n")


def test_an_edited_new_or_missing_helper_module_is_refused_on_resume(tmp_path, registry, monkeypatch, capsys):
    w = tmp_path / "w"
    _write(w, {"rw.py": RW, "mi3_helper.py": "SCALE = 10\n", "mi3_extra.py": "E = 1\n"})
    monkeypatch.chdir(w)
    spec, out = "rw.py:brevity", tmp_path / "run"
    run = killed_run(out, spec)
    helper, extra = (w / "mi3_helper.py").resolve(), (w / "mi3_extra.py").resolve()
    h1, e1 = _sha(helper), _sha(extra)
    config = json.loads((out / "config.json").read_text())
    assert config["reward_plugin"]["modules"] == {"mi3_extra.py": e1, "mi3_helper.py": h1}
    kept = folder_files(out)
    tail = (", so its remaining updates would train another reward than its first ones; {fix}, or start a new run "
            f"under a new --out (not {out}); nothing was loaded or written")
    # a helper edited
    _forget(spec, tmp_path)
    helper.write_text("SCALE = 100\n")
    h2 = _sha(helper)
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{out} cannot be resumed: reward 'rw.py:brevity' imports the helper module {helper}, which was edited "
        f"(sha256 {h1[:12]} then, {h2[:12]} now)"
        + tail.format(fix=f"restore the module file as it was ({helper}, sha256 {h1[:12]})"))
    # a helper gone (the reward's import of it is optional)
    _forget(spec, tmp_path)
    helper.write_text("SCALE = 10\n")
    extra.unlink()
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{out} cannot be resumed: reward 'rw.py:brevity' no longer finds the helper module {extra} it imported when "
        f"the run started (sha256 {e1[:12]} then, none now: the file is gone)"
        + tail.format(fix=f"restore the module file ({extra}, sha256 {e1[:12]})"))
    # a helper file the run did not start with (as if mi3_extra.py was created after the run started)
    _forget(spec, tmp_path)
    extra.write_text("E = 1\n")
    without = {**config, "reward_plugin": {**config["reward_plugin"], "modules": {"mi3_helper.py": h1}}}
    (out / "config.json").write_text(json.dumps(without))
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{out} cannot be resumed: reward 'rw.py:brevity' now imports the helper module {extra}, a file its imports "
        f"did not find when the run started (sha256 none then, {e1[:12]} now)"
        + tail.format(fix="remove or rename that file, as the folder was when the run started"))
    (out / "config.json").write_bytes(kept["config.json"])
    assert folder_files(out) == kept  # nothing written by the refusals
    _forget(spec, tmp_path)
    assert _resumed(run, out, capsys) == []  # the fix: the code as it was


def test_a_damaged_modules_record_is_refused_naming_config_json(tmp_path, registry, monkeypatch):
    _write(tmp_path, {"rw.py": "import mi4_helper\n\ndef fn(prompts, completions, **kwargs):\n"
                               "    return [mi4_helper.K for c in completions]\n", "mi4_helper.py": "K = 1.0\n"})
    monkeypatch.chdir(tmp_path)
    spec, out = "rw.py:fn", tmp_path / "run"
    run = killed_run(out, spec)
    config = json.loads((out / "config.json").read_text())
    assert config["reward_plugin"]["modules"] == {"mi4_helper.py": _sha(tmp_path / "mi4_helper.py")}
    for modules, shown in [(["mi4_helper.py"], '["mi4_helper.py"]'),
                           ({"mi4_helper.py": "abc"}, '{"mi4_helper.py": "abc"}'),
                           ({"mi4_helper.py": "F" * 64}, '{"mi4_helper.py": "' + "F" * 38 + "..."),
                           ({"mi4_helper.py": None}, '{"mi4_helper.py": null}'), ("x", '"x"'), (None, "null")]:
        (out / "config.json").write_text(json.dumps({**config, "reward_plugin": {**config["reward_plugin"],
                                                                                  "modules": modules}}))
        _forget(spec, tmp_path)
        assert refused_before_loading(run, out, DamagedRunFolderError) == (
            f"{out / 'config.json'} is damaged (field reward_plugin.modules is {shown}, not an object of "
            "module file (text) -> sha256 (64 hex digits)): the helper modules the reward was trained with cannot be "
            f"checked; restore the file from a copy, or delete {out} to start the run over")


def test_a_record_from_before_modules_resumes_with_one_note(tmp_path, registry, monkeypatch, capsys):
    _write(tmp_path, {"rw.py": "import mi5_helper\n\ndef fn(prompts, completions, **kwargs):\n"
                               "    return [mi5_helper.K for c in completions]\n", "mi5_helper.py": "K = 1.0\n"})
    monkeypatch.chdir(tmp_path)
    spec, out = "rw.py:fn", tmp_path / "run"
    run = killed_run(out, spec)
    config = json.loads((out / "config.json").read_text())
    del config["reward_plugin"]["modules"]  # as written before helper modules were recorded
    (out / "config.json").write_text(json.dumps(config))
    _forget(spec, tmp_path)
    assert _resumed(run, out, capsys) == [
        f"note: {out} was started before gradprobe recorded the helper modules a plug-in reward imports from its "
        f"folder, so whether those of reward 'rw.py:fn' (mi5_helper.py in {tmp_path.resolve()}) are the code it was "
        "trained with could not be checked; resuming"]
    assert json.loads((out / "config.json").read_text()) == config  # the old record is left as it was


MODULE_RW = "def fn(prompts, completions, **kwargs):\n    return [len(c) / 10 for c in completions]\n"


def test_a_module_reward_off_pythonpath_is_told_to_put_its_package_root_back(tmp_path, registry, monkeypatch,
                                                                             capsys):
    src, other = tmp_path / "src", tmp_path / "other"
    _write(src, {"mi6pkg/__init__.py": "", "mi6pkg/rw.py": MODULE_RW})
    _write(other, {"mi6pkg/__init__.py": "", "mi6pkg/rw.py": MODULE_RW + "# another copy\n"})
    monkeypatch.chdir(tmp_path)
    spec, out = "mi6pkg.rw:fn", tmp_path / "run"
    sys.path.insert(0, str(src))  # PYTHONPATH=src when the run started
    run = killed_run(out, spec)
    file, sha = (src / "mi6pkg/rw.py").resolve(), _sha(src / "mi6pkg/rw.py")
    restart = f"or start a new run under a new --out (not {out}); nothing was loaded or written"
    sys.path.remove(str(src))  # resumed without it: the module cannot be imported
    _forget(spec, tmp_path)
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{out} cannot be resumed: reward 'mi6pkg.rw:fn': no module named 'mi6pkg' (from {tmp_path}); write it as "
        "MODULE:FUNCTION (a module importable from the working directory or sys.path) or path/to/file.py:FUNCTION; "
        f"the run started with it from {file} (sha256 {sha[:12]}): to resume, put its package root "
        f"{src.resolve()} back on PYTHONPATH (e.g. PYTHONPATH={src.resolve()}), as when the run started, or run from "
        f"the directory the run was started in, {restart}")
    sys.path.insert(0, str(other))  # another copy of the package on the path
    _forget(spec, tmp_path)
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{out} cannot be resumed: reward 'mi6pkg.rw:fn' resolves to {(other / 'mi6pkg/rw.py').resolve()}, not to "
        f"{file} as when the run started (path moved) and the file differs (sha256 {sha[:12]} then, "
        f"{_sha(other / 'mi6pkg/rw.py')[:12]} now), so its remaining updates would train another reward than its "
        f"first ones; restore the reward file as it was ({file}, sha256 {sha[:12]}) or put its package root "
        f"{src.resolve()} back on PYTHONPATH, or run from the directory the run was started in, {restart}")
    sys.path.remove(str(other))
    sys.path.insert(0, str(src))  # the fix
    _forget(spec, tmp_path)
    assert _resumed(run, out, capsys) == []


def test_a_whole_moved_folder_says_what_was_recorded_and_how_to_resume(tmp_path, registry, monkeypatch, capsys):
    """The run folder and the reward file (with its helper) moved together, the reward run by a relative name: the
    same content resumes with a note (the helper recorded relative to the reward's folder); an edited file is
    refused naming the recorded file (which no longer exists) and sha256, the file found now, and the fix."""
    proj, moved = tmp_path / "proj", tmp_path / "moved"
    rw = ("import mi7_helper\n\ndef fn(prompts, completions, **kwargs):\n"
          "    return [-len(c) / mi7_helper.K for c in completions]\n")
    _write(proj, {"rw.py": rw, "mi7_helper.py": "K = 10\n"})
    monkeypatch.chdir(proj)
    spec = "rw.py:fn"
    run = killed_run(proj / "run", spec)
    old_file, sha = (proj / "rw.py").resolve(), _sha(proj / "rw.py")
    restart = "or start a new run under a new --out (not {out}); nothing was loaded or written"
    monkeypatch.chdir(tmp_path)  # from a directory without rw.py: the name finds no file
    _forget(spec, tmp_path)
    assert refused_before_loading(run, proj / "run", RunConfigMismatchError) == (
        f"{proj / 'run'} cannot be resumed: reward 'rw.py:fn': no file rw.py (from {tmp_path}); write it as "
        "MODULE:FUNCTION (a module importable from the working directory or sys.path) or path/to/file.py:FUNCTION; "
        f"the run started with it from {old_file} (sha256 {sha[:12]}): to resume, put that file (the same content, "
        f"sha256 {sha[:12]}) at {tmp_path / 'rw.py'}, or run from {proj.resolve()}, the directory the run was started "
        "in, " + restart.format(out=proj / "run"))
    shutil.move(proj, moved)
    monkeypatch.chdir(moved)
    out, now_file = moved / "run", (moved / "rw.py").resolve()
    now_file.write_text(rw + "# edited\n")
    _forget(spec, tmp_path)
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{out} cannot be resumed: the run started with reward 'rw.py:fn' from {old_file} (sha256 {sha[:12]}), "
        f"which no longer exists (moved?), and the name finds {now_file} now, whose content differs (sha256 "
        f"{_sha(now_file)[:12]}), so its remaining updates would train another reward than its first ones; to resume "
        f"it, pass the same file as the reward: the content recorded (sha256 {sha[:12]}), e.g. {now_file} restored "
        f"as it was, or start a new run under a new --out (not {out}); nothing was loaded or written")
    now_file.write_text(rw)  # the fix
    _forget(spec, tmp_path)
    assert _resumed(run, out, capsys) == [
        f"note: reward 'rw.py:fn' of {out} is read from {now_file}, not {old_file} as when the run started, with the "
        f"same content (sha256 {sha[:12]}); resuming"]


STUDY_RW = ("import mi8_helper\n\ndef fn(prompts, completions, **kwargs):\n"
            "    return [mi8_helper.f(c) for c in completions]\n")


def test_a_study_refuses_an_edited_helper_and_a_damaged_record_and_notes_an_old_one(tmp_path, registry, capsys):
    w = tmp_path / "w"
    _write(w, {"rw.py": STUDY_RW, "mi8_helper.py": "def f(c):\n    return float(len(c) % 2)\n"})
    helper = (w / "mi8_helper.py").resolve()
    spec = f"{w / 'rw.py'}:fn"
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(tiny_plan(arm="plug", reward=spec, seeds=[0, 1]))
    out, sj = tmp_path / "study", tmp_path / "study" / "study.json"
    assert run_study(plan_path, out, executor="inline", probe=False, analyze=False).ok
    h1 = _sha(helper)
    assert json.loads(sj.read_text())["reward_plugins"] == {
        spec: {"file": str((w / "rw.py").resolve()), "sha256": _sha(w / "rw.py"), "modules": {"mi8_helper.py": h1}}}
    shutil.rmtree(out / "runs" / "plug" / "seed1")  # seed 1 still to train
    kept = sj.read_bytes()
    helper.write_text("def f(c):\n    return float(len(c) % 3)\n")
    _forget(spec, tmp_path)
    with pytest.raises(StudyError) as edited:
        run_study(plan_path, out, executor="inline", probe=False, analyze=False)
    assert str(edited.value) == (
        f"{out}: reward {spec!r} imports the helper module {helper}, which was edited (sha256 {h1[:12]} then, "
        f"{_sha(helper)[:12]} now), not the code the study's runs started with ({sj} reward_plugins): its remaining "
        f"runs would train another reward than its finished ones; restore the module file as it was ({helper}, "
        f"sha256 {h1[:12]}), or run the plan as a new study under a new --out")
    assert not (out / "runs" / "plug" / "seed1").exists() and sj.read_bytes() == kept  # nothing run or written
    helper.write_text("def f(c):\n    return float(len(c) % 2)\n")
    study = json.loads(kept)
    study["reward_plugins"][spec]["modules"] = {"mi8_helper.py": 7}
    sj.write_text(json.dumps(study))
    _forget(spec, tmp_path)
    with pytest.raises(StudyError) as damaged:
        run_study(plan_path, out, executor="inline", probe=False, analyze=False)
    assert str(damaged.value).startswith(
        f"{sj} field reward_plugins[{spec!r}].modules is {{\"mi8_helper.py\": 7}}, not an object of module file (text) "
        f"-> sha256 (64 hex digits): the file is damaged, so whether reward {spec!r}'s helper modules are the code the "
        "study's runs started with cannot be told; restore it from a copy, or delete it and run")
    del study["reward_plugins"][spec]["modules"]  # as recorded before helper modules were
    sj.write_text(json.dumps(study))
    _forget(spec, tmp_path)
    capsys.readouterr()
    assert run_study(plan_path, out, executor="inline", probe=False, analyze=False).ok
    notes = [x for x in capsys.readouterr().err.splitlines() if x.startswith("note:")]
    assert notes == [
        f"note: {out} was started before gradprobe recorded the helper modules a plug-in reward imports from its "
        f"folder, so whether those of reward {spec!r} (mi8_helper.py in {w.resolve()}) are the code its runs started "
        "with could not be checked; continuing the study"]
    assert (out / "runs" / "plug" / "seed1" / "summary.json").is_file()
    assert "modules" not in json.loads(sj.read_text())["reward_plugins"][spec]  # the old record is kept
