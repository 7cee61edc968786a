"""``gradprobe warmstart``: the ``.<name>.tmp-<pid>-<hex>`` folder a SIGKILLed build leaves (removed by the next
build once its process is dead, never while it lives), two builds into one folder at once (the second refused at
once, naming the first's pid; a dead holder's lock does not block), the printed line of a reused build (it read as
a fresh build's time) and the mode of ``model.safetensors`` (0600 while the other files are 0644).

No tier is built: ``gradprobe.warmstart._build_into`` is replaced by a copy of the shipped tier's files, as in
tests/test_warmstart_defects.py.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gradprobe import tiers, warmstart

from helpers_warmstart import SHIPPED, fake_build, run_warmstart as _run



@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# ----------------------------------------------------------------------------- 1: leftovers of a killed build

def test_a_rerun_removes_the_temp_folder_of_a_killed_build_and_says_so(tmp_path, monkeypatch, caplog):
    out = tmp_path / "tier_s1"
    dead = _dead_pid()
    leftover = tmp_path / f".tier_s1.tmp-{dead}-0123abcd"
    leftover.mkdir()
    (leftover / "config.json").write_text("{}")
    calls = []
    monkeypatch.setattr(warmstart, "_build_into", fake_build(calls))
    with caplog.at_level(logging.WARNING, logger="gradprobe.warmstart"):
        assert warmstart.build_tier("tiny", seed=1, out=out, progress=False) == out
    assert len(calls) == 1 and not leftover.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tier_s1"]
    lines = [r.getMessage() for r in caplog.records if r.name == "gradprobe.warmstart"]
    assert lines == [f"removed {leftover}: an unfinished tier build left by process {dead}, which no longer runs "
                     "(it was killed mid-build)"]


_CLI_FAKE_BUILD = textwrap.dedent("""
    import json, shutil, sys
    from gradprobe import tiers, warmstart
    from gradprobe.cli import main
    shipped = tiers.shipped_root() / "tiny-ef0cbbe61f4b"
    def build(folder, config, seed, progress, name="tiny"):
        for f in shipped.iterdir():
            if f.name != "warmstart.json":
                shutil.copy(f, folder / f.name)
        return json.loads((shipped / "warmstart.json").read_text())
    warmstart._build_into = build
    sys.exit(main(sys.argv[1:]))
""")


def test_the_cli_names_the_removed_leftover_on_stderr(tmp_path):
    """The real command (logging as ``gradprobe`` sets it up, in a process of its own): one line on stderr."""
    out = tmp_path / "tier_s1"
    dead = _dead_pid()
    leftover = tmp_path / f".tier_s1.tmp-{dead}-0123abcd"
    leftover.mkdir()
    env = {**os.environ, "GRADPROBE_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", _CLI_FAKE_BUILD, "warmstart", "--tier", "tiny", "--seed", "1",
                           "--out", str(out), "--no-progress"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and not leftover.exists(), done.stderr
    assert done.stderr == (f"WARNING gradprobe.warmstart: removed {leftover}: an unfinished tier build left by process "
                           f"{dead}, which no longer runs (it was killed mid-build)\n")
    assert done.stdout.startswith(f"tier tiny (seed 1): {out}\n") and ", built in " in done.stdout


def test_a_live_builds_temp_folder_and_other_names_are_kept(tmp_path, monkeypatch):
    out = tmp_path / "tier_s1"
    dead = _dead_pid()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        keep = [tmp_path / f".tier_s1.tmp-{live.pid}-0123abcd",  # a build still running in another process
                tmp_path / f".tier_s1.tmp-{os.getpid()}-0123abcd",  # this process's own
                tmp_path / f".tier_s2.tmp-{dead}-0123abcd",  # another target's
                tmp_path / f".tier_s1.tmp-{dead}-notahex!",  # not a name this writes
                tmp_path / ".tier_s1.tmp-0-0123abcd"]  # pid 0: os.kill(0, 0) signals the process group
        for path in keep:
            path.mkdir()
        removed = tmp_path / f".tier_s1.tmp-{dead}-89abcdef"
        removed.mkdir()
        monkeypatch.setattr(warmstart, "_build_into", fake_build([]))
        warmstart.build_tier("tiny", seed=1, out=out, progress=False)
        assert all(p.is_dir() for p in keep) and not removed.exists()
    finally:
        live.kill()
        live.wait()


def test_a_process_of_another_user_counts_as_alive(monkeypatch, tmp_path):
    def kill(pid, sig):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(warmstart.os, "kill", kill)
    assert warmstart._alive(12345) is True
    (tmp_path / ".t.tmp-12345-0123abcd").mkdir()
    assert warmstart._remove_dead_leftovers(tmp_path / "t") == []
    assert (tmp_path / ".t.tmp-12345-0123abcd").is_dir()


# ----------------------------------------------------------------------------- 2: two builds at once

_HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from gradprobe.warmstart import _BuildLock
    lock = _BuildLock(Path(sys.argv[1]), "out (--out) " + sys.argv[1], "choose another folder for --out",
                      explicit=True)
    print("held", flush=True)
    time.sleep(60)
""")


def test_a_second_build_into_the_same_out_is_refused_at_once(tmp_path, monkeypatch, capsys):
    out = tmp_path / "tier_s1"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        calls = []
        monkeypatch.setattr(warmstart, "_build_into", fake_build(calls))
        rc, stdout, err = _run(["--seed", "1", "--out", str(out), "--no-progress"], capsys)
    finally:
        holder.kill()
        holder.wait()
    assert rc == 2 and calls == [] and stdout == "" and not out.exists()
    assert err == (f"gradprobe warmstart: error: out (--out) {out} is being built by another process "
                   f"(pid {holder.pid}, holding the lock {tmp_path / '.tier_s1.lock'}); wait for it to finish, then "
                   "run this command again (it reuses that build), or choose another folder for --out\n")
    assert not any(".tmp-" in p.name for p in tmp_path.iterdir())


def test_the_lock_of_a_killed_build_does_not_block(tmp_path, monkeypatch):
    out = tmp_path / "tier_s1"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(out)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.kill()  # SIGKILL: its lock file stays, with its pid in it
    holder.wait()
    assert (tmp_path / ".tier_s1.lock").read_text() == f"pid {holder.pid}"
    calls = []
    monkeypatch.setattr(warmstart, "_build_into", fake_build(calls))
    assert warmstart.build_tier("tiny", seed=1, out=out, progress=False) == out and len(calls) == 1
    assert not (tmp_path / ".tier_s1.lock").exists()  # released and removed


def test_the_lock_is_held_during_the_build_and_released_after_an_error(tmp_path, monkeypatch):
    out = tmp_path / "tier_s1"
    lock = tmp_path / ".tier_s1.lock"
    seen = []

    def check(folder):
        seen.append(lock.read_text())
        with pytest.raises(warmstart.TierBuildBusyError, match=rf"\(pid {os.getpid()}, holding the lock {lock}\)"):
            warmstart._BuildLock(out, f"out (--out) {out}", "choose another folder for --out", explicit=True)
        raise RuntimeError("SFT loss is not finite")

    monkeypatch.setattr(warmstart, "_build_into", fake_build([], check=check))
    with pytest.raises(RuntimeError, match="SFT loss is not finite"):
        warmstart.build_tier("tiny", seed=1, out=out, progress=False)
    assert seen == [f"pid {os.getpid()}"] and not lock.exists() and list(tmp_path.iterdir()) == []
    monkeypatch.setattr(warmstart, "_build_into", fake_build([]))
    assert warmstart.build_tier("tiny", seed=1, out=out, progress=False) == out  # not blocked by the failed build


def test_the_default_cache_names_the_fix_without_out(tmp_path):
    target = tiers.cache_root() / "tiny-abc"
    target.parent.mkdir(parents=True)
    first = warmstart._BuildLock(target, f"the tier folder {target}", "", explicit=False)
    try:
        with pytest.raises(warmstart.TierBuildBusyError) as err:
            warmstart._BuildLock(target, f"the tier folder {target}", "", explicit=False)
    finally:
        first.release()
    assert isinstance(err.value, RuntimeError)
    assert str(err.value).endswith("(it reuses that build), or build into a folder of your own with --out DIR")


def test_the_lock_file_is_shared_between_users_and_a_read_only_one_still_locks(tmp_path):
    """A reviewer: the lock file was created 0644 by ``open(..., "a+")``, so on a cache shared between users another
    user could not open it (while it was held, or after a killed build left it) and got "cannot be created"."""
    target = tmp_path / "tiny-abc"
    first = warmstart._BuildLock(target, f"the tier folder {target}", "", explicit=False)
    try:
        assert (first.path.stat().st_mode & 0o777) == 0o666 and first.path.read_text() == f"pid {os.getpid()}"
    finally:
        first.release()
    first.path.write_text("pid 1")  # left by a killed build of another user, who alone may write it
    first.path.chmod(0o444)
    lock = warmstart._BuildLock(target, f"the tier folder {target}", "", explicit=False)
    try:  # as root the file opens read-write anyway; a non-root user gets the read-only fallback: either locks
        with pytest.raises(warmstart.TierBuildBusyError):
            warmstart._BuildLock(target, f"the tier folder {target}", "", explicit=False)
    finally:
        lock.release()


# ----------------------------------------------------------------------------- 3: a reused build's line

def test_reusing_a_finished_build_says_so(tmp_path, monkeypatch, capsys):
    out = tmp_path / "tier"
    shutil.copytree(SHIPPED, out)
    seconds = json.loads((SHIPPED / "warmstart.json").read_text())["seconds"]
    monkeypatch.setattr(warmstart, "_build_into", fake_build([]))
    rc, stdout, err = _run(["--out", str(out), "--no-progress"], capsys)
    assert rc == 0 and err == ""
    assert f", reused an earlier build (which took {seconds:.0f} s; --force rebuilds it)\n" in stdout
    assert "built in" not in stdout
    rc, stdout, err = _run(["--out", str(out), "--force", "--no-progress"], capsys)
    assert rc == 0 and f", built in {seconds:.0f} s\n" in stdout and "reused" not in stdout


def test_build_or_reuse_tier_says_which(tmp_path, monkeypatch):
    monkeypatch.setattr(warmstart, "_build_into", fake_build([]))
    out = tmp_path / "tier"
    assert warmstart.build_or_reuse_tier("tiny", out=out, progress=False) == (out, False)
    assert warmstart.build_or_reuse_tier("tiny", out=out, progress=False) == (out, True)


# ----------------------------------------------------------------------------- 4: file modes

def test_model_safetensors_gets_the_umask_mode_of_the_other_files(tmp_path, monkeypatch):
    import torch
    from safetensors.torch import save_file

    def build(folder, config, seed, progress, name="tiny"):
        (folder / "config.json").write_text("{}")
        save_file({"w": torch.zeros(2)}, str(folder / "model.safetensors"))  # 0600 (safetensors 0.8)
        return json.loads((SHIPPED / "warmstart.json").read_text())

    monkeypatch.setattr(warmstart, "_build_into", build)
    old = os.umask(0o027)
    try:
        warmstart.build_tier("tiny", out=tmp_path / "tier", progress=False)
    finally:
        os.umask(old)
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in (tmp_path / "tier").iterdir()}
    assert modes == {"config.json": "0o640", "model.safetensors": "0o640", "warmstart.json": "0o640"}


def test_an_earlier_build_left_by_a_killed_install_is_removed(tmp_path, caplog):
    """_install renames the earlier build to ``.NAME.old-PID-HEX`` before putting the new one in place; a kill before
    its removal left it beside the tier forever (it had no pid to tell a dead installer from a live one)."""
    dead = _dead_pid()
    old = tmp_path / f".t.old-{dead}-0123abcd"
    (old / "sub").mkdir(parents=True)
    live = tmp_path / f".t.old-{os.getpid()}-0123abcd"
    live.mkdir()
    with caplog.at_level("WARNING", logger="gradprobe.warmstart"):
        assert warmstart._remove_dead_leftovers(tmp_path / "t") == [old]
    assert not old.exists() and live.is_dir()
    assert caplog.messages == [f"removed {old}: an earlier build it was replacing left by process {dead}, which no "
                               "longer runs (it was killed mid-build)"]
    target, tmp = tmp_path / "u", tmp_path / ".u.tmp"
    target.mkdir()
    tmp.mkdir()
    (tmp / "new").write_text("x")
    warmstart._install(tmp, target)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".u")] == [] and (target / "new").is_file()
