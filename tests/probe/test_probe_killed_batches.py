"""A probe killed (SIGKILL) after it wrote a complete ``batch_0/`` of ``--probe-batches`` but before its ``probe.json``
was refused on the identical rerun ("holds batch_0 but no probe.json", or "batch_0/ ... is no earlier probe's batch
folder" when it was replacing a one-batch probe): the user had to delete batch_0 by hand. The probe now names the
batch folders it is about to write in ``DIR/.unfinished-probe.json`` (deleted once it is complete or rolled back),
so the rerun knows them as the killed probe's and replaces them, in one warning line, while a user's ``batch_K`` (or
one another probe wrote) is still refused and kept. A ``probe.json`` without gradprobe's ``versions`` and ``config``
(made by hand) names no batch folder as its probe's: every ``batch_K`` of a probe's files beside it counted as its
and was moved and deleted with it. And the Python API's warnings about a killed probe's leftovers named
``contextlib.py`` (or gradprobe's own file) as their line, not the user's call."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import gradprobe
import gradprobe.probe.batches as probe_batches
from gradprobe.cli import main
from gradprobe.forecast import default_curve_path
from gradprobe.layout import UNFINISHED_PROBE
from gradprobe.outputs import OutputDirError, write_text_atomic
from gradprobe.probe.output import EARLIER, claim_probe_file, replacing_earlier_probe

from helpers_rollout import one_thread

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

REPO = Path(__file__).resolve().parents[2]
_PROBE = ["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--rewards", "outcome", "--prompts", "2",
          "--group", "2", "--heldout-prompts", "2", "--heldout-group", "2", "--max-new-tokens", "8", "--bootstrap",
          "20", "--no-progress", "--threads", "1", "--reference-curve", str(default_curve_path())]
# the CLI, killed by SIGKILL (no handler runs) right after its real batch 0 is complete, before batch 1
_KILLED_AFTER_BATCH_0 = """
import os, signal, sys
from pathlib import Path
import gradprobe.probe.run as probe_run
from gradprobe.cli import main
real = probe_run.run_probe
def run_probe(config, *, out=None, **kwargs):
    result = real(config, out=out, **kwargs)
    if out is not None and Path(out).name == "batch_0":
        os.kill(os.getpid(), signal.SIGKILL)
    return result
probe_run.run_probe = run_probe
sys.exit(main(sys.argv[1:]))
"""


def _tree(folder: Path) -> dict:
    """Every entry under ``folder``: a file's text, ``None`` for a folder."""
    return {p.relative_to(folder).as_posix(): (p.read_text() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


def _probe_json(batches: int = 1) -> str:
    """A probe.json as gradprobe writes it (``versions``, ``config``; ``config.probe_batches`` for several)."""
    return json.dumps({"versions": {"gradprobe": "0"}, "rewards": [],
                       "config": {"model": "tiny", **({"probe_batches": batches} if batches > 1 else {})}})


@pytest.fixture(scope="module")
def one_batch_probe(tmp_path_factory) -> Path:
    """A real one-batch probe of the tiny tier (its folder: probe.json, report.html, tokens.jsonl, alignment...)."""
    out = tmp_path_factory.mktemp("earlier") / "p"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(_PROBE + ["--out", str(out)]) == 0
    return out


def _killed_after_batch_0(out: Path) -> None:
    """Run ``gradprobe probe --probe-batches 2 --out OUT`` in a process that is killed (SIGKILL) after batch 0."""
    done = subprocess.run([sys.executable, "-c", _KILLED_AFTER_BATCH_0, *_PROBE, "--probe-batches", "2", "--out",
                           str(out)], cwd=REPO, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == -signal.SIGKILL, done.stderr


def _killed_in_process_after_batch_0(out: Path) -> None:
    """The same, in this process: every file operation from the one that makes ``batch_1`` on is killed
    (:func:`_killed_at`), so nothing after it runs, gradprobe's roll-back included, as after SIGKILL."""
    with pytest.raises(_Killed), _killed_at(out, lambda op: op == "mkdir batch_1"), contextlib.redirect_stdout(
            io.StringIO()):
        main(_PROBE + ["--probe-batches", "2", "--out", str(out)])


@pytest.mark.parametrize("earlier", [True, False], ids=["sigkill-replacing-a-one-batch-probe", "new-folder"])
def test_the_identical_rerun_after_a_probe_killed_after_batch_0_goes_through(tmp_path, capsys, one_batch_probe,
                                                                          earlier):
    """A real SIGKILL of the command replacing a one-batch probe; in a new folder, the same kill in this process."""
    out = tmp_path / "p"
    if earlier:
        shutil.copytree(one_batch_probe, out)
    else:
        out.mkdir()
    (out / "notes.txt").write_text("mine")
    if earlier:
        _killed_after_batch_0(out)
    else:
        _killed_in_process_after_batch_0(out)
    left = sorted(p.name for p in out.iterdir())
    assert left == sorted([*([EARLIER] if earlier else []), UNFINISHED_PROBE, "batch_0", "notes.txt"])
    assert sorted(p.name for p in (out / "batch_0").iterdir()) == ["alignment.safetensors", "probe.json",
                                                                     "tokens.jsonl"]  # complete
    capsys.readouterr()
    assert main(_PROBE + ["--probe-batches", "2", "--out", str(out)]) == 0
    cap = capsys.readouterr()
    kept = "alignment.safetensors, probe.json, report.html, tokens.jsonl"
    assert cap.err.splitlines() == [
        f"gradprobe probe: warning: restored the earlier probe in {out} from {EARLIER}/ ({kept}), left by a probe "
        "that was killed; its unfinished files (batch_0) were deleted" if earlier else
        f"gradprobe probe: warning: removed what a probe killed before it was complete left in {out} (batch_0)"]
    replaced = f"replaced the earlier probe in {out}: its files ({kept}) were removed before this probe wrote its own"
    assert (cap.out.splitlines()[0] == replaced) if earlier else "replaced" not in cap.out
    assert sorted(p.name for p in out.iterdir()) == ["batch_0", "batch_1", "notes.txt", "probe.json", "report.html"]
    assert (out / "notes.txt").read_text() == "mine"
    probe = gradprobe.load_probe(out)  # the probe.json it wrote reads back
    assert probe.raw["config"]["probe_batches"] == 2 and len(probe.raw["batches"]) == 2


# ---------------------------------------------------------------------------- every kill point, simulated
class _Killed(BaseException):
    """The process was killed here (SIGKILL): no except clause of gradprobe catches it, nothing after it runs."""


@contextlib.contextmanager
def _killed_at(out: Path, at):
    """Raise :class:`_Killed` instead of the file operation numbered ``at`` (0-based; or the first for which the
    callable ``at`` is true of its description) in ``out``, its ``.earlier-probe/`` or a ``batch_K/`` (rename,
    os.replace, unlink, rmdir, mkdir, rmtree) and every one after it; yields the list of those done."""
    ops, killed = [], []
    rename, replace, unlink, rmdir, mkdir, rmtree = (Path.rename, os.replace, Path.unlink, Path.rmdir, Path.mkdir,
                                                     shutil.rmtree)

    def step(what, path):
        path = Path(path)
        if path.parent == out or path.parent.parent == out:
            op = f"{what} {path.relative_to(out)}"
            if killed or (at(op) if callable(at) else len(ops) >= at):
                killed.append(op)
                raise _Killed(op)
            ops.append(op)

    def path_op(what, real):
        def op(self, *args, **kwargs):
            step(what, self)
            return real(self, *args, **kwargs)
        return op

    def os_replace(src, dst, *args, **kwargs):
        step("replace", dst)
        return replace(src, dst, *args, **kwargs)

    def shutil_rmtree(path, *args, **kwargs):
        step("rmtree", path)
        return rmtree(path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        for name, what, real in (("rename", "rename", rename), ("unlink", "unlink", unlink), ("rmdir", "rmdir", rmdir),
                                 ("mkdir", "mkdir", mkdir)):
            mp.setattr(Path, name, path_op(what, real))
        mp.setattr(os, "replace", os_replace)
        mp.setattr(shutil, "rmtree", shutil_rmtree)
        yield ops


_OLD = {"probe.json": _probe_json(), "report.html": "old report", "tokens.jsonl": "old tokens",
        "alignment.safetensors": "old a"}
_BATCH = ("alignment.safetensors", "tokens.jsonl", "probe.json")  # in write order, probe.json last
_NEW = {**{f"batch_{k}/{name}": f"new {k} {name}" for k in (0, 1) for name in _BATCH}, "probe.json": _probe_json(2),
        "report.html": "new report"}


def _make(out: Path, earlier: bool) -> Path:
    out.mkdir(parents=True)
    for name, text in {**(_OLD if earlier else {}), "notes.txt": "mine"}.items():
        (out / name).write_text(text)
    return out


def write_as_a_probe(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` as a probe's writers do: named in the probe's record first (the file, or its
    ``batch_K`` folder in the probe folder's record: claim_probe_file), then its folder made and the file written."""
    claim_probe_file(path.parent, path.name)
    path.parent.mkdir(exist_ok=True)
    write_text_atomic(path, text)


def _two_batch_probe(out: Path, say) -> None:
    """A probe of 2 batch folders into ``out``, as ``gradprobe probe --probe-batches 2`` writes them."""
    with replacing_earlier_probe(out, say=say, batch_folders=2):
        for name, text in _NEW.items():
            write_as_a_probe(out / name, text)


def _next_probe(out: Path, batch_folders: int = 2) -> tuple[dict, list[str]]:
    """The identical probe again (of ``batch_folders`` batch folders), failing at once: what it found as the earlier
    probe (moved aside whole, then put back), and what it said. It must not refuse the folder."""
    said = []
    with pytest.raises(ZeroDivisionError):
        with replacing_earlier_probe(out, say=said.append, batch_folders=batch_folders):
            aside = _tree(out / EARLIER) if (out / EARLIER).is_dir() else {}
            left = sorted(p.name for p in out.iterdir() if p.name != UNFINISHED_PROBE)  # its own record
            assert left == sorted([EARLIER] * bool(aside) + ["notes.txt"])
            1 / 0
    assert _tree(out) == {**aside, "notes.txt": "mine"}, "not put back whole"
    return aside, said


def _complete(files: dict) -> dict:
    """``files`` but the ``.tmp`` partials (a probe killed before a rename leaves the file under its .tmp name)."""
    return {name: text for name, text in files.items() if not name.endswith(".tmp")}


@pytest.mark.parametrize("earlier", [False, True], ids=["new-folder", "replacing-a-one-batch-probe"])
def test_every_kill_point_of_a_two_batch_probe_lets_the_identical_rerun_through(tmp_path, earlier):
    with _killed_at(_make(tmp_path / "count", earlier), float("inf")) as ops:
        _two_batch_probe(tmp_path / "count", say=pytest.fail)
    assert f"replace {UNFINISHED_PROBE}" in ops and "mkdir batch_0" in ops
    assert ops.index(f"replace {UNFINISHED_PROBE}") < ops.index("mkdir batch_0")  # named before written
    assert _tree(tmp_path / "count") == {**_NEW, "batch_0": None, "batch_1": None, "notes.txt": "mine"}  # no record
    folders = {"batch_0": None, "batch_1": None}
    # the earlier probe (nothing in a new folder), or the killed one once its probe.json was written (report.html next)
    whole = [_OLD if earlier else {}, {**_NEW, **folders}, {k: v for k, v in {**_NEW, **folders}.items()
                                                             if k != "report.html"}]
    broken = []
    for k in range(len(ops) + 1):
        out = _make(tmp_path / f"kill{k}", earlier)
        with _killed_at(out, k), contextlib.suppress(_Killed):
            _two_batch_probe(out, say=pytest.fail)
        try:
            found, said = _next_probe(out)
        except (AssertionError, OSError) as e:
            found, said = f"error {e}", []
        if (found if isinstance(found, str) else _complete(found)) not in whole or len(said) > 1:
            broken.append(f"killed before op {k} ({ops[k] if k < len(ops) else 'none'}): found {found}, said {said}")
    assert broken == []


def test_a_killed_probes_record_names_only_its_own_batch_folders(tmp_path, capsys, no_compute):
    """Beside the killed probe's batch_0 and batch_1, a batch_2 of a probe's files it never named (a user's, or one
    another probe wrote) is refused, and kept, by a 3-batch probe; so is a recorded batch_1 the user put a file in."""
    out = _make(tmp_path / "K", earlier=False)
    (out / UNFINISHED_PROBE).write_text(json.dumps({"probe_batch_folders": ["batch_0", "batch_1"]}))
    for k in (0, 1, 2):
        (out / f"batch_{k}").mkdir()
        (out / f"batch_{k}" / "tokens.jsonl").write_text(f"batch {k}")
    before = _tree(out)
    assert main(_PROBE + ["--probe-batches", "3", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gradprobe probe: error: --out {str(out)!r} holds batch_2 but no probe.json, so it is no "
                          "earlier probe's"), err
    assert no_compute == [] and _tree(out) == before
    (out / "batch_2").rename(tmp_path / "batch_2")
    (out / "batch_1" / "notes.txt").write_text("my notes")
    before = _tree(out)
    assert main(_PROBE + ["--probe-batches", "2", "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith(
        f"gradprobe probe: error: --out {str(out)!r} holds batch_1/ (notes.txt, tokens.jsonl), where the probe writes "
        "batch 1 of its 2 probe batches, and it is no earlier probe's batch folder: it holds notes.txt")
    assert no_compute == [] and _tree(out) == before


@pytest.mark.parametrize("text", ["{", '{"probe_batch_folders": ["../notes.txt"]}', '{"probe_batch_folders": 2}',
                                  '{"probe_files": ["notes.txt"], "probe_batch_folders": []}', "[]"])
def test_an_unreadable_record_is_refused_touching_nothing(tmp_path, text):
    out = _make(tmp_path / "K", earlier=False)
    (out / UNFINISHED_PROBE).write_text(text)
    (out / "batch_0").mkdir()
    (out / "batch_0" / "probe.json").write_text("{}")
    before = _tree(out)
    record = re.escape(repr(str(out / UNFINISHED_PROBE)))
    with pytest.raises(OutputDirError, match=rf"^{record} \(where a probe names the files and batch folders "
                                             r"it is writing\) is no list of them .*: delete it \(rm .*\) and any "
                                             r"file \(probe.json, tokens.jsonl, alignment.safetensors, report.html, "
                                             r"calibrated.json\) or batch_K folder that a probe killed in .* left, "
                                             r"then probe again, or choose another --out; nothing was moved$"):
        with replacing_earlier_probe(out, say=pytest.fail, batch_folders=2):
            pytest.fail("the block ran")
    assert _tree(out) == before


def test_a_record_left_behind_does_not_take_a_users_older_batch_folder_or_file(tmp_path, capsys, no_compute):
    """Was: with a killed probe's record left (a user cleared its batch folders with ``rm -r DIR/batch_*``, not the
    hidden record), a batch_0 the user then moved or copied in (``mv``, ``cp -a``: its times kept) was deleted as the
    killed probe's. What is older than the record is no probe's that wrote the record: refused and kept."""
    out = _make(tmp_path / "K", earlier=False)
    (out / UNFINISHED_PROBE).write_text(json.dumps({"probe_files": ["tokens.jsonl"],
                                                     "probe_batch_folders": ["batch_0", "batch_1"]}))
    mine = tmp_path / "mine"
    (mine / "batch_0").mkdir(parents=True)
    (mine / "batch_0" / "tokens.jsonl").write_text("my batch")
    (mine / "tokens.jsonl").write_text("my tokens")
    hour_ago = os.stat(out / UNFINISHED_PROBE).st_mtime - 3600
    for p in (mine / "batch_0" / "tokens.jsonl", mine / "batch_0", mine / "tokens.jsonl"):
        os.utime(p, (hour_ago, hour_ago))
    (mine / "batch_0").rename(out / "batch_0")  # mv keeps the folder's and its files' times
    before = _tree(out)
    assert main(_PROBE + ["--probe-batches", "2", "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith(f"gradprobe probe: error: --out {str(out)!r} holds batch_0 but no "
                                              "probe.json, so it is no earlier probe's")
    assert no_compute == [] and _tree(out) == before
    shutil.rmtree(out / "batch_0")
    (mine / "tokens.jsonl").rename(out / "tokens.jsonl")
    before = _tree(out)
    assert main(_PROBE + ["--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith(f"gradprobe probe: error: --out {str(out)!r} holds tokens.jsonl but no "
                                              "probe.json")
    assert no_compute == [] and _tree(out) == before and (out / "tokens.jsonl").read_text() == "my tokens"


def test_a_record_that_is_a_folder_is_refused_with_rm_r(tmp_path):
    out = _make(tmp_path / "K", earlier=False)
    (out / UNFINISHED_PROBE).mkdir()
    with pytest.raises(OutputDirError, match=r"is no list of them .*: delete it \(rm -r '"):
        with replacing_earlier_probe(out, say=pytest.fail, batch_folders=0):
            pytest.fail("the block ran")
    assert (out / UNFINISHED_PROBE).is_dir()


# ---------------------------------------------------------------------------- a hand-made probe.json
@pytest.mark.parametrize("probe_json", ['{"old": true}', "not json", json.dumps({"config": {"probe_batches": 2}})])
def test_a_hand_made_probe_json_names_no_batch_folder(tmp_path, capsys, no_compute, probe_json):
    """Beside a probe.json without gradprobe's versions and config, a batch_0 of a probe's file names was taken as
    that probe's and moved aside and deleted with it (any batch_K at all); now it is kept, and refused where the
    probe writes."""
    out = tmp_path / "K"
    out.mkdir()
    (out / "probe.json").write_text(probe_json)
    (out / "batch_0").mkdir()
    (out / "batch_0" / "tokens.jsonl").write_text("my tokens")
    before = _tree(out)
    assert main(_PROBE + ["--probe-batches", "2", "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"gradprobe probe: error: --out {str(out)!r} holds batch_0/ (tokens.jsonl), where the probe writes batch 0 of "
        "its 2 probe batches, and it is no earlier probe's batch folder: the probe.json there is not one gradprobe "
        "wrote (no JSON object with its versions and config), so it names no batch folder as its probe's. The probe "
        f"would overwrite tokens.jsonl there. Move batch_0/ out of {str(out)!r} (or rename it), or choose another "
        "--out; nothing was moved\n")
    assert no_compute == [] and _tree(out) == before
    with replacing_earlier_probe(out, say=pytest.fail) as folder:  # one batch: the hand-made one replaced, batch_0 kept
        assert folder.earlier == ["probe.json"] and folder.kept == ["batch_0"]
        write_text_atomic(out / "probe.json", "new")
    assert _tree(out) == {"batch_0": None, "batch_0/tokens.jsonl": "my tokens", "probe.json": "new"}


def test_a_leftover_with_a_hand_made_probe_json_keeps_a_users_batch_folder(tmp_path):
    """A killed probe's .earlier-probe/ holding a hand-made probe.json: restoring it deleted every batch_K of a probe's
    files in the folder as the killed probe's unfinished files, the user's too."""
    out = tmp_path / "K"
    (out / EARLIER).mkdir(parents=True)
    (out / EARLIER / "probe.json").write_text('{"old": true}')
    (out / "batch_0").mkdir()
    (out / "batch_0" / "tokens.jsonl").write_text("my tokens")
    said = []
    with replacing_earlier_probe(out, say=said.append) as folder:
        assert folder.earlier == ["probe.json"] and folder.kept == ["batch_0"]
        write_text_atomic(out / "probe.json", "new")
    assert said == [f"restored the earlier probe in {out} from {EARLIER}/ (probe.json), left by a probe that was "
                    "killed"]
    assert _tree(out) == {"batch_0": None, "batch_0/tokens.jsonl": "my tokens", "probe.json": "new"}


# ---------------------------------------------------------------------------- the API's warnings name the caller
def _leftover(out: Path) -> Path:
    """``out`` as a probe killed while replacing a one-batch probe left it: the earlier probe in .earlier-probe/."""
    (out / EARLIER).mkdir(parents=True)
    for name, text in _OLD.items():
        (out / EARLIER / name).write_text(text)
    return out


def _enter(out: Path) -> None:
    with replacing_earlier_probe(out):
        pass


def test_the_api_warnings_name_the_users_line(tmp_path, monkeypatch, one_batch_probe):
    def stop(*args, **kwargs):
        raise ValueError("stopped after the folder was prepared")

    monkeypatch.setattr(probe_batches, "run_probe_batches", stop)
    result = gradprobe.load_probe(one_batch_probe)
    calls = {
        "probe": lambda out: gradprobe.probe("tiny-qwen2", "chain_sum", rewards="outcome", out=out),
        "write": lambda out: result.write(out),
        "replacing_earlier_probe": _enter,
    }
    for what, call in calls.items():
        out = _leftover(tmp_path / what)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with contextlib.suppress(ValueError):
                call(out)
        said = [w for w in caught if "left by a probe that was killed" in str(w.message)]
        assert len(said) == 1, (what, [str(w.message) for w in caught])
        assert (said[0].filename, said[0].category) == (__file__, UserWarning), what
