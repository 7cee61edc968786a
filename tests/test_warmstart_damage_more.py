"""More damaged warm-start builds, from a trial user: a cached tier whose ``warmstart.json`` is damaged was loaded as
the tiny model without a word (1); a cache folder lacking only ``warmstart.json`` was called "not a tier build;
choose another folder", ``--force`` or not (2); a plain run that reused a build left the temporary folder of a
SIGKILLed ``--force`` rebuild beside it (3); a truncated ``model.safetensors`` was first warned of as a rebuild with
other weights, then reported as damaged (4). (The lock file stays 0666 on purpose: a cache shared between users,
``tests/test_warmstart_leftovers_lock.py``.)

No tier is built: the shipped tier folder is copied into ``GRADPROBE_CACHE`` under ``tmp_path``, and where a build
would run, ``gradprobe.warmstart._build_into`` is replaced by a copy of the shipped tier's files
(tests/helpers_warmstart.py), as in tests/test_warmstart_defects.py.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from gradprobe import tiers, warmstart
from gradprobe.models import RebuiltTierWarning, TierDamagedError, load_policy

from helpers_warmstart import SHIPPED, fake_build, run_warmstart as _run


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))


def _cached_copy() -> Path:
    return Path(shutil.copytree(SHIPPED, tiers.cache_root() / SHIPPED.name))


def _snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _no_build(*args, **kwargs):
    raise AssertionError("a build was started")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _OR_DELETE(cached: Path) -> str:  # noqa: N802 - a tester: the fix offered only a minutes-long --force rebuild
    return f", or delete {cached} to load the shipped build {SHIPPED} again (a cache build takes precedence)"


def _warmstart_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "gradprobe.warmstart"]


# ----------------------------------------------------------------------------- 1: a damaged warmstart.json at load

RECORDS = {  # id -> (what warmstart.json holds, the words of the message after the file's name)
    "cut": ('{"format', "is damaged (not valid JSON: Unterminated string starting at: line 1 column 2 (char 1))"),
    "list": ("[]", "is damaged (it holds a JSON list, not an object)"),
    "no hash": ('{"tier": "tiny", "seed": 0}', "is damaged (no 'config_hash')"),
}


@pytest.mark.parametrize("record", list(RECORDS))
def test_the_alias_refuses_a_cached_build_with_a_damaged_record(record):
    text, words = RECORDS[record]
    cached = _cached_copy()
    (cached / "warmstart.json").write_text(text)
    assert tiers.tier_path("tiny") == cached  # the cache takes precedence: the damaged build was used silently
    with warnings.catch_warnings(record=True) as seen, pytest.raises(TierDamagedError) as err:
        warnings.simplefilter("always")
        load_policy("tiny")
    assert str(err.value) == (f"the tier in {cached} is damaged: {cached / 'warmstart.json'} {words}; rebuild it "
                              f"with `gradprobe warmstart --tier tiny --force`{_OR_DELETE(cached)}")
    assert [w for w in seen if issubclass(w.category, RebuiltTierWarning)] == []


def test_a_cache_build_loaded_by_path_needs_its_record():
    cached = _cached_copy()
    (cached / "warmstart.json").unlink()
    with pytest.raises(TierDamagedError) as err:
        load_policy(str(cached))
    assert str(err.value) == (f"the tier in {cached} is damaged: {cached / 'warmstart.json'} is missing; rebuild it "
                              f"with `gradprobe warmstart --tier tiny --force`{_OR_DELETE(cached)}")


def test_a_damaged_record_of_another_tier_names_that_tier():
    shipped = tiers.shipped_root() / "tiny-llama-sft-dd5c45615d25"
    cached = Path(shutil.copytree(shipped, tiers.cache_root() / shipped.name))
    (cached / "warmstart.json").write_text('{"format')
    with pytest.raises(TierDamagedError) as err:
        load_policy(str(cached))
    assert str(err.value).endswith(f"; rebuild it with `gradprobe warmstart --tier tiny-llama-sft --force`, or delete "
                                   f"{cached} to load the shipped build {shipped} again (a cache build takes "
                                   "precedence)")


def test_a_folder_outside_the_cache_loads_without_a_record(tmp_path):
    """The builder loads its hidden temporary folder before it writes ``warmstart.json``; a folder of one's own that
    holds a tier without its record is not refused either (a damaged record there is, by the rule above)."""
    folder = Path(shutil.copytree(SHIPPED, tmp_path / "tier"))
    (folder / "warmstart.json").unlink()
    assert load_policy(str(folder)).model.num_parameters() > 0
    (folder / "warmstart.json").write_text('{"format')
    with pytest.raises(TierDamagedError, match=r"warmstart.json is damaged \(not valid JSON: .* --out .* --force`$"):
        load_policy(str(folder))


# ----------------------------------------------------------------------------- 4: damage before the rebuild warning

def test_cut_weights_in_the_cache_are_reported_without_the_rebuild_warning():
    cached = _cached_copy()
    weights = cached / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with warnings.catch_warnings(record=True) as seen, pytest.raises(TierDamagedError) as err:
        warnings.simplefilter("always")
        load_policy("tiny")
    assert str(err.value).startswith(f"the tier in {cached} is damaged: {weights} is damaged (")
    assert str(err.value).endswith(f"; rebuild it with `gradprobe warmstart --tier tiny --force`{_OR_DELETE(cached)}")
    assert [str(w.message) for w in seen if issubclass(w.category, RebuiltTierWarning)] == []


# ----------------------------------------------------------------------------- 2: a build without warmstart.json

def test_the_default_cache_rebuilds_a_build_without_its_record(monkeypatch, capsys, caplog):
    cached = _cached_copy()
    (cached / "warmstart.json").unlink()
    calls = []
    monkeypatch.setattr(warmstart, "_build_into", fake_build(calls))
    with caplog.at_level(logging.WARNING, logger="gradprobe.warmstart"):
        rc, out, err = _run(["--no-progress"], capsys)
    assert rc == 0 and err == "" and len(calls) == 1, err
    assert out.startswith(f"tier tiny (seed 0): {cached}\n") and ", built in " in out
    assert _warmstart_lines(caplog) == [f"{cached / 'warmstart.json'} is missing; rebuilding the cached tier build in "
                                        f"{cached}"]
    assert _snapshot(cached) == _snapshot(SHIPPED)
    assert sorted(p.name for p in cached.parent.iterdir()) == [cached.name]


def test_force_replaces_a_cached_build_without_its_record(monkeypatch, capsys):
    cached = _cached_copy()
    (cached / "warmstart.json").unlink()
    calls = []
    monkeypatch.setattr(warmstart, "_build_into", fake_build(calls))
    rc, out, err = _run(["--force", "--no-progress"], capsys)
    assert rc == 0 and err == "" and len(calls) == 1, err
    assert _snapshot(cached) == _snapshot(SHIPPED)


def test_an_out_folder_without_its_record_is_refused_naming_force_then_replaced(tmp_path, monkeypatch, capsys):
    out_dir = Path(shutil.copytree(SHIPPED, tmp_path / "tier"))
    (out_dir / "warmstart.json").unlink()
    before = _snapshot(out_dir)
    monkeypatch.setattr(warmstart, "_build_into", _no_build)
    rc, out, err = _run(["--out", str(out_dir), "--no-progress"], capsys)
    assert rc == 2 and out == ""
    assert err == (f"gradprobe warmstart: error: {out_dir / 'warmstart.json'} is missing: {out_dir} holds a damaged "
                   "tier build; rebuild it with --force (force=True), delete the folder, or choose another folder "
                   "for --out\n")
    assert _snapshot(out_dir) == before
    calls = []
    monkeypatch.setattr(warmstart, "_build_into", fake_build(calls))
    rc, out, err = _run(["--out", str(out_dir), "--force", "--no-progress"], capsys)
    assert rc == 0 and err == "" and len(calls) == 1, err
    assert _snapshot(out_dir) == _snapshot(SHIPPED)


@pytest.mark.parametrize("force", [False, True])
def test_force_never_replaces_a_folder_that_is_not_a_build(tmp_path, monkeypatch, capsys, force):
    out_dir = Path(shutil.copytree(SHIPPED, tmp_path / "mine"))
    (out_dir / "warmstart.json").unlink()
    (out_dir / "notes.txt").write_text("my notes")  # a tier's files and the user's own: not deleted
    before = _snapshot(out_dir)
    monkeypatch.setattr(warmstart, "_build_into", _no_build)
    rc, out, err = _run(["--out", str(out_dir), "--no-progress"] + (["--force"] if force else []), capsys)
    assert rc == 2 and err == (f"gradprobe warmstart: error: {out_dir} exists and is not a tier build (it holds "
                               "chat_template.jinja, config.json, generation_config.json, gradprobe_tier.json, "
                               "model.safetensors and 3 more, no warmstart.json); choose another folder for --out\n")
    assert _snapshot(out_dir) == before


def test_a_folder_in_the_cache_that_is_no_build_is_refused_naming_the_fix(monkeypatch, capsys):
    target = tiers.cache_root() / SHIPPED.name
    target.mkdir(parents=True)
    (target / "data.csv").write_text("a,b\n")
    monkeypatch.setattr(warmstart, "_build_into", _no_build)
    rc, out, err = _run(["--force", "--no-progress"], capsys)
    assert rc == 2 and err == (f"gradprobe warmstart: error: {target} exists and is not a tier build (it holds "
                               "data.csv, no warmstart.json); move it away (it was not written by gradprobe "
                               "warmstart), or set GRADPROBE_CACHE to another folder\n")
    assert (target / "data.csv").read_text() == "a,b\n"


def test_a_warmstart_json_that_is_a_folder_is_named_as_such(monkeypatch, capsys):
    """A tester: a build whose ``warmstart.json`` is a folder was called "not a tier build" by ``warmstart`` (and its
    record "missing" at load)."""
    cached = _cached_copy()
    (cached / "warmstart.json").unlink()
    (cached / "warmstart.json").mkdir()
    with pytest.raises(TierDamagedError) as err:
        load_policy(str(cached))
    assert str(err.value).startswith(f"the tier in {cached} is damaged: {cached / 'warmstart.json'} is a folder, not "
                                     "the build's record file; rebuild it with")
    monkeypatch.setattr(warmstart, "_build_into", _no_build)
    rc, out, err = _run(["--no-progress"], capsys)
    assert rc == 2 and err == (f"gradprobe warmstart: error: {cached / 'warmstart.json'} is a folder, not the build's "
                               f"record file: {cached} holds a damaged tier build; remove that folder, then rebuild "
                               "with --force (force=True)\n")


# ----------------------------------------------------------------------------- 3: leftovers on the reuse path

def test_a_reused_build_removes_the_leftovers_of_a_killed_rebuild(monkeypatch, capsys, caplog):
    cached = _cached_copy()
    dead = _dead_pid()
    tmp = cached.parent / f".{cached.name}.tmp-{dead}-0123abcd"  # a SIGKILLed `warmstart --force`
    old = cached.parent / f".{cached.name}.old-{dead}-89abcdef"
    for path in (tmp, old):
        path.mkdir()
        (path / "config.json").write_text("{}")
    monkeypatch.setattr(warmstart, "_build_into", _no_build)
    with caplog.at_level(logging.WARNING, logger="gradprobe.warmstart"):
        rc, out, err = _run(["--no-progress"], capsys)
    assert rc == 0 and "reused an earlier build" in out, err
    assert sorted(p.name for p in cached.parent.iterdir()) == [cached.name]
    assert _warmstart_lines(caplog) == [
        f"removed {old}: an earlier build it was replacing left by process {dead}, which no longer runs (it was "
        "killed mid-build)",
        f"removed {tmp}: an unfinished tier build left by process {dead}, which no longer runs (it was killed "
        "mid-build)"]


def test_a_reused_build_keeps_the_temp_folder_of_a_live_build(monkeypatch):
    cached = _cached_copy()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        tmp = cached.parent / f".{cached.name}.tmp-{live.pid}-0123abcd"
        tmp.mkdir()
        monkeypatch.setattr(warmstart, "_build_into", _no_build)
        assert warmstart.build_or_reuse_tier("tiny", progress=False) == (cached, True)
        assert tmp.is_dir()
    finally:
        live.kill()
        live.wait()


def test_the_record_check_moved_to_models_keeps_warmstarts_names():
    """``gradprobe.warmstart.RECORD_FIELDS`` and :func:`gradprobe.warmstart.tier_record` still answer as before."""
    from gradprobe import models

    assert warmstart.RECORD_FIELDS is models.RECORD_FIELDS
    record = warmstart.tier_record(SHIPPED)
    assert record == json.loads((SHIPPED / "warmstart.json").read_text())


def test_a_damaged_rebuild_with_other_weights_is_not_offered_for_deletion():
    """A tester: a run started from a cache build with other weights than the shipped build; its warmstart.json cut,
    the error advised deleting the build, which lost the run's initial weights (its resume was then impossible)."""
    cached = _cached_copy()
    weights = bytearray((cached / "model.safetensors").read_bytes())
    weights[-100:] = bytes(100)  # a rebuild: other weights, still a loadable file
    (cached / "model.safetensors").write_bytes(bytes(weights))
    (cached / "warmstart.json").write_text('{"format')
    with pytest.raises(TierDamagedError) as err:
        load_policy("tiny")
    assert str(err.value).endswith("; rebuild it with `gradprobe warmstart --tier tiny --force`")
