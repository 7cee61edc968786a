"""The public API at the package's top level (issue 15): gradprobe.probe / load_probe / load_study /
rank_prompts / Study / train, calib.load / calib.apply.

The probe and rank-prompts wrappers are compared with the command line run on the same settings in the
same process: the numbers must be the command's. The random ``tiny-qwen2`` never solves chain_sum, so the
task ``digit3`` (chain_sum prompts, a completion is correct iff it contains a 3: mixed groups on a random
model, so non-zero advantages and a non-zero reference) is put in place of ``load_task`` in each module
that calls it (``gradprobe.difficulty.rank``, ``gradprobe.probe.run``, ``gradprobe.probe.batches``) for both paths.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import calib
import gradprobe
from gradprobe.cli import main

from helpers_tasks import ScoredTask

REPO = Path(__file__).resolve().parents[1]
STUDY = REPO / "data" / "study_tiny"
PUBLIC = ["ProbeResult", "RunResult", "SamplingConfig", "Study", "StudyAnalysis", "StudyResult", "answers_match",
          "evaluate_difficulty", "extract_answer", "load_plan", "load_policy", "load_probe", "load_study", "load_task",
          "probe", "prompt_features", "rank_prompts", "register_reward", "sample_outcomes", "sequence_reward", "train"]

PROBE_SETTINGS = dict(prompts=4, group=4, heldout_prompts=3, heldout_group=4, max_new_tokens=24, continuations=2,
                      max_steps=2, n_bootstrap=100, budget_tokens=50_000, seed=0)
PROBE_FLAGS = ["--prompts", "4", "--group", "4", "--heldout-prompts", "3", "--heldout-group", "4",
               "--max-new-tokens", "24", "--continuations", "2", "--max-steps", "2", "--bootstrap", "100",
               "--budget-tokens", "50000", "--seed", "0"]


def _digit3_tasks(mp: pytest.MonkeyPatch) -> None:
    import gradprobe.difficulty.rank
    import gradprobe.probe.batches
    import gradprobe.probe.run
    import gradprobe.tasks as tasks

    real = tasks.load_task
    digit3 = lambda spec, **kw: ScoredTask() if spec == "digit3" else real(spec, **kw)  # noqa: E731
    for module in (gradprobe.difficulty.rank, gradprobe.probe.run, gradprobe.probe.batches):  # each caller's load_task
        mp.setattr(module, "load_task", digit3)


def test_import_is_torch_free_and_lists_the_public_names():
    code = ("import sys, gradprobe, calib\n"
            "assert 'torch' not in sys.modules, 'import gradprobe/calib loaded torch'\n"
            "gradprobe.load_plan, gradprobe.load_study, gradprobe.Study, gradprobe.rank_prompts, gradprobe.load_probe\n"
            "assert 'torch' not in sys.modules, 'a lazy name loaded torch'\n"
            "print(sorted(gradprobe.__all__)); print([n for n in dir(gradprobe) if not n.startswith('_')])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    all_line, dir_line = out.stdout.strip().splitlines()
    assert eval(all_line) == PUBLIC and eval(dir_line) == PUBLIC
    assert "apply" in calib.__all__ and "load" in calib.__all__
    with pytest.raises(AttributeError, match="no_such_name"):
        gradprobe.no_such_name  # noqa: B018


def test_probe_and_apply_are_callable_and_still_packages():
    import calib.apply
    import gradprobe.probe.run

    assert callable(gradprobe.probe) and gradprobe.probe.run is gradprobe.probe.run  # the subpackage, callable
    assert callable(calib.apply) and calib.apply.calibrate is not None
    from gradprobe import probe, sequence_reward
    from gradprobe.rewards import sequence_reward as original

    assert probe is sys.modules["gradprobe.probe"] and sequence_reward is original


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """(API result, the CLI's probe.json, the CLI's folder) on the same settings."""
    root = tmp_path_factory.mktemp("api_probe")
    with pytest.MonkeyPatch.context() as mp:
        _digit3_tasks(mp)
        rc = main(["probe", "--model", "tiny-qwen2", "--task", "digit3", "--rewards", "outcome,mc_value",
                   "--reference-curve", "default", "--no-progress", "--out", str(root / "cli"), *PROBE_FLAGS])
        assert rc == 0
        result = gradprobe.probe("tiny-qwen2", "digit3", rewards=["outcome", "mc_value"], reference_curve="default",
                                 progress=False, **PROBE_SETTINGS)
    return result, json.loads((root / "cli" / "probe.json").read_text()), root / "cli"


def _same(a, b):
    a = float("nan") if a is None else float(a)
    b = float("nan") if b is None else float(b)
    return (math.isnan(a) and math.isnan(b)) or a == b


def test_probe_table_equals_the_cli_probe_json(probed):
    result, cli, _ = probed
    table = result.table
    assert list(table.index) == ["outcome", "mc_value"]
    for r in cli["rewards"]:
        row = table.loc[r["name"]]
        assert r["inner_product"] != 0  # a real signal: the comparison below is not 0 == 0
        for col, key in (("inner_product", "inner_product"), ("snr", "snr"),
                         ("gain_per_update", "predicted_gain_per_update"), ("tokens_per_update", "tokens_per_update"),
                         ("gain_at_budget", "predicted_gain_at_budget")):
            assert _same(row[col], r[key]), (r["name"], col, row[col], r[key])
        assert _same(row["inner_product_low"], r["interval"][0]) and _same(row["inner_product_high"], r["interval"][1])
    assert cli["forecast"]["available"]
    for f in cli["forecast"]["rows"]:
        row = table.loc[f["arm"]]
        for col in ("forecast_gain", "rho", "rho_raw", "effective_updates", "forecast_accuracy"):
            assert _same(row[col], f[col]), (f["arm"], col)
        assert _same(row["rho_snr"], f["snr"]) and row["verdict"] == f["verdict"] and row["method"] == f["method"]
    assert result.table.loc["mc_value", "tokens_per_update"] > result.table.loc["outcome", "tokens_per_update"]


def test_probe_alignment_tokens_and_round_trip(probed, tmp_path):
    result, _, cli_dir = probed
    n = PROBE_SETTINGS["prompts"] * PROBE_SETTINGS["group"]
    a, mask = result.alignment, result.completion_mask
    assert a.shape[0] == n and a.shape == mask.shape and a.abs().sum() > 0
    assert torch.all(a[~mask] == 0)
    tokens = result.tokens()
    assert len(tokens) == int(mask.sum())
    assert list(tokens.columns[-2:]) == ["advantage_outcome", "advantage_mc_value"]
    first = tokens[tokens.completion == 0]
    assert np.allclose(first.alignment.to_numpy(), a[0][mask[0]].double().numpy())
    assert np.allclose(first.advantage_outcome.to_numpy(), result.advantages("outcome")[0][mask[0]].numpy())
    with pytest.raises(KeyError, match="probed: outcome, mc_value"):
        result.advantages("bogus")

    written = result.write(tmp_path / "copy")
    assert sorted(p.name for p in written.iterdir()) == sorted(p.name for p in cli_dir.iterdir())
    back = gradprobe.load_probe(written)
    pd.testing.assert_frame_equal(back.table, result.table)
    assert torch.equal(back.alignment, a) and back.raw == result.raw
    pd.testing.assert_frame_equal(back.tokens(), tokens)


def test_probe_with_a_function_reward_and_bad_settings(tmp_path):
    def contains_three(prompts, completions, **columns):
        return [float("3" in c) for c in completions]

    with pytest.raises(ValueError, match="unknown probe setting.*promts.*valid:.*prompts"):
        gradprobe.probe("tiny-qwen2", "chain_sum", rewards=["outcome"], out=tmp_path / "x", promts=4)
    with pytest.raises(ValueError, match=r"group \(--group\) must be >= 2"):
        gradprobe.probe("tiny-qwen2", "chain_sum", rewards=["outcome"], out=tmp_path / "x", group=1)
    with pytest.raises(ValueError, match=r"rewards\[1\].*lambda"):
        gradprobe.probe("tiny-qwen2", "chain_sum", rewards=["outcome", lambda p, c, **k: [0.0] * len(c)])
    assert not (tmp_path / "x").exists()  # refused input leaves nothing behind
    import matplotlib

    before = matplotlib.get_backend()
    matplotlib.use("svg", force=True)  # stands for a notebook's inline backend
    try:
        res = gradprobe.probe("tiny-qwen2", "chain_sum", rewards=["outcome", contains_three], prompts=2, group=4,
                              heldout_prompts=2, heldout_group=2, max_new_tokens=8, n_bootstrap=20, progress=False)
        assert matplotlib.get_backend() == "svg"  # report.html draws off-screen: plt.show() still draws
    finally:
        matplotlib.use(before, force=True)
    assert (res.folder / "report.html").is_file()
    assert list(res.table.index) == ["outcome", "contains_three"]
    assert "forecast_gain" not in res.table.columns  # no reference curve for tiny-qwen2: raw numbers only
    folder = res.folder
    assert (folder / "probe.json").is_file()
    del res
    import gc

    gc.collect()
    assert not folder.exists()  # the temporary folder lives as long as the result


def test_load_probe_errors_name_the_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="probe.json"):
        gradprobe.load_probe(tmp_path)
    study_probe = gradprobe.load_probe(STUDY / "probe")
    with pytest.raises(FileNotFoundError, match="alignment.safetensors"):
        study_probe.alignment  # noqa: B018
    with pytest.raises(FileNotFoundError, match="tokens.jsonl"):
        study_probe.tokens()


def test_load_study_on_the_shipped_tiny_study():
    study = gradprobe.load_study(STUDY)
    assert len(study.runs) == 150 and {"arm", "seed", "update", "accuracy"} <= set(study.runs.columns)
    assert sorted(study.runs.arm.unique()) == sorted(study.plan.arms)
    assert study.plan.name and study.plan.seeds == (0, 1, 2, 3)
    a = study.analysis
    assert a.control_arm == "grpo"
    assert a.rankings["generated_tokens"] == ["grpo", "hybrid_0.5", "grpo_2xlr", "mc_value", "mc_advantage"]
    assert list(a.hypotheses.name) == ["grpo_learns", "dense_not_worth_tokens", "dense_leads_per_update", "double_lr"]
    assert a.hypotheses.set_index("name").loc["grpo_learns", "estimate"] == pytest.approx(10.775)
    grpo = a.accuracy.set_index(["arm", "axis"]).loc[("grpo", "generated_tokens")]
    assert grpo.accuracy == pytest.approx(78.375) and grpo.gain_vs_control == 0
    assert ("grpo", "flops") not in set(zip(a.accuracy.arm, a.accuracy.axis))  # no read there: no row
    assert study.probe.rewards == ["outcome", "mc_value", "mc_advantage", "hybrid_0.5"]
    assert study.probe.table.loc["mc_value", "tokens_per_update"] == 25520
    with pytest.raises(ValueError, match="plan.toml"):
        gradprobe.load_study(STUDY / "probe")


def test_study_and_train_refuse_bad_input(tmp_path):
    src = tmp_path / "plan.toml"
    src.write_text((STUDY / "plan.toml").read_text())
    plan = gradprobe.load_plan(src)
    assert gradprobe.Study(plan, tmp_path / "s").plan_path == src
    src.write_text(src.read_text() + "\n# edited\n")
    with pytest.raises(ValueError, match="changed since it was loaded"):
        gradprobe.Study(plan, tmp_path / "s")
    with pytest.raises(ValueError, match="needs arm=.*grpo"):
        gradprobe.train(gradprobe.load_plan(src), tmp_path / "r")
    with pytest.raises(ValueError, match="no arm 'nope'"):
        gradprobe.train(src, tmp_path / "r", arm="nope")
    assert not (tmp_path / "s").exists() and not (tmp_path / "r").exists()


def test_rank_prompts_matches_the_cli(tmp_path, capsys):
    opts = dict(probe_samples=2, fit_prompts=8, max_new_tokens=8, seed=0, progress=False)
    flags = ["--probe-samples", "2", "--fit-prompts", "8", "--max-new-tokens", "8", "--seed", "0", "--no-progress"]
    with pytest.MonkeyPatch.context() as mp:
        _digit3_tasks(mp)
        assert main(["rank-prompts", "--model", "tiny-qwen2", "--task", "digit3", "--pool", "12",
                     "--out", str(tmp_path / "cli"), *flags]) == 0
        capsys.readouterr()
        table = gradprobe.rank_prompts("tiny-qwen2", "digit3", 12, **opts)
    assert capsys.readouterr().out == ""  # the command's summary goes to .attrs, not stdout
    cli = pd.read_csv(tmp_path / "cli" / "ranking.csv")
    assert list(table.prompt_id) == list(cli.prompt_id) and len(table) == 12
    np.testing.assert_array_equal(table.p_hat.to_numpy(), cli.p_hat.to_numpy())
    assert table.successes.sum() > 0 and not table.attrs["no_signal"]  # digit3: a real signal to rank by
    assert table.attrs["verdict"] == json.loads((tmp_path / "cli" / "rank.json").read_text())["verdict"]
    with pytest.raises(ValueError, match="unknown rank_prompts setting 'samples'.*probe_samples"):
        gradprobe.rank_prompts("tiny-qwen2", "chain_sum", 4, samples=2)
    with pytest.raises(ValueError, match="--probe-samples.*must be >= 1"):
        gradprobe.rank_prompts("tiny-qwen2", "chain_sum", 4, probe_samples=0)


def test_calib_apply_returns_a_table_and_writes_nothing():
    from calib.apply import calibrate, load_probe

    before = {p.name: p.read_bytes() for p in (STUDY / "probe").iterdir()}
    probe = gradprobe.load_study(STUDY).probe
    cal = calib.load("default")
    table = calib.apply(cal, probe)
    assert {p.name: p.read_bytes() for p in (STUDY / "probe").iterdir()} == before  # nothing written or rewritten
    raw, _, task = load_probe(STUDY / "probe")
    doc = calibrate(cal, raw, task=task)
    assert list(table.index) == [r["name"] for r in doc["rewards"]]
    assert table.loc["outcome", "calibrated_gain"] == 0 and table.loc["outcome", "interval_low"] == 0
    for r in doc["rewards"]:
        assert _same(table.loc[r["name"], "calibrated_gain"], r["calibrated_gain"])
        assert _same(table.loc[r["name"], "interval_high"], r["calibrated_interval"][1])
    assert table.loc["mc_value", "calibrated_gain"] < 0  # the shipped study: dense rewards lose at matched tokens
    pd.testing.assert_frame_equal(calib.apply("default", STUDY / "probe"), table)
    with pytest.raises(TypeError, match="probe_result"):
        calib.apply(cal, 3)


def test_the_probe_front_door_shows_its_own_signature_and_points_to_its_docs():
    import inspect

    params = inspect.signature(gradprobe.probe).parameters
    assert list(params)[:3] == ["model", "task", "rewards"] and "probe_batches" in params
    assert "help(gradprobe.api.probe.probe)" in gradprobe.probe.__doc__.split("\n\n")[1]
