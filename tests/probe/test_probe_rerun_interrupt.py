"""Probing again into an --out folder replaces the earlier probe whole (no stale calibrated.json), keeps other
files, refuses a training run's folder; Ctrl-C in ``gradprobe probe`` and ``gradprobe rank-prompts`` ends with
one line and exit status 130, not a traceback, and leaves nothing partial as if complete."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gradprobe.cli.difficulty as difficulty_cli
import gradprobe.cli.probe as probe_cli
import gradprobe.probe.batches as probe_batches
from gradprobe.cli import main
from gradprobe.forecast import default_curve_path
from gradprobe.layout import UNFINISHED_PROBE
from gradprobe.probe.output import EARLIER, replacing_earlier_probe

from helpers_rollout import one_thread

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

_PROBE = ["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--rewards", "outcome", "--prompts", "2",
          "--group", "2", "--heldout-prompts", "2", "--heldout-group", "2", "--max-new-tokens", "8", "--bootstrap",
          "20", "--no-progress", "--reference-curve", str(default_curve_path())]
_EARLIER = {"probe.json": '{"earlier": true}', "calibrated.json": "{}", "report.html": "<p>earlier</p>",
            "tokens.jsonl": "", "alignment.safetensors": "x"}


def _earlier_probe(folder):
    """A folder holding an earlier probe's files and a user's own file."""
    folder.mkdir()
    for name, text in _EARLIER.items():
        (folder / name).write_text(text)
    (folder / "notes.txt").write_text("mine")
    return folder


def test_probe_twice_leaves_no_stale_calibration(tmp_path, capsys):
    out = tmp_path / "p"
    assert main(_PROBE + ["--out", str(out), "--calibration", "default"]) == 0
    assert (out / "calibrated.json").is_file()
    (out / "notes.txt").write_text("mine")
    first = json.loads((out / "probe.json").read_text())
    capsys.readouterr()
    assert main(_PROBE + ["--out", str(out), "--seed", "1"]) == 0
    printed = capsys.readouterr().out
    assert not (out / "calibrated.json").exists()  # the earlier probe's calibration is gone
    assert (out / "notes.txt").read_text() == "mine" and not (out / EARLIER).exists()
    second = json.loads((out / "probe.json").read_text())
    assert second["config"]["seed"] == 1 and first["config"]["seed"] == 0 and "calibration" not in second
    assert sorted(p.name for p in out.iterdir()) == ["alignment.safetensors", "notes.txt", "probe.json", "report.html",
                                                     "tokens.jsonl"]
    assert printed.splitlines()[0] == (
        f"replaced the earlier probe in {out}: its files (alignment.safetensors, calibrated.json, probe.json, "
        "report.html, tokens.jsonl) were removed before this probe wrote its own")


def test_training_run_folder_is_refused_before_any_compute(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{}")
    (run / "metrics.jsonl").write_text('{"update": 1}\n')
    monkeypatch.setattr(probe_batches, "run_probe_batches", lambda *a, **k: pytest.fail("the probe ran"))
    assert main(_PROBE + ["--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gradprobe probe: error: --out {str(run)!r} holds a training run (`gradprobe train`) (metrics.jsonl), not a "
                          "probe's output") and "choose another --out" in err
    assert sorted(p.name for p in run.iterdir()) == ["config.json", "metrics.jsonl"]


def test_a_failed_probe_keeps_the_earlier_one(tmp_path, capsys, monkeypatch):
    out = _earlier_probe(tmp_path / "p")

    def fails(config, *, batches, out):
        (Path(out) / "probe.json").write_text('{"partial": true}')
        raise ValueError("bad reward")

    monkeypatch.setattr(probe_batches, "run_probe_batches", fails)
    assert main(_PROBE + ["--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"gradprobe probe: error: bad reward (the earlier probe in {out} was kept)"
    assert {p.name: p.read_text() for p in out.iterdir()} == {**_EARLIER, "notes.txt": "mine"}


def test_ctrl_c_in_probe_exits_130_with_one_line_and_restores_the_earlier_probe(tmp_path, capsys, monkeypatch):
    out = _earlier_probe(tmp_path / "p")

    def interrupted(config, *, batches, out):
        (tmp_path / "p" / "probe.json").write_text('{"partial": true}')
        (tmp_path / "p" / "batch_0").mkdir()
        (tmp_path / "p" / "batch_0" / "tokens.jsonl").write_text("")
        raise KeyboardInterrupt

    monkeypatch.setattr(probe_batches, "run_probe_batches", interrupted)
    assert main(_PROBE + ["--out", str(out)]) == 130
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err and len(cap.err.strip().splitlines()) == 1
    assert cap.err.startswith(f"gradprobe probe: interrupted; the unfinished probe's files in {out} were removed; "
                              "the earlier probe's files there (")
    assert "nothing partial is left as if complete" in cap.err
    assert {p.name: p.read_text() for p in out.iterdir()} == {**_EARLIER, "notes.txt": "mine"}


def test_ctrl_c_in_a_new_folder_leaves_nothing(tmp_path, capsys, monkeypatch):
    out = tmp_path / "new"

    def interrupted(config, *, batches, out):
        (tmp_path / "new").mkdir(exist_ok=True)  # made already for the probe's record of what it writes
        (tmp_path / "new" / "tokens.jsonl").write_text("")
        raise KeyboardInterrupt

    monkeypatch.setattr(probe_batches, "run_probe_batches", interrupted)
    assert main(_PROBE + ["--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert err.strip() == (f"gradprobe probe: interrupted; the unfinished probe's files in {out} were removed, so "
                           "nothing partial is left as if complete (run the same command again to probe)")
    assert not out.exists()


def test_ctrl_c_before_the_probe_started(tmp_path, capsys, monkeypatch):
    out = _earlier_probe(tmp_path / "p")

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(probe_cli, "_config_from_args", interrupted)
    assert main(_PROBE + ["--out", str(out)]) == 130
    assert capsys.readouterr().err.strip() == (f"gradprobe probe: interrupted before the probe started; nothing was "
                                               f"written to {out}")
    assert {p.name: p.read_text() for p in out.iterdir()} == {**_EARLIER, "notes.txt": "mine"}


_RANK = ["rank-prompts", "--model", "tiny-qwen2", "--task", "chain_sum", "--pool", "4"]


def test_ctrl_c_in_rank_prompts_exits_130_without_traceback(tmp_path, capsys, monkeypatch):
    out = tmp_path / "rank"

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(difficulty_cli, "rank_prompts", interrupted)
    assert main(_RANK + ["--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip() == (
        "gradprobe rank-prompts: interrupted; its files are written only at the end, so nothing partial is left as "
        "if complete")
    assert not out.exists()


def test_ctrl_c_between_rank_prompts_writes_removes_the_mismatched_pair(tmp_path, capsys, monkeypatch):
    out = tmp_path / "rank"
    out.mkdir()
    (out / "ranking.csv").write_text("old\n")
    (out / "rank.json").write_text('{"command": "rank-prompts", "old": true}')
    (out / "notes.txt").write_text("mine")
    seen = {}

    def interrupted(path, data):  # Ctrl-C inside the rank.json write, after the new ranking.csv is in place
        seen["ranking.csv"] = (out / "ranking.csv").read_text()
        seen["path"] = Path(path)
        raise KeyboardInterrupt

    monkeypatch.setattr("gradprobe.difficulty.rank_pool.write_json_atomic", interrupted)
    argv = _RANK + ["--fit-prompts", "2", "--probe-samples", "1", "--max-new-tokens", "4", "--no-progress"]
    assert main(argv + ["--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert seen["path"] == out / "rank.json" and seen["ranking.csv"].startswith("rank,prompt_id,p_hat")
    assert "Traceback" not in err and err.strip() == (
        "gradprobe rank-prompts: interrupted; its files are written only at the end, so nothing partial is left as "
        "if complete")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]  # new ranking.csv and the old rank.json removed


def test_replacing_earlier_probe_moves_only_probe_files(tmp_path):
    out = _earlier_probe(tmp_path / "p")
    # as gradprobe writes it (versions, config.probe_batches): the probe of batch_0 and batch_1
    (out / "probe.json").write_text(json.dumps({"versions": {"gradprobe": "0"}, "config": {"probe_batches": 2}}))
    (out / "batch_0").mkdir()
    (out / "batch_0" / "probe.json").write_text("{}")
    (out / "batch_1").mkdir()
    (out / "batch_1" / "mine.txt").write_text("not a probe's")
    with replacing_earlier_probe(out) as folder:
        assert folder.earlier == sorted([*_EARLIER, "batch_0"])
        assert sorted(p.name for p in out.iterdir()) == [EARLIER, UNFINISHED_PROBE, "batch_1", "notes.txt"]
        (out / "probe.json").write_text("{}")
    assert sorted(p.name for p in out.iterdir()) == ["batch_1", "notes.txt", "probe.json"]  # replaced
    assert (out / "batch_1" / "mine.txt").read_text() == "not a probe's"


def test_the_python_api_replaces_an_earlier_probe_and_refuses_a_run_folder(tmp_path):
    import gradprobe

    out = _earlier_probe(tmp_path / "api")
    res = gradprobe.probe("tiny-qwen2", "chain_sum", rewards="outcome", out=out, prompts=2, group=2, heldout_prompts=2,
                          heldout_group=2, max_new_tokens=8, n_bootstrap=20, progress=False,
                          reference_curve=str(default_curve_path()))
    assert not (out / "calibrated.json").exists() and (out / "notes.txt").read_text() == "mine"
    written = json.loads((out / "probe.json").read_text())
    assert "earlier" not in written and res.folder == out
    # the random model gets every answer wrong: no gradient, marked as the CLI marks it
    assert [(r["name"], r["no_signal"]) for r in written["rewards"]] == [("outcome", True)]
    assert "every group's rewards are equal" in written["rewards"][0]["no_signal_reason"]
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("")
    with pytest.raises(OSError, match="training run"):
        gradprobe.probe("tiny-qwen2", "chain_sum", rewards="outcome", out=run, prompts=2, group=2)
