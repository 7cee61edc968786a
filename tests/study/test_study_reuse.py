"""``gradprobe study PLAN --out DIR --reuse-runs OTHER``: a study that adds arms to an earlier one
copies the finished runs it shares with it (same resolved configuration, same versions) instead of
training them again, and the copies are the runs this plan would have trained."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gradprobe.cli import main
from gradprobe.study.reuse import REUSED_JSON, ReuseError, reuse_runs
from gradprobe.study.runner import run_dir, run_study
from gradprobe.training.plan import load_plan

from helpers_rollout import one_thread
from study_helpers import toy_plan, write_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

GRPO = '[arms.grpo]\nreward = "outcome"\n'
TWICE = GRPO + '[arms.grpo_2xlr]\nreward = "outcome"\nlr_scale = 2.0\n'
TOKENS = 300


@pytest.fixture(scope="module")
def first(tmp_path_factory) -> Path:
    """A finished study of the grpo arm on seeds 0 and 1."""
    tmp = tmp_path_factory.mktemp("first")
    plan = write_plan(tmp, toy_plan("first", seeds=(0, 1), generated_tokens=TOKENS, arms=GRPO))
    out = tmp / "study"
    res = run_study(plan, out, executor="inline", probe=False, analyze=False)
    assert res.ok and len(res.done) == 2
    return out


def _second(tmp_path: Path, first: Path, text: str | None = None, **kw):
    plan = write_plan(tmp_path, text or toy_plan("second", seeds=(0, 1), generated_tokens=TOKENS, arms=TWICE))
    out = tmp_path / "second"
    lines: list[str] = []
    res = run_study(plan, out, executor="inline", probe=False, analyze=False, reuse_from=[first], say=lines.append,
                    **kw)
    return res, out, lines


def test_shared_runs_are_copied_byte_for_byte_and_marked_the_new_arm_is_trained(tmp_path, first):
    res, out, lines = _second(tmp_path, first)
    assert res.ok and sorted(res.done) == [("grpo", 0), ("grpo", 1), ("grpo_2xlr", 0), ("grpo_2xlr", 1)]
    assert sorted(res.skipped) == [("grpo", 0), ("grpo", 1)]  # not trained here
    assert any("reused 2 finished run(s)" in m for m in lines)
    for seed in (0, 1):
        src, dst = run_dir(first, "grpo", seed), run_dir(out, "grpo", seed)
        for name in ("metrics.jsonl", "summary.json", "config.json", "eval_items.jsonl"):
            assert (dst / name).read_bytes() == (src / name).read_bytes()
        assert json.loads((dst / REUSED_JSON).read_text())["source"] == str(src.resolve())
        assert not (run_dir(out, "grpo_2xlr", seed) / REUSED_JSON).exists()
    study = json.loads((out / "study.json").read_text())
    marks = {(r["arm"], r["seed"]): r.get("reused_from") for r in study["runs"]}
    assert marks[("grpo", 0)] == str(run_dir(first, "grpo", 0).resolve()) and marks[("grpo_2xlr", 0)] is None
    import csv

    with open(out / "runs.csv") as f:  # trace fidelity travels from each eval line into runs.csv
        table = [r for r in csv.DictReader(f) if r["arm"] == "grpo" and r["seed"] == "0"]
    evals = [json.loads(x) for x in (run_dir(out, "grpo", 0) / "metrics.jsonl").read_text().splitlines() if '"eval": true' in x]
    assert [float(r["step_count_deviation"]) for r in table] == [e["step_count_deviation"] for e in evals]
    assert [r["step_validity_rate"] or None for r in table] == [e["step_validity_rate"] for e in evals]
    rows = (out / "runs.csv").read_text().splitlines()
    assert sum(",grpo," in r for r in rows) == sum(",grpo," in r for r in (first / "runs.csv").read_text().splitlines())


def test_a_copied_run_is_the_run_this_plan_would_have_trained(tmp_path, first):
    """The premise of reuse: the second plan's grpo seed 0, trained afresh, equals the copy."""
    plan = write_plan(tmp_path, toy_plan("second", seeds=(0,), generated_tokens=TOKENS, arms=TWICE))
    out = tmp_path / "fresh"
    assert run_study(plan, out, executor="inline", probe=False, analyze=False).ok
    fresh, src = run_dir(out, "grpo", 0), run_dir(first, "grpo", 0)
    rows = {}
    for name in ("metrics.jsonl", "eval_items.jsonl"):
        a, b = ([_untimed(json.loads(line)) for line in (d / name).read_text().splitlines()] for d in (fresh, src))
        assert len(a) == len(b) >= 2 and a == b  # sampled lengths, entropies, tokens, FLOPs: equal
        rows[name] = a
    assert all(r["entropy"] > 0 for r in rows["metrics.jsonl"] if "entropy" in r)  # a real, sampled quantity


def _untimed(obj):
    """``obj`` without its wall-clock fields (every key with "seconds" in it), which differ between runs."""
    if isinstance(obj, dict):
        return {k: _untimed(v) for k, v in obj.items() if "seconds" not in k}
    return obj


def test_runs_of_another_configuration_or_version_are_not_reused_and_say_why(tmp_path, first):
    text = toy_plan("second", seeds=(0, 1), generated_tokens=TOKENS, arms=GRPO).replace("lr = 1e-3", "lr = 2e-3")
    lines: list[str] = []
    out = tmp_path / "other_lr"
    copied = reuse_runs(load_plan(write_plan(tmp_path, text)), out, [first], say=lines.append)
    assert copied == {}
    assert "config differs in: train: train.lr: 0.001 then, 0.002 now)" in lines[0]
    assert not run_dir(out, "grpo", 0).exists()

    src = tmp_path / "old_torch"
    subprocess.run(["cp", "-r", str(first), str(src)], check=True)
    cfg_path = run_dir(src, "grpo", 1) / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["versions"]["torch"] = "1.0.0"
    cfg_path.write_text(json.dumps(cfg))
    (run_dir(src, "grpo", 0) / "summary.json").unlink()  # seed 0 unfinished there
    lines = []
    plan = load_plan(write_plan(tmp_path, toy_plan("second", seeds=(0, 1), generated_tokens=TOKENS, arms=GRPO)))
    assert reuse_runs(plan, tmp_path / "versions", [src], say=lines.append) == {}
    assert "grpo seed 0 (partial)" in lines[0] and "torch 1.0.0 vs" in lines[0]


def test_a_second_source_fills_what_the_first_lacks_and_finished_runs_here_are_never_replaced(tmp_path, first):
    res, out, _ = _second(tmp_path, first)
    before = (run_dir(out, "grpo_2xlr", 0) / "metrics.jsonl").read_bytes()
    plan = load_plan(out / "plan.toml")
    assert reuse_runs(plan, out, [first]) == {}  # everything here is finished: nothing is touched
    assert (run_dir(out, "grpo_2xlr", 0) / "metrics.jsonl").read_bytes() == before
    third = tmp_path / "third"
    copied = reuse_runs(plan, third, [first, out])
    assert sorted(copied) == [("grpo", 0), ("grpo", 1), ("grpo_2xlr", 0), ("grpo_2xlr", 1)]
    assert copied[("grpo", 0)] == str(run_dir(first, "grpo", 0).resolve())  # the first source that has it
    assert copied[("grpo_2xlr", 1)] == str(run_dir(out, "grpo_2xlr", 1).resolve())


def test_bad_sources_are_refused_with_the_flag_named(tmp_path, first, capsys):
    plan = load_plan(write_plan(tmp_path, toy_plan("second", seeds=(0,), generated_tokens=TOKENS, arms=GRPO)))
    with pytest.raises(ReuseError, match="no runs/ folder"):
        reuse_runs(plan, tmp_path / "a", [tmp_path / "nowhere"])
    with pytest.raises(ReuseError, match="this study's own folder"):
        reuse_runs(plan, first, [first])
    broken = tmp_path / "broken"
    subprocess.run(["cp", "-r", str(first), str(broken)], check=True)
    (run_dir(broken, "grpo", 0) / "config.json").write_text("{not json")
    with pytest.raises(ReuseError, match="config.json"):
        reuse_runs(plan, tmp_path / "b", [broken])
    path = write_plan(tmp_path, toy_plan("second", seeds=(0,), generated_tokens=TOKENS, arms=GRPO), "p.toml")
    assert main(["study", str(path), "--out", str(tmp_path / "c"), "--reuse-runs", str(tmp_path / "nowhere"),
                 "--no-probe", "--executor", "inline"]) == 2
    assert "--reuse-runs" in capsys.readouterr().err
    assert main(["study", "--analyze-only", "--out", str(first), "--reuse-runs", str(first)]) == 2
    assert "--reuse-runs goes with a plan" in capsys.readouterr().err


def test_a_run_that_started_from_other_initial_weights_is_not_reused(tmp_path):
    """--reuse-runs compared the run configuration and versions, not the weights the model name resolved to: a run
    trained from the shipped tier was copied into a study whose 'tiny' now loads a rebuild in the cache."""
    from gradprobe.study.reuse import _other_weights
    from gradprobe.training.run_folder import model_weights_identity

    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights of the run")
    then = model_weights_identity(str(model))
    assert then["source"] == "folder" and then["method"] == "sha256" and len(then["digest"]) == 64
    assert _other_weights({"model_weights": then}, model_weights_identity(str(model))) is None
    (model / "model.safetensors").write_bytes(b"weights rebuilt since")
    now = model_weights_identity(str(model))
    assert _other_weights({"model_weights": then}, now) == (
        f"started from other initial weights ({model.resolve()}, digest {then['digest'][:12]}; the model loads "
        f"{model.resolve()}, digest {now['digest'][:12]}, now)")
    assert _other_weights({}, now).startswith("its initial weights were not recorded")
    assert _other_weights({"model_weights": {"source": 1}}, now) == (
        "its config.json is damaged (field model_weights is {\"source\": 1}; it needs \"source\" one of \"tier\", "
        "\"folder\", \"gguf\", \"hub\", \"given\" and \"path\" (text))")
    given = {"source": "given", "path": "tiny", "files": [], "method": None, "digest": None}
    assert _other_weights({"model_weights": given}, now) == (
        f"its initial weights were passed in code, so whether it started from the weights {model.resolve()} holds "
        "cannot be told")
    assert _other_weights({}, None) is None  # a generated model (tiny-qwen2): nothing to compare
    assert _other_weights({}, {"source": "hub", "path": "org/m", "digest": None}) is None
    (model / "config.json").write_text('{"rms_norm_eps": 1e-06}')
    then = model_weights_identity(str(model))
    (model / "config.json").write_text('{"rms_norm_eps": 0.1}')  # a tester's edit: the same weights, another model
    now = model_weights_identity(str(model))
    a, b = then["model_files"]["config.json"], now["model_files"]["config.json"]
    assert _other_weights({"model_weights": then}, now) == (
        f"same weights, but files beside them differ from when it ran: config.json (sha256 {a[:12]} then, {b[:12]} "
        "now)")
    before = {k: v for k, v in then.items() if k != "model_files"}  # recorded before model_files was
    assert _other_weights({"model_weights": before}, now) == (
        "its model's config.json and tokenizer files were not recorded (made before gradprobe recorded them), so "
        f"whether it used the ones {model.resolve()} holds now cannot be told")
