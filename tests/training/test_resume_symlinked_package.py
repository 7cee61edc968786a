"""A ``pkg.mod:fn`` reward whose package folder is reached through a symbolic link (``src/pkg -> realpkg``) records
the package root it was imported under (config.json ``reward_plugin.package_root``: the recorded file is resolved,
``src/realpkg/rw.py``, so the root cannot be read from it), and a resume that cannot import it names that root to
put back on PYTHONPATH (it said to put the file at ``<cwd>/pkg.rw``), or the link to restore. A plain package records
no ``package_root`` (its record is as before), a record from before the field resumes as before, and a damaged one is
refused naming the field."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from gradprobe.rewards.plugin import plugin_identity
from gradprobe.training.errors import DamagedRunFolderError, RunConfigMismatchError
from gradprobe.training.run import run_training

from helpers_rollout import one_thread
from helpers_training import killed_run, refused_before_loading
from plugin_helpers import forget_reward as _forget, plugin_records_restored, sha256_of as _sha

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

RW = "def fn(prompts, completions, **kwargs):\n    return [len(c) / 10 for c in completions]\n"


@pytest.fixture
def registry(monkeypatch, tmp_path):
    """The reward registry, sys.path and the plug-in's records restored after the test, and the modules it imported
    from tmp_path forgotten (:func:`plugin_helpers.plugin_records_restored`)."""
    with plugin_records_restored(monkeypatch, tmp_path):
        yield


def _symlinked_package(root: Path, name: str) -> tuple[Path, Path]:
    """``root/src/<name>real/{__init__,rw}.py`` and the link ``root/src/<name> -> <name>real``: (src, real folder)."""
    src, real = root / "src", root / "src" / f"{name}real"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("")
    (real / "rw.py").write_text(RW)
    (src / name).symlink_to(f"{name}real", target_is_directory=True)
    return src, real


def test_a_symlinked_package_off_pythonpath_is_told_its_package_root(tmp_path, registry, monkeypatch, capsys):
    src, real = _symlinked_package(tmp_path, "rsp1pkg")
    other = tmp_path / "other"
    (other / "rsp1pkg").mkdir(parents=True)
    (other / "rsp1pkg/__init__.py").write_text("")
    (other / "rsp1pkg/rw.py").write_text(RW + "# another copy\n")
    monkeypatch.chdir(tmp_path)
    spec, out = "rsp1pkg.rw:fn", tmp_path / "run"
    sys.path.insert(0, str(src))  # PYTHONPATH=src when the run started
    run = killed_run(out, spec)
    file, sha = (real / "rw.py").resolve(), _sha(real / "rw.py")
    config = json.loads((out / "config.json").read_text())
    assert config["reward_plugin"] == {"spec": spec, "file": str(file), "sha256": sha,
                                       "modules": {"__init__.py": _sha(real / "__init__.py")},
                                       "package_root": str(src)}
    restart = f"or start a new run under a new --out (not {out}); nothing was loaded or written"
    unknown = (f"{out} cannot be resumed: reward 'rsp1pkg.rw:fn': no module named 'rsp1pkg' (from {tmp_path}); "
               "write it as MODULE:FUNCTION (a module importable from the working directory or sys.path) or "
               f"path/to/file.py:FUNCTION; the run started with it from {file} (sha256 {sha[:12]}): to resume, ")
    sys.path.remove(str(src))  # resumed without it: the module cannot be imported
    _forget(spec, tmp_path)
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{unknown}put its package root {src} back on PYTHONPATH (e.g. PYTHONPATH={src}), as when the run started, "
        f"or run from the directory the run was started in, {restart}")
    sys.path.insert(0, str(other))  # another copy of the package found instead
    _forget(spec, tmp_path)
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{out} cannot be resumed: reward 'rsp1pkg.rw:fn' resolves to {(other / 'rsp1pkg/rw.py').resolve()}, not to "
        f"{file} as when the run started (path moved) and the file differs (sha256 {sha[:12]} then, "
        f"{_sha(other / 'rsp1pkg/rw.py')[:12]} now), so its remaining updates would train another reward than its "
        f"first ones; restore the reward file as it was ({file}, sha256 {sha[:12]}) or put its package root "
        f"{src} back on PYTHONPATH, or run from the directory the run was started in, {restart}")
    sys.path.remove(str(other))
    (src / "rsp1pkg").unlink()  # the link gone, the root on the path or not: the link is what to restore
    for on_path, back in ((False, f", and put its package root {src} back on PYTHONPATH (e.g. PYTHONPATH={src})"),
                          (True, "")):
        if on_path:
            sys.path.insert(0, str(src))
        _forget(spec, tmp_path)
        assert refused_before_loading(run, out, RunConfigMismatchError) == (
            f"{unknown}restore {src / 'rsp1pkg/rw.py'} (the path the run imported it by, through a symbolic link) so "
            f"that it leads to {file} again{back}, or run from the directory the run was started in, {restart}")
    (src / "rsp1pkg").symlink_to("rsp1pkgreal", target_is_directory=True)
    # a record from before package_root: refused as before, then resumed by the fix
    old = {**config, "reward_plugin": {k: v for k, v in config["reward_plugin"].items() if k != "package_root"}}
    (out / "config.json").write_text(json.dumps(old))
    sys.path.remove(str(src))
    _forget(spec, tmp_path)
    assert refused_before_loading(run, out, RunConfigMismatchError) == (
        f"{unknown}put that file (the same content, sha256 {sha[:12]}) at {tmp_path / 'rsp1pkg.rw'}, {restart}")
    for bad in (5, "src", ["/x"]):  # a damaged package_root: refused naming the field
        damaged = {**config, "reward_plugin": {**config["reward_plugin"], "package_root": bad}}
        (out / "config.json").write_text(json.dumps(damaged))
        assert refused_before_loading(run, out, DamagedRunFolderError) == (
            f"{out / 'config.json'} is damaged (field reward_plugin.package_root is {json.dumps(bad)}, not a folder's "
            "absolute path (text)): the package root the reward was imported under cannot be named; restore the file "
            f"from a copy, or delete {out} to start the run over")
    (out / "config.json").write_text(json.dumps(old))
    sys.path.insert(0, str(src))  # the fix
    _forget(spec, tmp_path)
    capsys.readouterr()
    summary = run_training(run, out)
    assert summary["completed"] and summary["updates"] == 2 and summary["resumed_from_update"] == [1]
    assert [x for x in capsys.readouterr().err.splitlines() if x.startswith("note:")] == []


def test_only_a_package_reached_through_a_link_records_its_root(tmp_path, registry):
    src, real = _symlinked_package(tmp_path, "rsp2pkg")
    spec = "rsp2pkg.rw:fn"
    sys.path.insert(0, str(src))
    assert plugin_identity(spec)["package_root"] == str(src)
    _forget(spec, tmp_path)  # a new process that finds a plain copy of the package: the record is as before
    shutil.copytree(real, tmp_path / "plain" / "rsp2pkg")
    sys.path[0] = str(tmp_path / "plain")
    assert plugin_identity(spec) == {"spec": spec, "file": str((tmp_path / "plain/rsp2pkg/rw.py").resolve()),
                                     "sha256": _sha(real / "rw.py"),
                                     "modules": {"__init__.py": _sha(real / "__init__.py")}}
    (tmp_path / "files").mkdir()  # a FILE.py:fn reward through a linked folder: none either
    (tmp_path / "files/rsp2_rw.py").write_text(RW)
    (tmp_path / "filelink").symlink_to("files", target_is_directory=True)
    assert "package_root" not in plugin_identity(f"{tmp_path / 'filelink/rsp2_rw.py'}:fn")
