"""A one-batch probe (the default job, ``gradprobe probe --out DIR``) killed by SIGKILL (an OOM kill) after it wrote
its complete ``alignment.safetensors`` and ``tokens.jsonl`` but before its ``probe.json`` was refused on the identical
rerun ("holds alignment.safetensors, tokens.jsonl but no probe.json"): the user had to delete them by hand. Every probe
now names the files (and batch folders) it writes in ``DIR/.unfinished-probe.json`` before the first, so the rerun
deletes what the killed probe left in one warning line, while a link of a probe's file name (or a file in a folder with
no record: a user's ``report.html``) is still refused and kept. And a folder holding only what a probe killed before its
``probe.json`` left (the record, a ``report.html``, ``batch_K/`` folders: no marker file) was taken for no command's
output by :func:`gradprobe.layout.output_kind`, so ``gradprobe train --out`` (or a study, a ranking...) wrote into it;
it is a probe's now (``"unfinished probe"``), refused by the other commands."""

from __future__ import annotations

import contextlib
import json
import re
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import gradprobe
from gradprobe.cli import main
from gradprobe.layout import UNFINISHED_PROBE, output_kind
from gradprobe.outputs import OutputDirError
from gradprobe.probe.output import replacing_earlier_probe

from helpers_rollout import one_thread
from helpers_training import tiny_plan
from test_probe_killed_batches import (_PROBE, REPO, _Killed, _killed_at, _probe_json, _tree,  # same folder
                                       write_as_a_probe)
from test_probe_killed_batches import _next_probe as next_probe

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

# the CLI, killed by SIGKILL (no handler runs) as it is about to write its probe.json: its one batch's
# alignment.safetensors and tokens.jsonl are complete
_KILLED_BEFORE_PROBE_JSON = """
import os, signal, sys
from pathlib import Path
import gradprobe.probe.output as output
from gradprobe.cli import main
real = output.write_json_atomic
def write_json_atomic(path, *args, **kwargs):
    if Path(path).name == "probe.json":
        os.kill(os.getpid(), signal.SIGKILL)
    return real(path, *args, **kwargs)
output.write_json_atomic = write_json_atomic
sys.exit(main(sys.argv[1:]))
"""


def test_the_identical_rerun_after_the_default_probe_was_killed_before_its_probe_json_goes_through(tmp_path, capsys):
    out = tmp_path / "p"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    done = subprocess.run([sys.executable, "-c", _KILLED_BEFORE_PROBE_JSON, *_PROBE, "--out", str(out)], cwd=REPO,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=600)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert sorted(p.name for p in out.iterdir()) == [UNFINISHED_PROBE, "alignment.safetensors", "notes.txt",
                                                     "tokens.jsonl"]
    assert output_kind(out) == ("unfinished probe", UNFINISHED_PROBE)  # refused by every other command
    capsys.readouterr()
    assert main(_PROBE + ["--out", str(out)]) == 0
    cap = capsys.readouterr()
    assert cap.err.splitlines() == [f"gradprobe probe: warning: removed what a probe killed before it was complete "
                                    f"left in {out} (alignment.safetensors, tokens.jsonl)"]
    assert "replaced" not in cap.out
    assert sorted(p.name for p in out.iterdir()) == ["alignment.safetensors", "notes.txt", "probe.json", "report.html",
                                                     "tokens.jsonl"]
    assert (out / "notes.txt").read_text() == "mine"
    assert "forecast" in gradprobe.load_probe(out).raw  # the probe.json the command wrote reads back


# ---------------------------------------------------------------------------- every kill point, simulated
_OLD = {"probe.json": _probe_json(), "report.html": "old report", "tokens.jsonl": "old tokens",
        "alignment.safetensors": "old a"}
# every file a probe writes in its folder: as ProbeResult.write copies them (probe.json last), then the report again
# as gradprobe probe writes it (after its probe.json)
_WRITES = [("alignment.safetensors", "new a"), ("calibrated.json", "new c"), ("report.html", "new report 0"),
           ("tokens.jsonl", "new tokens"), ("probe.json", _probe_json()), ("report.html", "new report")]
_NEW = dict(_WRITES)


def _make(out: Path, earlier: bool) -> Path:
    out.mkdir(parents=True)
    for name, text in {**(_OLD if earlier else {}), "notes.txt": "mine"}.items():
        (out / name).write_text(text)
    return out


def _one_batch_probe(out: Path) -> None:
    """A probe of one batch into ``out`` writing each of its files (:data:`_WRITES`)."""
    with replacing_earlier_probe(out, say=pytest.fail):
        for name, text in _WRITES:
            write_as_a_probe(out / name, text)


def _next_probe(out: Path) -> tuple[dict, list[str]]:
    """The identical one-batch probe again, failing at once (:func:`test_probe_killed_batches._next_probe`)."""
    return next_probe(out, batch_folders=0)


@pytest.mark.parametrize("earlier", [False, True], ids=["new-folder", "replacing-a-one-batch-probe"])
def test_every_kill_point_of_a_one_batch_probe_lets_the_identical_rerun_through(tmp_path, earlier):
    with _killed_at(_make(tmp_path / "count", earlier), float("inf")) as ops:
        _one_batch_probe(tmp_path / "count")
    assert ops.index(f"replace {UNFINISHED_PROBE}") < ops.index("replace alignment.safetensors")  # named first
    assert _tree(tmp_path / "count") == {**_NEW, "notes.txt": "mine"}  # no record once complete
    # the earlier probe (nothing in a new folder), or the killed one once its probe.json was written (before or after
    # its report was written again)
    whole = [_OLD if earlier else {}, _NEW, {**_NEW, "report.html": "new report 0"}]
    broken, said_lines = [], 0
    for k in range(len(ops) + 1):
        out = _make(tmp_path / f"kill{k}", earlier)
        with _killed_at(out, k), contextlib.suppress(_Killed):
            _one_batch_probe(out)
        try:
            found, said = _next_probe(out)
        except (AssertionError, OSError) as e:
            found, said = f"error {e}", []
        complete = found if isinstance(found, str) else {n: t for n, t in found.items() if not n.endswith(".tmp")}
        if complete not in whole or len(said) > 1:
            broken.append(f"killed before op {k} ({ops[k] if k < len(ops) else 'none'}): found {found}, said {said}")
        said_lines += len(said)
    assert broken == []
    assert said_lines > 0  # some kill points left files to remove, each in one line


def test_a_recorded_name_that_is_a_link_and_a_file_without_a_record_are_refused_and_kept(tmp_path):
    """The rerun deletes the killed probe's regular files only: a report.html that is a link (to a user's file) is no
    probe's, refused and kept with everything else; a tokens.jsonl in a folder with no record (a user's) too."""
    out = _make(tmp_path / "K", earlier=False)
    with _killed_at(out, lambda op: op == "replace report.html"), contextlib.suppress(_Killed):
        _one_batch_probe(out)
    (out / "report.html.tmp").unlink()
    (tmp_path / "mine.html").write_text("my page")
    (out / "report.html").symlink_to(tmp_path / "mine.html")
    before = _tree(out)
    assert sorted(before) == [UNFINISHED_PROBE, "alignment.safetensors", "calibrated.json", "notes.txt",
                              "report.html"]
    with pytest.raises(OutputDirError, match=rf"^--out {str(out)!r} holds report.html but no probe.json, so it is no "):
        with replacing_earlier_probe(out, say=pytest.fail):
            pytest.fail("the block ran")
    assert _tree(out) == before and (out / "report.html").is_symlink()
    assert (tmp_path / "mine.html").read_text() == "my page"
    (out / "report.html").unlink()
    said = []
    with replacing_earlier_probe(out, say=said.append) as folder:  # its own files only: removed, one line
        assert folder.earlier == [] and sorted(p.name for p in out.iterdir()) == [UNFINISHED_PROBE, "notes.txt"]
    assert said == [f"removed what a probe killed before it was complete left in {out} (alignment.safetensors, "
                    "calibrated.json)"]
    assert _tree(out) == {"notes.txt": "mine"}
    (out / "tokens.jsonl").write_text("my tokens")  # no record: a user's
    with pytest.raises(OutputDirError, match=r"holds tokens.jsonl but no probe.json"):
        with replacing_earlier_probe(out, say=pytest.fail):
            pytest.fail("the block ran")
    assert _tree(out) == {"notes.txt": "mine", "tokens.jsonl": "my tokens"}


# ---------------------------------------------------------------------------- other commands refuse such a folder
def _unfinished(out: Path, left: str) -> Path:
    """``out`` as a probe killed before its probe.json left it: ``left`` is ``"batch_0"`` (a two-batch probe killed
    after its batch 0), ``"report.html"`` (a copy killed after it) or ``"record"`` (killed before its first file)."""
    out.mkdir(parents=True)
    with replacing_earlier_probe(out, say=pytest.fail, batch_folders=2 if left == "batch_0" else 0):
        if left == "batch_0":
            write_as_a_probe(out / "batch_0" / "probe.json", _probe_json())
        elif left == "report.html":
            write_as_a_probe(out / "report.html", "new report")
        raise _Killed(left)  # SIGKILL here: the block left unfinished


@pytest.mark.parametrize("left", ["batch_0", "report.html", "record"])
def test_a_folder_of_a_probe_killed_before_its_probe_json_is_a_probes(tmp_path, monkeypatch, capsys, left):
    from gradprobe.training.run_folder import other_output

    out = tmp_path / "K"
    with monkeypatch.context() as mp, pytest.raises(_Killed):
        mp.setattr("gradprobe.probe.output._roll_back", lambda folder: None)  # SIGKILL: no roll-back runs
        _unfinished(out, left)
    before = _tree(out)
    assert sorted(before) == sorted({UNFINISHED_PROBE, *({"batch_0", "batch_0/probe.json"} if left == "batch_0"
                                                          else {"report.html"} if left == "report.html" else set())})
    assert output_kind(out) == ("unfinished probe", UNFINISHED_PROBE)
    assert other_output(out) == (
        f"what a `gradprobe probe` killed before it was complete left (`gradprobe probe --out` on this folder removes "
        f"it first; or delete the files and batch folders that its {UNFINISHED_PROBE} names, then that file, by "
        f"hand) ({UNFINISHED_PROBE})")
    if left == "batch_0":  # the command itself, refused before any compute
        plan = tmp_path / "plan.toml"
        plan.write_text(tiny_plan(budget={"updates": 1}))
        monkeypatch.setattr("gradprobe.training.run.run_training", lambda *a, **k: pytest.fail("the run was trained"))
        assert main(["train", "--plan", str(plan), "--arm", "grpo", "--updates", "1", "--out", str(out),
                     "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"gradprobe train: error: {out} holds what a `gradprobe probe` killed before it "
                              f"was complete left (") and f"({UNFINISHED_PROBE}), not a training run" in err, err
    assert _tree(out) == before
    said = []
    with replacing_earlier_probe(out, say=said.append):  # the probe takes it and removes what the killed one left
        assert sorted(p.name for p in out.iterdir()) == [UNFINISHED_PROBE]
    assert said == ([] if left == "record" else
                    [f"removed what a probe killed before it was complete left in {out} ({left})"])
    assert _tree(out) == {} and output_kind(out) is None
    (out / f"{UNFINISHED_PROBE}.tmp").write_text(json.dumps({}))  # a partial record marks nothing
    assert output_kind(out) is None


def _killed_over_an_earlier_probe(out: Path) -> dict:
    """``out`` as a probe killed after its first ``probe.json`` (written before the forecast and report.html) leaves
    it while replacing a complete earlier probe: the earlier one whole in ``.earlier-probe/``, the killed probe's
    record, ``probe.json`` and ``tokens.jsonl`` in the folder, a user's notes beside. Returns the earlier probe's
    files."""
    earlier = {"probe.json": _probe_json(), "tokens.jsonl": "earlier tokens", "report.html": "earlier report"}
    (out / ".earlier-probe").mkdir(parents=True)
    for name, text in earlier.items():
        (out / ".earlier-probe" / name).write_text(text)
    (out / UNFINISHED_PROBE).write_text(json.dumps({"probe_files": ["probe.json", "tokens.jsonl", "report.html"],
                                                     "probe_batch_folders": []}))
    (out / "probe.json").write_text(_probe_json().replace("rewards", "killed"))
    (out / "tokens.jsonl").write_text("killed tokens")
    (out / "notes.txt").write_text("mine")
    return earlier


def test_a_killed_probes_probe_json_beside_its_record_never_replaces_the_earlier_probe(tmp_path):
    """Was: the killed probe's first probe.json was taken for a newer complete probe, and the complete earlier probe
    in .earlier-probe/ was deleted ("the probe in DIR is newer and is kept as the earlier probe")."""
    out = tmp_path / "K"
    earlier = _killed_over_an_earlier_probe(out)
    assert output_kind(out) == ("unfinished probe", UNFINISHED_PROBE)  # refused by every other command
    said = []
    with pytest.raises(ZeroDivisionError):  # the next probe, failing at once: the earlier probe comes back whole
        with replacing_earlier_probe(out, say=said.append):
            1 / 0
    assert _tree(out) == {**earlier, "notes.txt": "mine"}
    assert said == [f"restored the earlier probe in {out} from .earlier-probe/ (probe.json, report.html, "
                    "tokens.jsonl), left by a probe that was killed; its unfinished files (probe.json, tokens.jsonl) "
                    "were deleted"]


@pytest.mark.parametrize("theirs", ["older", "link"])
def test_a_users_file_where_the_earlier_probe_goes_back_is_refused_and_kept(tmp_path, theirs):
    """Was: a user's report.html (older than the record, or a link) was deleted as the killed probe's "unfinished
    file" and the earlier probe's put in its place."""
    out = tmp_path / "K"
    _killed_over_an_earlier_probe(out)
    if theirs == "older":
        (out / "report.html").write_text("my report")
        os.utime(out / "report.html", (1e9, 1e9))  # 2001: long before the record
    else:
        (tmp_path / "mine.html").write_text("my report")
        (out / "report.html").symlink_to(tmp_path / "mine.html")
    before = _tree(out)
    with pytest.raises(OutputDirError, match=r"holds report\.html, which the probe killed there did not write \(not "
                                             r"named in its record \.unfinished-probe\.json, a link, or older than "
                                             r"the record\), where the earlier probe it had moved to \.earlier-probe/ "
                                             r"goes back: move it out of the folder and probe again, or choose another "
                                             r"--out; nothing was moved$"):
        with replacing_earlier_probe(out, say=pytest.fail):
            pytest.fail("the block ran")
    assert _tree(out) == before


def test_a_probe_json_beside_a_record_is_an_unfinished_probe_that_load_probe_refuses(tmp_path):
    out = tmp_path / "K"
    out.mkdir()
    (out / "probe.json").write_text(_probe_json())
    (out / UNFINISHED_PROBE).write_text(json.dumps({"probe_files": ["probe.json"], "probe_batch_folders": []}))
    assert output_kind(out) == ("unfinished probe", UNFINISHED_PROBE)
    with pytest.raises(FileNotFoundError, match=rf"^{re.escape(str(out))} holds a probe that was killed before it was "
                                                r"complete \(its \.unfinished-probe\.json is there"):
        gradprobe.load_probe(out)
