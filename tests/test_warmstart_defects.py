"""``gradprobe warmstart`` and the tier builder on bad input: damaged tier folders (reused before, then a
SafetensorError traceback at load), another build under ``--out`` (silently replaced), SIGINT/SIGTERM (a temp
folder left, a traceback), a damaged ``warmstart.json``, out-of-range seeds, unchecked :class:`TinyTierConfig`
fields, and ``--out``/``GRADPROBE_CACHE`` paths that cannot be folders.

No tier is built here: the shipped tier folders are copied to ``tmp_path``, and where a build would run,
``gradprobe.warmstart._build_into`` is replaced by a copy of the shipped tier's files.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gradprobe import tiers, warmstart
from gradprobe.cli import warmstart as warmstart_cli
from gradprobe.tiers import TinyTierConfig, config_hash

from helpers_warmstart import SHIPPED, fake_build

SHIPPED_LLAMA = tiers.shipped_root() / "tiny-llama-sft-dd5c45615d25"


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADPROBE_CACHE", str(tmp_path / "cache"))


class _OldCodeSigterm(BaseException):
    """Raised by this test's own SIGTERM handler: without the command's handler SIGTERM would kill pytest."""


def _run(argv, capsys) -> tuple[int, str]:
    """``gradprobe warmstart ARGV`` in process: (exit status, stderr)."""
    parser = argparse.ArgumentParser(prog="gradprobe")
    warmstart_cli.add_warmstart_parser(parser.add_subparsers(dest="command"))
    try:
        rc = warmstart_cli.warmstart_main(parser.parse_args(["warmstart", *argv]))
    except SystemExit as e:
        rc = e.code
    except (KeyboardInterrupt, _OldCodeSigterm) as e:  # not handled: a failure here, not pytest's own interrupt
        rc = f"raised {type(e).__name__}"
    return rc, capsys.readouterr().err


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def _snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _no_build(*args, **kwargs):
    raise AssertionError("a build was started")


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


DAMAGES = {  # id -> (file, how it is damaged, the words of the message)
    "empty weights": ("model.safetensors", _empty, "model.safetensors is damaged (Error while deserializing header"),
    "cut weights": ("model.safetensors", _cut, "model.safetensors is damaged (Error while deserializing header"),
    "no config": ("config.json", Path.unlink, "config.json is missing"),
    "cut config": ("config.json", _cut, "config.json is damaged ("),
}


# ----------------------------------------------------------------------------- 1: damaged tier folders

@pytest.mark.parametrize("damage", list(DAMAGES))
def test_warmstart_refuses_a_damaged_out_folder(damage, tmp_path, monkeypatch, capsys):
    name, spoil, words = DAMAGES[damage]
    out = _copy(SHIPPED, tmp_path / "tier")
    spoil(out / name)
    before = _snapshot(out)
    monkeypatch.setattr(warmstart, "_build_into", _no_build)
    rc, err = _run(["--out", str(out), "--no-progress"], capsys)
    assert rc == 2 and err.count("\n") == 1, err
    assert err.startswith(f"gradprobe warmstart: error: {out / name}") and words in err
    assert "holds a damaged tier build; rebuild it with --force" in err
    assert _snapshot(out) == before and _leftovers(tmp_path) == []


@pytest.mark.parametrize("damage", list(DAMAGES) + ["cut record"])
def test_a_damaged_build_in_the_default_cache_is_rebuilt(damage, monkeypatch, caplog):
    cached = _copy(SHIPPED, tiers.cache_root() / SHIPPED.name)
    name, spoil, words = DAMAGES.get(damage, ("warmstart.json", _cut, "warmstart.json is damaged (not valid JSON"))
    spoil(cached / name)
    calls = []
    monkeypatch.setattr(warmstart, "_build_into", fake_build(calls))
    with caplog.at_level(logging.WARNING, logger="gradprobe.warmstart"):
        path = warmstart.build_tier("tiny", progress=False)
    assert path == cached and len(calls) == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "gradprobe.warmstart"]
    assert len(lines) == 1 and lines[0].startswith(f"{cached / name} ") and words in lines[0], lines
    assert lines[0].endswith(f"; rebuilding the cached tier build in {cached}")
    assert _snapshot(cached) == _snapshot(SHIPPED) and _leftovers(cached.parent) == []
    assert warmstart.build_tier("tiny", progress=False) == cached and len(calls) == 1  # intact now: reused


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_loading_a_damaged_tier_names_the_file_and_the_fix(damage, tmp_path):
    from gradprobe.models import ModelNotFoundError, TierDamagedError, load_policy

    name, spoil, words = DAMAGES[damage]
    folder = _copy(SHIPPED, tmp_path / "tier")
    spoil(folder / name)
    with pytest.raises(TierDamagedError) as err:
        load_policy(str(folder))
    message = str(err.value)
    assert isinstance(err.value, ValueError) and not isinstance(err.value, ModelNotFoundError)
    assert message.startswith(f"the tier in {folder} is damaged: {folder / name}") and words in message
    assert message.endswith(f"rebuild it with `gradprobe warmstart --tier tiny --out '{folder}' --force`")
    cached = _copy(SHIPPED, tiers.cache_root() / SHIPPED.name)  # the alias resolves to the cache first
    spoil(cached / name)
    with pytest.raises(TierDamagedError) as err:
        load_policy("tiny")
    assert str(err.value).endswith(f"rebuild it with `gradprobe warmstart --tier tiny --force`, or delete {cached} to "
                                   f"load the shipped build {SHIPPED} again (a cache build takes precedence)")


def test_probe_on_a_damaged_cached_tier_prints_one_line(tmp_path, monkeypatch, capsys):
    from gradprobe.cli import main

    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # what --no-progress sets: restored after the test

    cached = _copy(SHIPPED, tiers.cache_root() / SHIPPED.name)
    _empty(cached / "model.safetensors")
    rc = main(["probe", "--prompts", "4", "--group", "4", "--rewards", "outcome", "--no-progress",
               "--out", str(tmp_path / "probe")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert err == (f"gradprobe probe: error: the tier in {cached} is damaged: {cached}/model.safetensors is damaged "
                   "(Error while deserializing header: header too small); rebuild it with `gradprobe warmstart "
                   f"--tier tiny --force`, or delete {cached} to load the shipped build {SHIPPED} again (a cache build "
                   "takes precedence)\n")
    assert not (tmp_path / "probe").exists()


# ----------------------------------------------------------------------------- 3: another build under --out

@pytest.mark.parametrize("held_build, argv, held", [
    (SHIPPED_LLAMA, ["--tier", "tiny"], "tier 'tiny-llama-sft' seed 0, config_hash dd5c45615d25, differing in arch"),
    (SHIPPED, ["--tier", "tiny", "--seed", "3"], "tier 'tiny' seed 0, config_hash ef0cbbe61f4b"),
    (SHIPPED, ["--tier", "tiny-llama-sft"], "tier 'tiny' seed 0, config_hash ef0cbbe61f4b, differing in arch"),
], ids=["tiny over llama", "another seed", "llama over tiny"])
def test_warmstart_refuses_to_replace_another_build_without_force(held_build, argv, held, tmp_path, monkeypatch,
                                                                 capsys):
    out = _copy(held_build, tmp_path / "tier")
    before = _snapshot(out)
    monkeypatch.setattr(warmstart, "_build_into", _no_build)
    rc, err = _run([*argv, "--out", str(out), "--no-progress"], capsys)
    assert rc == 2 and err.count("\n") == 1, err
    assert f"error: {out} holds another build ({held}) than tier " in err
    assert err.endswith("pass --force (force=True) to replace it, or choose another folder for --out\n")
    assert _snapshot(out) == before and _leftovers(tmp_path) == []


def test_force_replaces_another_build(tmp_path, monkeypatch, capsys):
    out = _copy(SHIPPED_LLAMA, tmp_path / "tier")
    calls = []
    monkeypatch.setattr(warmstart, "_build_into", fake_build(calls))
    rc, err = _run(["--out", str(out), "--force", "--no-progress"], capsys)
    assert rc == 0 and err == "" and len(calls) == 1
    assert _snapshot(out) == _snapshot(SHIPPED) and _leftovers(tmp_path) == []


# ----------------------------------------------------------------------------- 4: SIGINT and SIGTERM

def _old_code_sigterm(signum, frame):
    raise _OldCodeSigterm


@pytest.fixture
def _sigterm_guard():
    previous = signal.signal(signal.SIGTERM, _old_code_sigterm)
    yield
    signal.signal(signal.SIGTERM, previous)


def _stopping_build(how):
    def build(folder, config, seed, progress, name="tiny"):
        (folder / "model.safetensors").write_bytes(b"half")  # something written before the stop
        if how == "SIGINT":
            raise KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop the build")
    return build


@pytest.mark.parametrize("how, rc_expected, words", [("SIGINT", 130, "interrupted"),
                                                     ("SIGTERM", 143, "terminated (SIGTERM)")])
@pytest.mark.parametrize("earlier", [False, True], ids=["new", "over an earlier build"])
def test_a_stopped_warmstart_prints_one_line_and_leaves_no_temp_folder(how, rc_expected, words, earlier, tmp_path,
                                                                      monkeypatch, capsys, _sigterm_guard):
    out = tmp_path / "tier"
    if earlier:
        _copy(SHIPPED, out)
    monkeypatch.setattr(warmstart, "_build_into", _stopping_build(how))
    rc, err = _run(["--out", str(out), "--no-progress"] + (["--force"] if earlier else []), capsys)
    assert rc == rc_expected and err == (
        f"gradprobe warmstart: {words}; the unfinished build was removed and nothing was written to --out {out} "
        "(an earlier build there, if any, is kept); run the same command again to build the tier\n")
    assert _leftovers(tmp_path) == []
    assert (_snapshot(out) == _snapshot(SHIPPED)) if earlier else not out.exists()
    assert signal.getsignal(signal.SIGTERM) is _old_code_sigterm  # the command's handler was removed after it


def test_sigterm_to_the_warmstart_command_exits_143(tmp_path):
    """A real SIGTERM to a ``gradprobe warmstart`` process (a stand-in build that waits)."""
    script = textwrap.dedent("""
        import sys, time
        from gradprobe import warmstart
        from gradprobe.cli import main
        def build(folder, *args, **kwargs):
            (folder / "model.safetensors").write_bytes(b"half")
            print("building", flush=True)
            time.sleep(120)
        warmstart._build_into = build
        sys.exit(main(["warmstart", "--out", sys.argv[1], "--no-progress"]))
    """)
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    p = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "tier")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout.readline() == "building\n"
        assert [x for x in os.listdir(tmp_path) if ".tmp-" in x]  # the build's temp folder exists
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 143 and err.count("\n") == 1, err
    assert err.startswith("gradprobe warmstart: terminated (SIGTERM); the unfinished build was removed")
    assert os.listdir(tmp_path) == []


# ----------------------------------------------------------------------------- 5: a damaged warmstart.json

def _drop_eval(path: Path) -> None:
    record = json.loads(path.read_text())
    del record["eval"]
    path.write_text(json.dumps(record))


@pytest.mark.parametrize("spoil, why", [
    (lambda p: p.write_text("[1, 2]"), "it holds a JSON list, not an object"),
    (_drop_eval, "no 'eval'"),
    (lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "parameters": "many"})),
     "'parameters' is 'many', not an integer"),
    (_cut, "not valid JSON: Expecting ':' delimiter: line 7 column 11 (char 100)"),
], ids=["list", "no eval", "wrong type", "cut"])
def test_warmstart_refuses_a_damaged_record(spoil, why, tmp_path, monkeypatch, capsys):
    out = _copy(SHIPPED, tmp_path / "tier")
    spoil(out / "warmstart.json")
    before = _snapshot(out)
    monkeypatch.setattr(warmstart, "_build_into", _no_build)
    rc, err = _run(["--out", str(out), "--no-progress"], capsys)
    assert rc == 2 and err == (f"gradprobe warmstart: error: {out}/warmstart.json is damaged ({why}): {out} holds a "
                               "damaged tier build; rebuild it with --force (force=True), or choose another folder "
                               "for --out\n")
    assert _snapshot(out) == before
    from gradprobe.models import TierDamagedError

    with pytest.raises(TierDamagedError) as e:
        warmstart.tier_record(out)
    assert str(e.value) == f"{out}/warmstart.json is damaged ({why}); rebuild the tier with --force (force=True)"


# ----------------------------------------------------------------------------- 15: --seed

@pytest.mark.parametrize("seed", ["-1", str(2**63), "99999999999999999999999"])
def test_warmstart_checks_the_seed_when_parsing(seed, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(warmstart, "_build_into", _no_build)
    rc, err = _run(["--seed", seed, "--out", str(tmp_path / "tier")], capsys)
    assert rc == 2
    assert err.splitlines()[-1] == ("gradprobe warmstart: error: argument --seed: must be in [0, 2**63 - 1] "
                                    f"(it seeds numpy and torch), got {seed}")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("seed", [-1, 2**63, 1.5, True])
def test_build_tier_checks_the_seed(seed, tmp_path, monkeypatch):
    monkeypatch.setattr(warmstart, "_build_into", _no_build)
    with pytest.raises(ValueError, match=r"^seed \(--seed\) must be an integer in \[0, 2\*\*63 - 1\]"):
        warmstart.build_tier("tiny", seed=seed, out=tmp_path / "tier", progress=False)
    assert os.listdir(tmp_path) == []


# ----------------------------------------------------------------------------- 20: TinyTierConfig

@pytest.mark.parametrize("field, value, rule", [
    ("steps", 0, "an integer >= 1"), ("steps", -3, "an integer >= 1"), ("steps", 5.0, "an integer >= 1"),
    ("batch_size", 0, "an integer >= 1"), ("micro_batch_size", 0, "an integer >= 1"),
    ("hidden_size", 0, "an integer >= 1"), ("layers", -1, "an integer >= 1"), ("threads", 0, "an integer >= 1"),
    ("eval_prompts", 0, "an integer >= 1"), ("eval_samples", 0, "an integer >= 1"),
    ("eval_max_new_tokens", True, "an integer >= 1"), ("bare_rows", -1, "an integer >= 0"),
    ("warmup_steps", -1, "an integer >= 0"),
    ("lr", float("nan"), "a finite number > 0"), ("lr", -1, "a finite number > 0"), ("lr", 0, "a finite number > 0"),
    ("lr", float("inf"), "a finite number > 0"), ("lr", "3e-3", "a finite number > 0"),
    ("min_lr_ratio", 1.5, "a number in [0, 1]"), ("weight_decay", -0.1, "a finite number >= 0"),
    ("grad_clip", float("nan"), "a number > 0 (inf: no clipping)"), ("grad_clip", 0, "a number > 0 (inf: no clipping)"),
])
def test_tiny_tier_config_names_a_bad_field(field, value, rule):
    with pytest.raises(ValueError) as err:
        TinyTierConfig(**{field: value})
    assert str(err.value) == f"TinyTierConfig.{field} must be {rule}, got {value!r}"


def test_tiny_tier_config_checks_arch_task_and_heads():
    with pytest.raises(ValueError, match=r"^TinyTierConfig.arch must be one of tiny-qwen2, tiny-llama, got 'bogus'$"):
        TinyTierConfig(arch="bogus")
    with pytest.raises(ValueError, match=r"^TinyTierConfig.task_config must be a dict, got list$"):
        TinyTierConfig(task_config=[])
    with pytest.raises(ValueError, match=r"^TinyTierConfig.heads \(8\) must be a multiple of kv_heads \(3\)$"):
        TinyTierConfig(kv_heads=3)


def test_valid_configs_keep_their_hash():
    """The shipped tiers' folders are named by the hash: validation must not change it."""
    from gradprobe.models import TINY_ARCHITECTURES

    assert config_hash(TinyTierConfig(), 0) == "ef0cbbe61f4b"
    assert config_hash(tiers.TIERS["tiny-llama-sft"](), 0) == "dd5c45615d25"
    assert TinyTierConfig(grad_clip=float("inf"), bare_rows=0, warmup_steps=0, min_lr_ratio=0).grad_clip == float("inf")
    assert tiers._ARCHS == TINY_ARCHITECTURES


def test_build_tier_refuses_a_config_that_is_not_a_tiny_tier_config(tmp_path, monkeypatch):
    monkeypatch.setattr(warmstart, "_build_into", _no_build)
    with pytest.raises(TypeError, match=r"^config must be a TinyTierConfig, got dict \(TinyTierConfig\(\*\*config\) "):
        warmstart.build_tier("tiny", config={"steps": 5}, out=tmp_path / "tier", progress=False)
    assert os.listdir(tmp_path) == []


# ----------------------------------------------------------------------------- 21: paths that cannot be folders

def test_out_a_file_or_below_a_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(warmstart, "_build_into", _no_build)
    afile = tmp_path / "afile"
    afile.write_text("x")
    rc, err = _run(["--out", str(afile), "--no-progress"], capsys)
    assert rc == 2 and err == (f"gradprobe warmstart: error: out (--out) {afile} is a file, not a folder; choose "
                               "another folder for --out\n")
    rc, err = _run(["--out", str(afile / "sub"), "--no-progress"], capsys)
    assert rc == 2 and err == (f"gradprobe warmstart: error: out (--out) {afile}/sub cannot be created: {afile} is a "
                               "file, not a folder; choose another folder for --out\n")
    assert os.listdir(tmp_path) == ["afile"]


def test_gradprobe_cache_a_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(warmstart, "_build_into", _no_build)
    afile = tmp_path / "afile"
    afile.write_text("x")
    monkeypatch.setenv("GRADPROBE_CACHE", str(afile))
    rc, err = _run(["--no-progress"], capsys)
    assert rc == 2 and err == (f"gradprobe warmstart: error: the tier folder {afile}/tiers/{SHIPPED.name} "
                               f"(GRADPROBE_CACHE={afile}) cannot be created: {afile} is a file, not a folder; set "
                               "GRADPROBE_CACHE to a writable folder\n")


def test_out_where_no_folder_can_be_made_names_out_not_the_temp_folder(tmp_path, monkeypatch, capsys):
    """A parent where no folder can be made (as /proc on Linux; here any mkdir under ``locked`` is refused, so the
    test runs on every OS and as root, whom permissions do not stop): the message names --out, not the temp folder."""
    monkeypatch.setattr(warmstart, "_build_into", _no_build)
    locked = tmp_path / "locked"
    locked.mkdir()
    real_mkdir = Path.mkdir

    def mkdir(self, *args, **kwargs):
        if locked in self.parents:
            raise PermissionError(13, "Permission denied", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    rc, err = _run(["--out", str(locked / "gp_ws_test"), "--no-progress"], capsys)
    assert rc == 2 and err.count("\n") == 1 and ".tmp-" not in err, err
    assert err.startswith(f"gradprobe warmstart: error: out (--out) {locked / 'gp_ws_test'} cannot be created "
                          "(Permission denied, in ")
    assert err.endswith(f", in {locked}); choose another folder for --out\n")
    assert list(locked.iterdir()) == []
