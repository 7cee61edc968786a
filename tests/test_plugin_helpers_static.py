"""A plug-in reward's recorded helper modules (``plugin_identity``'s ``modules``) are read from its files' import
statements on disk, so they are the same in every process whatever it imported before: two rewards sharing a helper
(loaded in either order, or by one study worker), a script or notebook that imported the helper first, a lazy import
inside the reward function. Before, the record was what entered ``sys.modules`` while the reward file was imported, so
an interrupted study whose arms share a helper could not resume, a run started from such a script was refused from a
fresh process, and an edited helper shared by two arms was accepted. A ``pkg.mod:fn`` reward whose recorded file was
renamed is told that the file is gone, not to put a package root already on ``sys.path`` back on ``PYTHONPATH``, and
one whose name finds another copy first is told to make it find the recorded file first."""

from __future__ import annotations

import importlib
import json
import shutil
import sys

import pytest

from gradprobe.rewards.plugin import plugin_identity
from gradprobe.study.folder import StudyError
from gradprobe.study.runner import run_study
from gradprobe.training.errors import RunConfigMismatchError

from helpers_training import killed_run, refused_before_loading, tiny_plan
from test_plugin_modules_identity import _forget, _one_thread, _resumed, _sha, _write, registry

__all__ = ["registry", "_one_thread"]  # fixtures used by name

SHARED = ("import hs1_common.scoring\nfrom hs1_const import SCALE\n\ndef fn(prompts, completions, **kwargs):\n"
          "    return [hs1_common.scoring.f(c) / SCALE for c in completions]\n")


def test_two_rewards_sharing_helpers_record_the_same_modules_in_either_load_order(tmp_path, registry):
    w = tmp_path / "w"
    _write(w, {"a.py": SHARED, "b.py": SHARED, "hs1_common/__init__.py": "", "hs1_const.py": "SCALE = 1.0\n",
               "hs1_common/scoring.py": "def f(c):\n    return float(len(c) % 2)\n"})
    a, b = f"{w / 'a.py'}:fn", f"{w / 'b.py'}:fn"
    expected = {"hs1_common/__init__.py": _sha(w / "hs1_common/__init__.py"),
                "hs1_common/scoring.py": _sha(w / "hs1_common/scoring.py"), "hs1_const.py": _sha(w / "hs1_const.py")}
    first = {spec: plugin_identity(spec)["modules"] for spec in (a, b)}
    _forget(a, tmp_path)
    _forget(b, tmp_path)
    second = {spec: plugin_identity(spec)["modules"] for spec in (b, a)}
    assert first == second == {a: expected, b: expected}


def test_a_helper_imported_by_the_script_first_gives_a_fresh_process_record(tmp_path, registry, monkeypatch,
                                                                            capsys):
    """The user's script imported the helper (for its constants) before training, then the run is resumed from a
    fresh process (the CLI), and the other way round: both resume, the record being the same."""
    w = tmp_path / "w"
    _write(w, {"rw.py": "from hs2_helper import SCALE\n\ndef fn(prompts, completions, **kwargs):\n"
                        "    return [-len(c) / SCALE for c in completions]\n", "hs2_helper.py": "SCALE = 10.0\n"})
    monkeypatch.chdir(w)
    sys.path.insert(0, str(w))
    importlib.import_module("hs2_helper")  # the script: `from hs2_helper import SCALE`
    spec, out = "rw.py:fn", tmp_path / "run"
    run = killed_run(out, spec)
    recorded = json.loads((out / "config.json").read_text())["reward_plugin"]["modules"]
    assert recorded == {"hs2_helper.py": _sha(w / "hs2_helper.py")}
    _forget(spec, tmp_path)  # a new process, nothing changed on disk
    assert plugin_identity(spec)["modules"] == recorded
    _forget(spec, tmp_path)
    assert _resumed(run, out, capsys) == []
    # started from a fresh process, resumed from a script that imported the helper first
    out2 = tmp_path / "run2"
    _forget(spec, tmp_path)
    run = killed_run(out2, spec)
    assert json.loads((out2 / "config.json").read_text())["reward_plugin"]["modules"] == recorded
    _forget(spec, tmp_path)
    importlib.import_module("hs2_helper")
    assert _resumed(run, out2, capsys) == []


def test_a_lazy_import_in_the_reward_function_is_recorded_before_it_runs(tmp_path, registry, monkeypatch):
    w = tmp_path / "w"
    _write(w, {"rw.py": "def fn(prompts, completions, **kwargs):\n    import hs3_lazy\n"
                        "    return [-len(c) / hs3_lazy.K for c in completions]\n", "hs3_lazy.py": "K = 10.0\n"})
    monkeypatch.chdir(w)
    spec, out = "rw.py:fn", tmp_path / "run"
    lazy = (w / "hs3_lazy.py").resolve()
    h1 = _sha(lazy)
    assert plugin_identity(spec)["modules"] == {"hs3_lazy.py": h1}
    assert "hs3_lazy" not in sys.modules  # found in the source, not imported
    run = killed_run(out, spec)
    lazy.write_text("K = 100.0\n")
    _forget(spec, tmp_path)
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{out} cannot be resumed: reward 'rw.py:fn' imports the helper module {lazy}, which was edited (sha256 "
        f"{h1[:12]} then, {_sha(lazy)[:12]} now), so its remaining updates would train another reward than its first "
        f"ones; restore the module file as it was ({lazy}, sha256 {h1[:12]}), or start a new run under a new --out "
        f"(not {out}); nothing was loaded or written")


def test_a_module_reward_records_relative_absolute_and_lazy_imports_under_its_folder_only(tmp_path, registry):
    src = tmp_path / "src"
    _write(src, {
        "hs4pkg/__init__.py": "",  # the parent package: outside the reward's folder hs4pkg/sub/
        "hs4pkg/top.py": "T = 1\n",
        "hs4pkg/sub/__init__.py": "",
        "hs4pkg/sub/rw.py": "import json\nimport importlib\nfrom .. import top\nfrom hs4pkg.sub import absolute\n\n"
                            "def fn(prompts, completions, **kwargs):\n    from . import late\n"
                            "    from .deep.x import y\n"
                            "    importlib.import_module('hs4pkg.sub.dynamic')\n"
                            "    return [late.K + y + absolute.K for c in completions]\n",
        "hs4pkg/sub/absolute.py": "from .chained import C\nK = C\n",
        "hs4pkg/sub/chained.py": "C = 1\n",
        "hs4pkg/sub/late.py": "K = 2\n",
        "hs4pkg/sub/deep/x.py": "y = 3\n",  # a namespace folder (no __init__.py)
        "hs4pkg/sub/dynamic.py": "D = 4\n",  # imported by a name in a variable: not seen
        "hs4pkg/sub/unused.py": "U = 5\n",
    })
    sys.path.insert(0, str(src))
    sub = src / "hs4pkg/sub"
    assert plugin_identity("hs4pkg.sub.rw:fn")["modules"] == {
        name: _sha(sub / name) for name in ("__init__.py", "absolute.py", "chained.py", "deep/x.py", "late.py")}


def test_an_edited_helper_shared_by_two_arms_is_refused_by_the_study(tmp_path, registry):
    w = tmp_path / "w"
    body = ("import hs5_common.scoring\n\ndef fn(prompts, completions, **kwargs):\n"
            "    return [hs5_common.scoring.f(c) for c in completions]\n")
    _write(w, {"a.py": body, "b.py": body, "hs5_common/__init__.py": "",
               "hs5_common/scoring.py": "def f(c):\n    return float(len(c) % 2)\n"})
    scoring = (w / "hs5_common/scoring.py").resolve()
    a, b = f"{w / 'a.py'}:fn", f"{w / 'b.py'}:fn"
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(tiny_plan(arms={"pa": {"reward": a}, "pb": {"reward": b}}, seeds=[0, 1]))
    out = tmp_path / "study"
    assert run_study(plan_path, out, executor="inline", probe=False, analyze=False).ok
    h1 = _sha(scoring)
    modules = {"hs5_common/__init__.py": _sha(w / "hs5_common/__init__.py"), "hs5_common/scoring.py": h1}
    recorded = json.loads((out / "study.json").read_text())["reward_plugins"]
    assert {spec: recorded[spec]["modules"] for spec in (a, b)} == {a: modules, b: modules}
    shutil.rmtree(out / "runs/pb/seed1")  # seed 1 of arm pb still to train
    scoring.write_text("def f(c):\n    return float(len(c) % 3)\n")
    _forget(a, tmp_path)
    _forget(b, tmp_path)
    with pytest.raises(StudyError) as e:
        run_study(plan_path, out, executor="inline", probe=False, analyze=False)
    assert str(e.value) == (
        f"{out}: reward {b!r} imports the helper module {scoring}, which was edited (sha256 {h1[:12]} then, "
        f"{_sha(scoring)[:12]} now), not the code the study's runs started with ({out / 'study.json'} reward_plugins): "
        f"its remaining runs would train another reward than its finished ones; restore the module file as it was "
        f"({scoring}, sha256 {h1[:12]}), or run the plan as a new study under a new --out")
    assert not (out / "runs/pb/seed1").exists()


def test_an_interrupted_study_whose_arms_share_a_helper_resumes_with_one_worker(tmp_path, registry):
    """With the local executor and one worker, arm pb's runs were recorded after arm pa's reward had imported the
    shared helper in that worker; the resumed study's fresh worker loads pb's reward first."""
    w = tmp_path / "w"
    body = ("from hs6_common import SCALE\n\ndef fn(prompts, completions, **kwargs):\n"
            "    return [-len(c) / SCALE for c in completions]\n")
    _write(w, {"a.py": body, "b.py": body, "hs6_common.py": "SCALE = 10.0\n"})
    a, b = f"{w / 'a.py'}:fn", f"{w / 'b.py'}:fn"
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(tiny_plan(arms={"pa": {"reward": a}, "pb": {"reward": b}}, seeds=[0],
                                   budget={"updates": 2}, train={"checkpoint_every": 1}, eval={"sampled": False}))
    out = tmp_path / "study"
    assert run_study(plan_path, out, executor="local", workers=1, probe=False, analyze=False).ok
    modules = {"hs6_common.py": _sha(w / "hs6_common.py")}
    for arm in ("pa", "pb"):
        assert json.loads((out / f"runs/{arm}/seed0/config.json").read_text())["reward_plugin"]["modules"] == modules
    (out / "runs/pb/seed0/summary.json").unlink()  # stopped after its last checkpoint, before its summary
    _forget(a, tmp_path)
    _forget(b, tmp_path)
    res = run_study(plan_path, out, executor="local", workers=1, probe=False, analyze=False)
    assert res.ok, res.summary()
    summary = json.loads((out / "runs/pb/seed0/summary.json").read_text())
    assert summary["completed"] and summary["resumed_from_update"] == [2]


def test_a_helper_file_new_on_disk_is_refused_and_its_removal_resumes(tmp_path, registry, monkeypatch, capsys):
    w = tmp_path / "w"
    _write(w, {"rw.py": "try:\n    import hs7_opt\nexcept ImportError:\n    hs7_opt = None\n\n"
                        "def fn(prompts, completions, **kwargs):\n    return [len(c) / 10 for c in completions]\n"})
    monkeypatch.chdir(w)
    spec, out = "rw.py:fn", tmp_path / "run"
    run = killed_run(out, spec)
    assert json.loads((out / "config.json").read_text())["reward_plugin"]["modules"] == {}
    new = (w / "hs7_opt.py").resolve()
    new.write_text("O = 1\n")
    _forget(spec, tmp_path)
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{out} cannot be resumed: reward 'rw.py:fn' now imports the helper module {new}, a file its imports did not "
        f"find when the run started (sha256 none then, {_sha(new)[:12]} now), so its remaining updates would train "
        "another reward than its first ones; remove or rename that file, as the folder was when the run started, or "
        f"start a new run under a new --out (not {out}); nothing was loaded or written")
    new.unlink()  # the fix
    _forget(spec, tmp_path)
    assert _resumed(run, out, capsys) == []


def test_a_renamed_module_file_whose_root_is_on_sys_path_is_told_the_file_is_gone(tmp_path, registry, monkeypatch,
                                                                                capsys):
    src = tmp_path / "src"
    _write(src, {"hs8pkg/__init__.py": "", "hs8pkg/rw.py": "def fn(prompts, completions, **kwargs):\n"
                                                           "    return [len(c) / 10 for c in completions]\n"})
    monkeypatch.chdir(tmp_path)
    sys.path.insert(0, str(src))
    spec, out = "hs8pkg.rw:fn", tmp_path / "run"
    run = killed_run(out, spec)
    file, sha = (src / "hs8pkg/rw.py").resolve(), _sha(src / "hs8pkg/rw.py")
    modules = json.loads((out / "config.json").read_text())["reward_plugin"]["modules"]
    assert modules == {"__init__.py": _sha(src / "hs8pkg/__init__.py")}  # run when hs8pkg.rw is imported
    file.rename(src / "hs8pkg/rw_old.py")  # src is still on sys.path
    _forget(spec, tmp_path)
    message = refused_before_loading(run, out, RunConfigMismatchError)
    assert message == (
        f"{out} cannot be resumed: reward 'hs8pkg.rw:fn': no module named 'hs8pkg.rw' (from {tmp_path}); write it as "
        "MODULE:FUNCTION (a module importable from the working directory or sys.path) or path/to/file.py:FUNCTION; "
        f"the run started with it from {file} (sha256 {sha[:12]}), which is gone (renamed or deleted): to resume, "
        f"restore that file (the same content, sha256 {sha[:12]}) at {file}, or start a new run under a new --out "
        f"(not {out}); nothing was loaded or written")
    assert "PYTHONPATH" not in message
    (src / "hs8pkg/rw_old.py").rename(file)  # the fix
    _forget(spec, tmp_path)
    assert _resumed(run, out, capsys) == []


def test_a_module_reward_shadowed_by_another_copy_is_not_told_to_use_pythonpath(tmp_path, registry, monkeypatch):
    src, other = tmp_path / "src", tmp_path / "other"
    body = "def fn(prompts, completions, **kwargs):\n    return [len(c) / 10 for c in completions]\n"
    _write(src, {"hs9pkg/__init__.py": "", "hs9pkg/rw.py": body})
    _write(other, {"hs9pkg/__init__.py": "", "hs9pkg/rw.py": body + "# another copy\n"})
    monkeypatch.chdir(tmp_path)
    sys.path.insert(0, str(src))
    spec, out = "hs9pkg.rw:fn", tmp_path / "run"
    run = killed_run(out, spec)
    file, sha = (src / "hs9pkg/rw.py").resolve(), _sha(src / "hs9pkg/rw.py")
    now = (other / "hs9pkg/rw.py").resolve()
    sys.path.insert(0, str(other))  # found before src, which is still on sys.path
    _forget(spec, tmp_path)
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{out} cannot be resumed: reward 'hs9pkg.rw:fn' resolves to {now}, not to {file} as when the run started "
        f"(path moved) and the file differs (sha256 {sha[:12]} then, {_sha(now)[:12]} now), so its remaining updates "
        f"would train another reward than its first ones; restore the reward file as it was ({file}, sha256 "
        f"{sha[:12]}) or make the name find it first (its package root {src.resolve()} is on sys.path, after {now}: "
        "remove or rename that copy), or run from the directory the run was started in, or start a new run under a "
        f"new --out (not {out}); nothing was loaded or written")
