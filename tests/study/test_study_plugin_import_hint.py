"""A study whose ``pkg.mod:fn`` plug-in reward cannot be imported because its package is off ``sys.path`` is told,
before its folder is written, to put the package root on PYTHONPATH (named when it lies beside the plan) or to run
from the directory holding the package, as a training run's resume says. Before, the preflight said only "fix the
module or the name"; a package that is found but lacks the module keeps that fix (the path is not the problem)."""

from __future__ import annotations

import sys

import pytest

from gradprobe.study.preflight import PreflightError
from gradprobe.study.runner import run_study

from helpers_training import tiny_plan
from plugin_helpers import plugin_module

FN = "def fn(prompts, completions, **kwargs):\n    return [float(len(c) % 2) for c in completions]\n"
FORMS = ("write it as MODULE:FUNCTION (a module importable from the working directory or sys.path) or "
         "path/to/file.py:FUNCTION")
CHECKED = "(checked before the study folder was written; nothing was)"


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    """A working directory ``tmp_path/work`` that does not hold the package; the registry, plug-in origins and
    sys.path restored after (:func:`plugin_module`), and the test's packages forgotten."""
    (tmp_path / "work").mkdir()
    with plugin_module(tmp_path / "work", monkeypatch, "gpih_unused", ""):
        yield tmp_path / "work"
    for name in [k for k in sys.modules if k.split(".")[0] in ("gpih1pkg", "gpih2pkg", "gpih3pkg")]:
        del sys.modules[name]


def _refusal(plan_path, out) -> str:
    with pytest.raises(PreflightError) as e:
        run_study(plan_path, out, executor="inline", probe=False, analyze=False)
    assert not out.exists()  # refused before the folder was written
    return str(e.value)


def _project(root, pkg: str):
    (root / pkg).mkdir(parents=True)
    (root / pkg / "__init__.py").write_text("")
    (root / pkg / "rw.py").write_text(FN)


def test_a_package_beside_the_plan_off_sys_path_names_its_root_for_pythonpath(tmp_path, cwd):
    proj = tmp_path / "proj"
    _project(proj, "gpih1pkg")
    plan = proj / "plans" / "plan.toml"  # the root is found above the plan's folder
    plan.parent.mkdir()
    plan.write_text(tiny_plan(arm="plug", reward="gpih1pkg.rw:fn"))
    assert _refusal(plan, tmp_path / "study") == (
        f"[arms.plug] reward: reward 'gpih1pkg.rw:fn': no module named 'gpih1pkg' (from {cwd}); {FORMS}; its "
        f"package 'gpih1pkg' is not on sys.path: put its package root {proj} on PYTHONPATH (e.g. PYTHONPATH={proj} "
        f"gradprobe study ...), or run from {proj}, the directory holding 'gpih1pkg' {CHECKED}")
    sys.path.insert(0, str(proj))  # the fix named: PYTHONPATH=proj
    from gradprobe.study.preflight import _check_rewards
    from gradprobe.training.plan import load_plan

    _check_rewards(load_plan(plan))  # the reward now loads
    plan.write_text(tiny_plan(arm="plug", reward="gpih1pkg.nope:fn"))  # found, but not the module: not a path problem
    assert _refusal(plan, tmp_path / "study") == (
        f"[arms.plug] reward: reward 'gpih1pkg.nope:fn': no module named 'gpih1pkg.nope' (from {cwd}); {FORMS}; fix "
        f"the module or the name {CHECKED}")


def test_a_src_layout_and_a_package_found_nowhere_are_told_the_fix(tmp_path, cwd):
    src = cwd / "src"
    _project(src, "gpih2pkg")
    plan = tmp_path / "plans" / "plan.toml"
    plan.parent.mkdir()
    plan.write_text(tiny_plan(arm="plug", reward="gpih2pkg.rw:fn"))
    assert _refusal(plan, tmp_path / "study") == (
        f"[arms.plug] reward: reward 'gpih2pkg.rw:fn': no module named 'gpih2pkg' (from {cwd}); {FORMS}; its "
        f"package 'gpih2pkg' is not on sys.path: put its package root {src} on PYTHONPATH (e.g. PYTHONPATH={src} "
        f"gradprobe study ...), or run from {src}, the directory holding 'gpih2pkg' {CHECKED}")
    plan.write_text(tiny_plan(arm="plug", reward="gpih3pkg.rw:fn"))
    assert _refusal(plan, tmp_path / "study") == (
        f"[arms.plug] reward: reward 'gpih3pkg.rw:fn': no module named 'gpih3pkg' (from {cwd}); {FORMS}; its "
        "package 'gpih3pkg' is not on sys.path: put its package root, the folder holding gpih3pkg/ (or gpih3pkg.py), "
        "on PYTHONPATH (e.g. PYTHONPATH=/path/to/root gradprobe study ...), or run from the directory holding "
        f"gpih3pkg/ {CHECKED}")
