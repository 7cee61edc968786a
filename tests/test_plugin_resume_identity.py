"""A run with a plug-in reward records which code its name found (the module's file and sha256, config.json's
``reward_plugin``) and refuses to resume with other code: the file edited, or the same relative name run from
another directory. The same file named by its absolute path resumes from any directory; a run folder from before
the record resumes with one note; a built-in reward records nothing."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from gradprobe.rewards import REWARDS, get_reward
from gradprobe.rewards import plugin
from gradprobe.training import run as run_module
from gradprobe.training.errors import RunConfigMismatchError
from gradprobe.training.run import run_training

from helpers_rollout import one_thread
from helpers_training import killed_run

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

BREVITY = "def brevity(prompts, completions, **kwargs):\n    return [-len(c) / 10 for c in completions]\n"
LENGTH = "def brevity(prompts, completions, **kwargs):\n    return [len(c) / 10 for c in completions]\n"


@pytest.fixture
def registry(monkeypatch):
    """The reward registry and the plug-in's records restored after the test (which imports files of tmp_path)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    get_reward("outcome")  # built-ins registered first
    before, origins = dict(REWARDS), dict(plugin._ORIGINS)
    identities = dict(getattr(plugin, "_IDENTITIES", {}))
    yield
    for name in set(REWARDS) - set(before):
        del REWARDS[name]
    plugin._ORIGINS.clear()
    plugin._ORIGINS.update(origins)
    if hasattr(plugin, "_IDENTITIES"):
        plugin._IDENTITIES.clear()
        plugin._IDENTITIES.update(identities)


def _forget(spec: str, folder: Path) -> None:
    """Forget reward ``spec`` and the modules imported from ``folder``, as a new process would not know them."""
    REWARDS.pop(spec, None)
    for origin in [o for o, name in plugin._ORIGINS.items() if name == spec]:
        del plugin._ORIGINS[origin]
    getattr(plugin, "_IDENTITIES", {}).pop(spec, None)
    for name in [k for k, m in sys.modules.items() if k.startswith("gradprobe_user_rewards.")
                 and str(getattr(m, "__file__", "")).startswith(str(folder))]:
        del sys.modules[name]


def _resumed_notes(run, out: Path, capsys) -> list[str]:
    """Resume ``run`` in ``out`` to its end (checked: completed, 2 updates, resumed from update 1) and return the
    ``note:`` lines it printed on stderr."""
    capsys.readouterr()
    summary = run_training(run, out)
    assert summary["completed"] and summary["updates"] == 2 and summary["resumed_from_update"] == [1]
    return [x for x in capsys.readouterr().err.splitlines() if x.startswith("note:")]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_edited_or_moved_reward_file_is_refused_before_anything_is_loaded(tmp_path, registry, monkeypatch):
    w, w2 = tmp_path / "w", tmp_path / "w2"
    w.mkdir(), w2.mkdir()
    (w / "rw.py").write_text(BREVITY)
    (w2 / "rw.py").write_text(LENGTH)
    out, spec = tmp_path / "run", "rw.py:brevity"
    monkeypatch.chdir(w)
    run = killed_run(out, spec)
    first = str((w / "rw.py").resolve())
    old = _sha(w / "rw.py")
    assert json.loads((out / "config.json").read_text())["reward_plugin"] == {"spec": spec, "file": first,
                                                                                "sha256": old, "modules": {}}
    kept = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    restart = f"or start a new run under a new --out (not {out}); nothing was loaded or written"
    restore = f"restore the reward file as it was ({first}, sha256 {old[:12]})"
    # from another directory the start one is named (running there finds the recorded file again)
    fix = f"{restore} or run from {Path(first).parent}, the directory the run was started in, {restart}"
    # the same name from another directory, which holds another rw.py (the trial user's w2/)
    _forget(spec, tmp_path)
    monkeypatch.chdir(w2)
    with monkeypatch.context() as m:
        m.setattr(run_module, "_open_session", lambda *a, **k: pytest.fail("the policy was loaded before the refusal"))
        with pytest.raises(RunConfigMismatchError) as moved:
            run_training(run, out)
    other = str((w2 / "rw.py").resolve())
    assert str(moved.value) == (
        f"{out} cannot be resumed: reward 'rw.py:brevity' resolves to {other}, not to {first} as when the run started "
        f"(path moved) and the file differs (sha256 {old[:12]} then, {_sha(w2 / 'rw.py')[:12]} now), so its "
        f"remaining updates would train another reward than its first ones; {fix}")
    # the file edited between the kill and the resume
    _forget(spec, tmp_path)
    monkeypatch.chdir(w)
    (w / "rw.py").write_text(LENGTH + "\n")
    with monkeypatch.context() as m:
        m.setattr(run_module, "_open_session", lambda *a, **k: pytest.fail("the policy was loaded before the refusal"))
        with pytest.raises(RunConfigMismatchError) as edited:
            run_training(run, out)
    assert str(edited.value) == (
        f"{out} cannot be resumed: reward 'rw.py:brevity' resolves to {first} as when the run started, but the file "
        f"was edited (sha256 {old[:12]} then, {_sha(w / 'rw.py')[:12]} now), so its remaining updates would train "
        f"another reward than its first ones; {restore}, {restart}")  # already in the start directory: not said
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == kept  # nothing written
    # the fix the message names: the file as it was resumes the run
    _forget(spec, tmp_path)
    (w / "rw.py").write_text(BREVITY)
    summary = run_training(run, out)
    assert summary["completed"] and summary["updates"] == 2 and summary["resumed_from_update"] == [1]


def test_the_same_file_by_its_absolute_path_resumes_from_another_directory(tmp_path, registry, monkeypatch, capsys):
    w, elsewhere = tmp_path / "w", tmp_path / "elsewhere"
    w.mkdir(), elsewhere.mkdir()
    (w / "rw.py").write_text(BREVITY)
    (elsewhere / "rw.py").write_text(LENGTH)  # not the run's file: the name is absolute
    spec, out = f"{(w / 'rw.py').resolve()}:brevity", tmp_path / "run"
    monkeypatch.chdir(w)
    run = killed_run(out, spec)
    recorded = json.loads((out / "config.json").read_text())["reward_plugin"]
    assert recorded == {"spec": spec, "file": str((w / "rw.py").resolve()), "sha256": _sha(w / "rw.py"),
                        "modules": {}}
    _forget(spec, tmp_path)
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    summary = run_training(run, out)
    assert summary["completed"] and summary["updates"] == 2 and summary["resumed_from_update"] == [1]
    assert json.loads((out / "config.json").read_text())["reward_plugin"] == recorded
    assert "note:" not in capsys.readouterr().err


def test_a_run_folder_without_the_record_resumes_with_one_note(tmp_path, registry, monkeypatch, capsys):
    (tmp_path / "rw.py").write_text(BREVITY)
    spec, out = "rw.py:brevity", tmp_path / "run"
    monkeypatch.chdir(tmp_path)
    run = killed_run(out, spec)
    config = json.loads((out / "config.json").read_text())
    del config["reward_plugin"]  # as written before the record existed
    (out / "config.json").write_text(json.dumps(config))
    _forget(spec, tmp_path)
    notes = _resumed_notes(run, out, capsys)
    assert notes == [f"note: {out} was started before gradprobe recorded a plug-in reward's file and sha256, so "
                     f"whether reward 'rw.py:brevity' ({(tmp_path / 'rw.py').resolve()}, sha256 "
                     f"{_sha(tmp_path / 'rw.py')[:12]}) is the code it was trained with could not be checked; resuming"]
    assert "reward_plugin" not in json.loads((out / "config.json").read_text())  # the old folder is left as it was
    # a built-in reward: nothing recorded, nothing to note
    builtin = killed_run(tmp_path / "builtin", "outcome")
    recorded = sorted(json.loads((tmp_path / "builtin" / "config.json").read_text()))
    assert recorded == ["model_weights", "plan_sha256", "run", "versions"]  # no reward_plugin
    capsys.readouterr()
    assert run_training(builtin, tmp_path / "builtin")["resumed_from_update"] == [1]
    assert "note:" not in capsys.readouterr().err



def test_the_same_content_from_a_moved_folder_resumes_with_a_note(tmp_path, registry, monkeypatch, capsys):
    """A project moved (the reward file at another path, byte for byte the same) trains the same code: it resumes,
    saying where the reward is read from now."""
    w, moved = tmp_path / "w", tmp_path / "moved"
    w.mkdir(), moved.mkdir()
    (w / "rw.py").write_text(BREVITY)
    (moved / "rw.py").write_text(BREVITY)
    spec, out = "rw.py:brevity", tmp_path / "run"
    monkeypatch.chdir(w)
    run = killed_run(out, spec)
    _forget(spec, tmp_path)
    monkeypatch.chdir(moved)
    notes = _resumed_notes(run, out, capsys)
    assert notes == [f"note: reward 'rw.py:brevity' of {out} is read from {(moved / 'rw.py').resolve()}, not "
                     f"{(w / 'rw.py').resolve()} as when the run started, with the same content (sha256 "
                     f"{_sha(w / 'rw.py')[:12]}); resuming"]
