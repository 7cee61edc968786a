"""A refused resume of a run whose plug-in reward file changed suggests "run from the directory the run was started
in" only where that would find the recorded file again: a trial user who edited only a comment of the reward, from
the directory the run started in, was told to run from that very directory. Checked on a run folder's record
(``config.json``'s ``reward_plugin`` beside a ``checkpoint.json``), before anything is loaded."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from gradprobe.training.errors import RunConfigMismatchError
from gradprobe.training.run_folder import check_reward_identity

REWARD = "def fn(prompts, completions, **kwargs):\n    return [1.0 for c in completions]\n"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run_folder(tmp_path: Path, spec: str, file: Path) -> Path:
    """A run folder to resume whose record says reward ``spec`` ran ``file`` (its content now)."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "checkpoint.json").write_text("{}")
    (out / "config.json").write_text(json.dumps({"run": {}, "reward_plugin": {
        "spec": spec, "file": str(file.resolve()), "sha256": _sha(file), "modules": {}}}))
    return out


def _refusal(out: Path, spec: str, file: Path) -> str:
    with pytest.raises(RunConfigMismatchError) as e:
        check_reward_identity(out, spec, {"file": str(file.resolve()), "sha256": _sha(file), "modules": {}})
    return str(e.value)


def test_a_comment_only_edit_in_the_start_directory_is_not_told_to_run_from_there(tmp_path, monkeypatch):
    w = tmp_path / "w"
    w.mkdir()
    (w / "rw.py").write_text(REWARD)
    monkeypatch.chdir(w)
    out, old = _run_folder(tmp_path, "rw.py:fn", w / "rw.py"), _sha(w / "rw.py")
    (w / "rw.py").write_text("# a comment\n" + REWARD)
    file = (w / "rw.py").resolve()
    assert _refusal(out, "rw.py:fn", w / "rw.py") == (
        f"{out} cannot be resumed: reward 'rw.py:fn' resolves to {file} as when the run started, but the file was "
        f"edited (sha256 {old[:12]} then, {_sha(file)[:12]} now), so its remaining updates would train another reward "
        f"than its first ones; restore the reward file as it was ({file}, sha256 {old[:12]}), or start a new run "
        f"under a new --out (not {out}); nothing was loaded or written")


def test_an_absolute_name_edited_is_not_told_to_run_from_elsewhere(tmp_path, monkeypatch):
    rw = tmp_path / "rw.py"
    rw.write_text(REWARD)
    spec, old = f"{rw.resolve()}:fn", _sha(rw)
    out = _run_folder(tmp_path, spec, rw)
    rw.write_text(REWARD + "# edited\n")
    monkeypatch.chdir(out)  # another directory: an absolute name finds the same file from anywhere
    message = _refusal(out, spec, rw)
    assert "run from" not in message
    assert message.endswith(f"then, {_sha(rw)[:12]} now), so its remaining updates would train another reward than "
                            f"its first ones; restore the reward file as it was ({rw.resolve()}, sha256 {old[:12]}), "
                            f"or start a new run under a new --out (not {out}); nothing was loaded or written")


def test_a_relative_name_that_finds_another_file_here_names_the_start_directory(tmp_path, monkeypatch):
    w, w2 = tmp_path / "w", tmp_path / "w2"
    (w / "sub").mkdir(parents=True), (w2 / "sub").mkdir(parents=True)
    (w / "sub" / "rw.py").write_text(REWARD)
    (w2 / "sub" / "rw.py").write_text(REWARD.replace("1.0", "2.0"))
    monkeypatch.chdir(w)
    out = _run_folder(tmp_path, "sub/rw.py:fn", w / "sub" / "rw.py")
    monkeypatch.chdir(w2)
    message = _refusal(out, "sub/rw.py:fn", w2 / "sub" / "rw.py")
    assert message.endswith(f"restore the reward file as it was ({(w / 'sub' / 'rw.py').resolve()}, sha256 "
                            f"{_sha(w / 'sub' / 'rw.py')[:12]}) or run from {w.resolve()}, the directory the run was "
                            f"started in, or start a new run under a new --out (not {out}); nothing was loaded or "
                            "written")
