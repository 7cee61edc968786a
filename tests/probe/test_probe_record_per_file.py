"""A probe's ``.unfinished-probe.json`` names only the files and batch folders the probe has started writing.

Was: the record named every file a probe may write (probe.json, tokens.jsonl, alignment.safetensors, report.html,
calibrated.json) and every batch folder up front, before the first. A probe killed (SIGKILL) after its tokens.jsonl
left a record naming report.html and calibrated.json too; a user who then put a fresh ``report.html`` (``cp``, an
editor) or ``calibrated.json`` into the folder lost it: the identical rerun deleted it as the killed probe's, since it
was a regular file newer than the record. So was a user's fresh ``batch_1/`` of a probe's file names beside a probe
killed after its batch 0. Now each name is added to the record (atomically, keeping the record's first time) just
before the probe starts that file or batch folder (:func:`gradprobe.probe.output.claim_probe_file`), and what the
record does not name is refused and kept, before any compute. A record of an older gradprobe (naming every file) is
read as before.

A name is added once the file's content is made, just before its temporary file (was: ``report.html`` named before
its figures were drawn, so a probe killed while drawing them left it named, unwritten, and a ``report.html`` the user
put there afterwards was deleted by the rerun as the killed probe's). A record whose ``since`` is an integer too large
for a float is refused in one line as any other bad ``since`` (was: an OverflowError traceback). A ``probe.json`` the
user copied beside a killed probe's record is named as not that probe's (was: "holds probe.json but no probe.json")."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import gradprobe
from gradprobe.cli import main
from gradprobe.layout import PROBE_FILES, UNFINISHED_PROBE
from gradprobe.outputs import OutputDirError
from gradprobe.probe.output import replacing_earlier_probe

from helpers_rollout import one_thread
from test_probe_killed_batches import (_PROBE, REPO, _Killed, _killed_at, _killed_in_process_after_batch_0,  # same
                                       _probe_json, _tree)  # folder
from test_probe_killed_batches import one_batch_probe  # noqa: F401  (a fixture: a real one-batch probe)
from test_probe_killed_files import _KILLED_BEFORE_PROBE_JSON

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread
_USERS = {"report.html": "my own report", "calibrated.json": '{"mine": true}'}  # a user's fresh files


def _no_compute(mp) -> list:
    """The probe's compute made to record its call and refuse to run (``no_compute`` of tests/conftest.py, for part
    of a test)."""
    calls = []
    mp.setattr("gradprobe.probe.batches.run_probe_batches", lambda *a, **k: calls.append("ran") or pytest.fail())
    return calls


def _record(out: Path) -> dict:
    return json.loads((out / UNFINISHED_PROBE).read_text())


def _put_users_files(out: Path) -> None:
    """The user's fresh files, written now (``cp``, an editor): newer than the killed probe's record."""
    for name, text in _USERS.items():
        (out / name).write_text(text)


def _refused_keeping_the_users_files(out: Path, capsys, no_compute, args: list[str]) -> None:
    """The identical rerun (``gradprobe probe ARGS --out OUT``) refuses ``out`` before any compute, naming the user's
    files, and leaves everything in it as it was, the user's bytes included."""
    before = _tree(out)
    capsys.readouterr()
    assert main(_PROBE + args + ["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"gradprobe probe: error: --out {str(out)!r} holds calibrated.json, report.html but no probe.json, so they are "
        f"no earlier probe's (a probe writes {', '.join(PROBE_FILES)}): a probe there would overwrite them. Choose "
        f"another --out, or move calibrated.json, report.html out of {str(out)!r} (the probe killed there did not "
        f"write them: its record {UNFINISHED_PROBE} does not name them, or they are links or older than the record)\n")
    assert no_compute == [] and _tree(out) == before
    assert {name: (out / name).read_text() for name in _USERS} == _USERS


def test_a_users_fresh_files_beside_a_probe_killed_after_its_tokens_are_refused_and_kept(tmp_path, capsys,
                                                                                       monkeypatch):
    """The default one-batch command, killed in this process as its probe.json is renamed into place (every file
    operation from there on fails, as after SIGKILL): its alignment.safetensors and tokens.jsonl are complete."""
    out = tmp_path / "p"
    out.mkdir()
    with pytest.raises(_Killed), _killed_at(out, lambda op: op == "replace probe.json"), \
            contextlib.redirect_stdout(io.StringIO()):
        main(_PROBE + ["--out", str(out)])
    assert sorted(p.name for p in out.iterdir()) == [UNFINISHED_PROBE, "alignment.safetensors", "probe.json.tmp",
                                                     "tokens.jsonl"]
    _put_users_files(out)
    with monkeypatch.context() as mp:
        _refused_keeping_the_users_files(out, capsys, _no_compute(mp), [])
    assert _record(out) == {"probe_files": ["alignment.safetensors", "tokens.jsonl", "probe.json"],  # started only
                            "probe_batch_folders": [], "since": _record(out)["since"]}
    for name in _USERS:  # moved out: the rerun goes through, removing the killed probe's own files in one line
        (out / name).rename(tmp_path / name)
    assert main(_PROBE + ["--out", str(out)]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"gradprobe probe: warning: removed what a probe killed before it was complete left in {out} "
        "(alignment.safetensors, probe.json.tmp, tokens.jsonl)"]
    assert sorted(p.name for p in out.iterdir()) == ["alignment.safetensors", "probe.json", "report.html",
                                                     "tokens.jsonl"]  # complete: no record left
    assert {name: (tmp_path / name).read_text() for name in _USERS} == _USERS


def test_a_users_fresh_files_beside_a_sigkilled_probe_are_refused_and_kept(tmp_path, capsys, no_compute):
    """A real SIGKILL of the command as it is about to write its probe.json (after its tokens.jsonl)."""
    out = tmp_path / "p"
    out.mkdir()
    done = subprocess.run([sys.executable, "-c", _KILLED_BEFORE_PROBE_JSON, *_PROBE, "--out", str(out)], cwd=REPO,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=600)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert sorted(p.name for p in out.iterdir()) == [UNFINISHED_PROBE, "alignment.safetensors", "tokens.jsonl"]
    _put_users_files(out)
    _refused_keeping_the_users_files(out, capsys, no_compute, [])
    assert _record(out)["probe_files"] == ["alignment.safetensors", "tokens.jsonl", "probe.json"]


def test_a_users_fresh_batch_folder_beside_a_probe_killed_after_batch_0_is_refused_and_kept(tmp_path, capsys,
                                                                                          monkeypatch):
    """A two-batch probe killed after its batch 0: its record names batch_0 only, so a fresh batch_1 of a probe's file
    names the user puts there is no probe's (was: deleted as the killed probe's)."""
    out = tmp_path / "p"
    out.mkdir()
    _killed_in_process_after_batch_0(out)
    (out / "batch_1").mkdir()
    (out / "batch_1" / "tokens.jsonl").write_text("my tokens")
    before = _tree(out)
    capsys.readouterr()
    no_compute = _no_compute(monkeypatch)
    assert main(_PROBE + ["--probe-batches", "2", "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith(
        f"gradprobe probe: error: --out {str(out)!r} holds batch_1 but no probe.json, so it is no earlier probe's")
    assert no_compute == [] and _tree(out) == before and (out / "batch_1" / "tokens.jsonl").read_text() == "my tokens"
    assert _record(out)["probe_batch_folders"] == ["batch_0"]


def test_a_copy_killed_after_its_first_file_keeps_a_users_fresh_file(tmp_path, one_batch_probe):
    """ProbeResult.write killed after it copied alignment.safetensors (as it renames report.html into place): a
    calibrated.json the user then puts there is refused and kept by the identical write."""
    result = gradprobe.load_probe(one_batch_probe)
    out = tmp_path / "copy"
    with pytest.raises(_Killed), _killed_at(out, lambda op: op == "replace report.html"):
        result.write(out)
    (out / "calibrated.json").write_text(_USERS["calibrated.json"])
    before = _tree(out)
    with pytest.raises(OutputDirError, match=r"holds calibrated\.json but no probe\.json, .*\(the probe killed there "
                                             r"did not write it: its record \.unfinished-probe\.json does not name it, "
                                             r"or it is a link or older than the record\)$"):
        result.write(out)
    assert _tree(out) == before
    assert _record(out)["probe_files"] == ["alignment.safetensors", "report.html"]
    (out / "calibrated.json").unlink()
    with pytest.warns(UserWarning, match=r"\(alignment\.safetensors, report\.html\.tmp\)$"):
        result.write(out)
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in one_batch_probe.iterdir())


def test_a_users_fresh_file_where_the_earlier_probe_goes_back_is_refused_and_kept(tmp_path):
    """A probe killed after its probe.json and tokens.jsonl while replacing an earlier probe (kept whole in
    .earlier-probe/): a report.html the user put in the folder since, which the record does not name, was deleted as
    the killed probe's unfinished file and the earlier probe's put in its place."""
    out = tmp_path / "K"
    (out / ".earlier-probe").mkdir(parents=True)
    for name, text in {"probe.json": _probe_json(), "report.html": "earlier report"}.items():
        (out / ".earlier-probe" / name).write_text(text)
    (out / UNFINISHED_PROBE).write_text(json.dumps({"probe_files": ["probe.json", "tokens.jsonl"],
                                                     "probe_batch_folders": []}))
    (out / "probe.json").write_text(_probe_json())
    (out / "tokens.jsonl").write_text("killed tokens")
    (out / "report.html").write_text("my report")  # fresh: newer than the record
    before = _tree(out)
    with pytest.raises(OutputDirError, match=r"holds report\.html, which the probe killed there did not write \(not "
                                             r"named in its record \.unfinished-probe\.json, a link, or older than "
                                             r"the record\), where the earlier probe"):
        with replacing_earlier_probe(out, say=pytest.fail):
            pytest.fail("the block ran")
    assert _tree(out) == before


# ---------------------------------------------------------------------------- the record itself
def test_the_record_names_each_file_and_batch_folder_as_it_is_started_keeping_its_first_time(tmp_path):
    from gradprobe.probe.output import claim_probe_file

    out = tmp_path / "K"
    out.mkdir()
    with replacing_earlier_probe(out, say=pytest.fail, batch_folders=2):
        assert _record(out) == {"probe_files": [], "probe_batch_folders": []}
        first = (out / UNFINISHED_PROBE).stat().st_mtime
        os.utime(out / UNFINISHED_PROBE, (first - 60, first - 60))  # a minute ago: each rewrite keeps that time
        claim_probe_file(out, "tokens.jsonl")
        claim_probe_file(out / "batch_1", "probe.json")  # a batch folder not made yet: named in the folder's record
        claim_probe_file(out / "batch_1", "tokens.jsonl")  # named already: unchanged
        claim_probe_file(out, "tokens.jsonl")
        claim_probe_file(out, "report.html")
        assert _record(out) == {"probe_files": ["tokens.jsonl", "report.html"], "probe_batch_folders": ["batch_1"],
                                "since": first - 60}
        assert sorted(p.name for p in out.iterdir()) == [UNFINISHED_PROBE]  # nothing else made
        with pytest.raises(ValueError, match=r"^'notes\.txt' is no probe's file \(a probe writes probe\.json, "):
            claim_probe_file(out, "notes.txt")
    assert sorted(p.name for p in out.iterdir()) == []  # complete: the record is gone
    claim_probe_file(out, "probe.json")  # no record (a study's probe, run_probe on its own): nothing is done
    claim_probe_file(out / "batch_0", "probe.json")
    assert sorted(p.name for p in out.iterdir()) == []


@pytest.mark.parametrize("since", ["older-gradprobe", "kept-first-time"])
def test_a_record_is_read_with_its_first_time(tmp_path, since):
    """A record of an older gradprobe names every file and batch folder and has no ``since``: its modification time
    is its time, as before. One rewritten by claim_probe_file keeps its first time in ``since``: the files the killed
    probe wrote between its first claim and its last, older than the record's modification time, are its own (were:
    refused as older than the record)."""
    out = tmp_path / "K"
    (out / "batch_0").mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    for path in (out / "tokens.jsonl", out / "alignment.safetensors", out / "batch_0" / "probe.json"):
        path.write_text("killed")
    record = {"probe_files": list(PROBE_FILES), "probe_batch_folders": ["batch_0", "batch_1"]}
    if since == "kept-first-time":
        first = (out / "tokens.jsonl").stat().st_mtime - 10  # before the files; the record's own time after them
        record = {"probe_files": ["alignment.safetensors", "tokens.jsonl"], "probe_batch_folders": ["batch_0"],
                  "since": first}
    (out / UNFINISHED_PROBE).write_text(json.dumps(record))
    if since == "kept-first-time":
        later = (out / "tokens.jsonl").stat().st_mtime + 60
        os.utime(out / UNFINISHED_PROBE, (later, later))
    said = []
    with replacing_earlier_probe(out, say=said.append, batch_folders=2):
        assert sorted(p.name for p in out.iterdir()) == [UNFINISHED_PROBE, "notes.txt"]
    assert said == [f"removed what a probe killed before it was complete left in {out} (alignment.safetensors, "
                    "batch_0, tokens.jsonl)"]
    assert _tree(out) == {"notes.txt": "mine"}


@pytest.mark.parametrize("since", ['"yesterday"', "true", "null", "1e999", "1" + "0" * 400, "-1" + "0" * 400])
def test_a_record_whose_first_time_is_no_number_is_refused_touching_nothing(tmp_path, since):
    """A hand-edited ``since``: text, a bool, null, inf, or an integer of 401 digits, too large for a float (was an
    OverflowError from math.isfinite, a traceback), is refused, touching nothing."""
    out = tmp_path / "K"
    out.mkdir()
    (out / "tokens.jsonl").write_text("killed")
    (out / UNFINISHED_PROBE).write_text(f'{{"probe_files": ["tokens.jsonl"], "probe_batch_folders": [], '
                                        f'"since": {since}}}')
    before = _tree(out)
    with pytest.raises(OutputDirError, match=r"\(where a probe names the files and batch folders it is writing\) is "
                                             r"no list of them .*: delete it \(rm "):
        with replacing_earlier_probe(out, say=pytest.fail):
            pytest.fail("the block ran")
    assert _tree(out) == before


def test_the_command_refuses_a_record_whose_first_time_is_too_large_for_a_float_in_one_line(tmp_path, capsys,
                                                                                          no_compute):
    """The tester's record (``printf '{"probe_files":[],"probe_batch_folders":[],"since":1%0400d}' 0``), then the
    command: one line, exit 2, before any compute, the record kept."""
    out = tmp_path / "d1"
    out.mkdir()
    text = '{"probe_files":[],"probe_batch_folders":[],"since":1' + "0" * 400 + "}"
    (out / UNFINISHED_PROBE).write_text(text)
    capsys.readouterr()
    assert main(_PROBE + ["--out", str(out)]) == 2
    record = {"probe_files": [], "probe_batch_folders": [], "since": 10 ** 400}
    path = out / UNFINISHED_PROBE
    assert capsys.readouterr().err == (
        f"gradprobe probe: error: {str(path)!r} (where a probe names the files and batch folders it is writing) is no "
        f"list of them ({record!r}): delete it (rm '{path}') and any file ({', '.join(PROBE_FILES)}) or batch_K folder "
        f"that a probe killed in {str(out)!r} left, then probe again, or choose another --out; nothing was moved\n")
    assert no_compute == [] and _tree(out) == {UNFINISHED_PROBE: text}


# ---------------------------------------------------------------------------- each name added just before its write
# the CLI, killed by SIGKILL (no handler runs) as it starts drawing report.html's figures: its probe.json is written
_KILLED_DRAWING_THE_REPORT = """
import os, signal, sys
import gradprobe.probe.report_html as report_html
from gradprobe.cli import main
def render_probe_report(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
report_html.render_probe_report = render_probe_report
sys.exit(main(sys.argv[1:]))
"""


def _users_report_is_refused_and_kept(out: Path, refuse, label: str) -> None:
    """A ``report.html`` the user puts into ``out`` after a probe there was killed while drawing its report (its
    probe.json, tokens.jsonl and alignment.safetensors written) is refused (``refuse(out)`` returns the message, which
    names ``out`` as ``label``) and kept; moved out, what the killed probe left is removed in one line."""
    assert sorted(p.name for p in out.iterdir()) == [UNFINISHED_PROBE, "alignment.safetensors", "probe.json",
                                                     "tokens.jsonl"]
    (out / "report.html").write_text(_USERS["report.html"])
    before = _tree(out)
    assert refuse(out) == (
        f"{label} {str(out)!r} holds report.html, which the probe killed there before it was complete did not write "
        f"(its record {UNFINISHED_PROBE} does not name it, or it is a link or older than the record), so it is no "
        f"probe's and kept (a probe writes {', '.join(PROBE_FILES)}): a probe there would overwrite it. Move "
        f"report.html out of {str(out)!r} and probe again (the probe removes what the killed one left), or choose "
        f"another {label}")
    assert _tree(out) == before and (out / "report.html").read_text() == _USERS["report.html"]
    assert _record(out)["probe_files"] == ["alignment.safetensors", "tokens.jsonl", "probe.json"]  # no report.html
    (out / "report.html").rename(out.parent / "my-report.html")
    said = []
    with replacing_earlier_probe(out, say=said.append):
        assert sorted(p.name for p in out.iterdir()) == [UNFINISHED_PROBE]
    assert said == [f"removed what a probe killed before it was complete left in {out} (alignment.safetensors, "
                    "probe.json, tokens.jsonl)"]
    assert (out.parent / "my-report.html").read_text() == _USERS["report.html"]


_API = dict(rewards="outcome", prompts=2, group=2, heldout_prompts=2, heldout_group=2, max_new_tokens=8,
            n_bootstrap=20, progress=False, threads=1)  # _PROBE's settings


def test_a_users_report_html_beside_a_probe_sigkilled_while_drawing_its_report_is_refused_and_kept(tmp_path, capsys,
                                                                                                 no_compute):
    """A real SIGKILL of the command as it starts drawing report.html (after its probe.json): report.html is not named
    in the record yet (was: named before the drawing, so the user's report.html put there afterwards was deleted by the
    identical rerun as the killed probe's, with its alignment.safetensors, probe.json and tokens.jsonl)."""
    out = tmp_path / "p"
    out.mkdir()
    done = subprocess.run([sys.executable, "-c", _KILLED_DRAWING_THE_REPORT, *_PROBE, "--out", str(out)], cwd=REPO,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=600)
    assert done.returncode == -signal.SIGKILL, done.stderr

    def _command(out: Path) -> str:
        capsys.readouterr()
        assert main(_PROBE + ["--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("gradprobe probe: error: ") and err.endswith("\n") and err.count("\n") == 1, err
        return err[len("gradprobe probe: error: "):-1]

    _users_report_is_refused_and_kept(out, _command, "--out")
    assert no_compute == []


def test_a_users_report_html_beside_an_api_probe_killed_while_drawing_its_report_is_refused_and_kept(tmp_path,
                                                                                                   monkeypatch):
    """gradprobe.probe(out=...) killed in this process as it starts drawing report.html (nothing after it runs, its
    roll-back included, as after SIGKILL)."""
    from gradprobe.forecast import default_curve_path

    out = tmp_path / "p"
    out.mkdir()
    settings = dict(_API, out=out, reference_curve=str(default_curve_path()))

    def killed(*args, **kwargs):
        raise _Killed("drawing report.html")

    with monkeypatch.context() as mp, pytest.raises(_Killed):
        mp.setattr("gradprobe.probe.report_html.render_probe_report", killed)
        mp.setattr("gradprobe.probe.output._roll_back", lambda folder: None)  # SIGKILL: no roll-back runs
        gradprobe.probe("tiny-qwen2", "chain_sum", **settings)

    def _api(out: Path) -> str:
        with monkeypatch.context() as mp:
            calls = _no_compute(mp)
            with pytest.raises(OutputDirError) as refused:
                gradprobe.probe("tiny-qwen2", "chain_sum", **settings)
        assert calls == []
        return str(refused.value)

    _users_report_is_refused_and_kept(out, _api, "out")


@pytest.mark.parametrize("copy", [shutil.copy, shutil.copy2], ids=["cp", "cp-p"])
def test_a_users_probe_json_beside_a_probe_killed_after_naming_its_first_file_is_named_as_not_its(
        tmp_path, capsys, no_compute, one_batch_probe, monkeypatch, copy):
    """A probe killed (SIGKILL) right after naming alignment.safetensors, then the user copies a complete probe.json
    into the folder (``cp``: newer than the record; ``cp -p``: older): it is not the killed probe's, refused and kept,
    in words that hold (was: "holds probe.json but no probe.json")."""
    out = tmp_path / "d2"
    out.mkdir()
    with monkeypatch.context() as mp, pytest.raises(_Killed):
        mp.setattr("gradprobe.probe.output._roll_back", lambda folder: None)  # SIGKILL: no roll-back runs
        with replacing_earlier_probe(out, say=pytest.fail):
            from gradprobe.probe.output import claim_probe_file

            claim_probe_file(out, "alignment.safetensors")  # write_probe_files names it, then makes the file
            raise _Killed("after naming alignment.safetensors")
    copy(one_batch_probe / "probe.json", out / "probe.json")
    before = _tree(out)
    capsys.readouterr()
    assert main(_PROBE + ["--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"gradprobe probe: error: --out {str(out)!r} holds probe.json, which the probe killed there before it was "
        f"complete did not write (its record {UNFINISHED_PROBE} does not name it, or it is a link or older than the "
        f"record), so it is no probe's and kept (a probe writes {', '.join(PROBE_FILES)}): a probe there would "
        f"overwrite it. Move probe.json out of {str(out)!r} and probe again (the probe removes what the killed one "
        f"left), or choose another --out\n")
    assert no_compute == [] and _tree(out) == before
    assert (out / "probe.json").read_bytes() == (one_batch_probe / "probe.json").read_bytes()
    (out / "probe.json").rename(tmp_path / "probe.json")  # the fix: the killed probe left nothing else to remove
    with replacing_earlier_probe(out, say=pytest.fail):
        assert sorted(p.name for p in out.iterdir()) == [UNFINISHED_PROBE]
    assert sorted(p.name for p in out.iterdir()) == []
