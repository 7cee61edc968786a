"""The probe along a reference run (gradprobe.probe.checkpoints, ``--checkpoints``): batches at the initial
policy and at kept weights, each policy its own reference draw, pooled; the caller's weights restored; bad
paths and weights of another model refused before their compute."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_model

from gradprobe.config import MCConfig, SamplingConfig
from gradprobe.forecast import forecast_rewards
from gradprobe.forecast.budget_forecast import entry_efficiencies
from gradprobe.forecast.curves import ReferenceCurve, default_curve_path
from gradprobe.forecast.probe_input import probe_batches_of
from gradprobe.models import load_policy
from gradprobe.probe.checkpoints import checkpoint_weights, load_weights, run_probe_checkpoints
from gradprobe.probe.run import ProbeConfig, run_probe

from helpers_tasks import ScoredTask
import probe_helpers as ph

single_thread = ph.single_thread


def _config(**kw):
    base = dict(model="tiny-qwen2", task="digit3", rewards=("outcome", "mc_value"), prompts=3, group=4,
                heldout_prompts=3, heldout_group=4, sampling=SamplingConfig(max_new_tokens=16, temperature=1.0),
                mc=MCConfig(continuations=2, max_steps=2), n_bootstrap=100, lr=1e-4, budget_tokens=50_000,
                progress=False, second_moment_minibatches=2, dtype="float64")
    base.update(kw)
    return ProbeConfig.from_dict(base)


def _state(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """The initial weights of tiny-qwen2 (float64, seed 0) and a moved copy, as .safetensors files."""
    folder = tmp_path_factory.mktemp("weights")
    policy = load_policy("tiny-qwen2", dtype="float64", seed=0)
    save_model(policy.model, str(folder / "same.safetensors"))
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(0.05 * p.abs().mean() * torch.randn(p.shape, generator=g, dtype=p.dtype))
    save_model(policy.model, str(folder / "moved.safetensors"))
    return folder


def test_a_checkpoint_equal_to_the_initial_policy_repeats_its_batch_exactly(weights, tmp_path):
    policy = load_policy("tiny-qwen2", dtype="float64", seed=0)
    before = _state(policy.model)
    res = run_probe_checkpoints(_config(), [weights / "same.safetensors"], out=tmp_path / "p", policy=policy,
                                task=ScoredTask())
    b0, b1 = res["batches"]
    assert (b0["checkpoint"], b1["checkpoint"]) == ("initial", "same")
    assert (b0["reference"]["draw"], b1["reference"]["draw"]) == ("initial", "same")
    assert b0["prompt_ids"] == b1["prompt_ids"]  # the policies are compared on the same prompts
    for e0, e1, pooled in zip(b0["rewards"], b1["rewards"], res["rewards"]):
        assert e0["per_group"] == e1["per_group"] and e0["inner_product"] != 0
        assert pooled["inner_product"] == pytest.approx(e0["inner_product"], rel=1e-12)
    assert res["config"]["checkpoints"] == [str(weights / "same.safetensors")] and res["config"]["probe_batches"] == 2
    assert json.loads((tmp_path / "p" / "probe.json").read_text())["batches"][1]["checkpoint"] == "same"
    assert (tmp_path / "p" / "batch_1" / "probe.json").is_file() and not (tmp_path / "p" / "batch_2").exists()
    from gradprobe import load_probe

    assert load_probe(tmp_path / "p").batch(1).raw["rewards"][0]["per_group"] == b1["rewards"][0]["per_group"]
    # each policy computed its own held-out reference, and the pooled ledger counts both (the pre-screen's tokens)
    eval_tokens = [json.loads((tmp_path / "p" / f"batch_{k}" / "probe.json").read_text())["reference"]["ledger"][
        "generated_tokens"]["eval"] for k in (0, 1)]
    assert min(eval_tokens) > 0 and res["reference"]["ledger"]["generated_tokens"]["eval"] == sum(eval_tokens)
    assert res["reference"]["draws"] == ["initial", "same"]
    assert all(torch.equal(v, before[k]) for k, v in policy.model.state_dict().items())


def test_a_moved_checkpoint_is_probed_as_a_policy_with_those_weights(weights):
    policy = load_policy("tiny-qwen2", dtype="float64", seed=0)
    before = _state(policy.model)
    res = run_probe_checkpoints(_config(), str(weights / "moved.safetensors"), policy=policy, task=ScoredTask())
    assert all(torch.equal(v, before[k]) for k, v in policy.model.state_dict().items())  # restored
    moved = load_policy("tiny-qwen2", dtype="float64", seed=0)
    load_weights(moved.model, weights / "moved.safetensors")
    alone = run_probe(_config(), policy=moved, task=ScoredTask())
    b0, b1 = res["batches"]
    assert b1["checkpoint"] == "moved"
    assert not np.allclose(b0["rewards"][0]["per_group"], b1["rewards"][0]["per_group"])  # the weights did move
    for e, ref in zip(b1["rewards"], alone["rewards"]):
        np.testing.assert_allclose(e["per_group"], ref["per_group"], rtol=1e-9, atol=1e-12)
    # pooled rho is the ratio of sums over both policies, and the spread between the two reference draws enters
    fr = forecast_rewards(ReferenceCurve.load(default_curve_path()), res, budget_tokens=50_000)
    rho_raw = fr.table.set_index("arm").loc["mc_value", "rho_raw"]
    num = sum(sum(b["rewards"][1]["per_group"]) for b in res["batches"])
    den = sum(sum(b["rewards"][0]["per_group"]) for b in res["batches"])
    assert rho_raw == pytest.approx(num / den, rel=1e-12) if den > 0 else np.isnan(rho_raw)
    notes = " ".join(fr.notes)
    assert "one reference draw shared" not in notes
    batches = probe_batches_of(res)
    effs, _ = entry_efficiencies(batches, ["outcome", "mc_value"], "outcome", n_draws=200, seed=0, level=0.95, notes=[])
    one_draw = [dict(b, draw="same") for b in batches]  # the same batches read as one reference draw
    effs1, _ = entry_efficiencies(one_draw, ["outcome", "mc_value"], "outcome", n_draws=200, seed=0, level=0.95, notes=[])
    assert effs["mc_value"].reference_noise and not effs1["mc_value"].reference_noise


def test_run_folders_give_their_kept_weights_in_update_order_with_distinct_labels(weights, tmp_path):
    for run in ("a", "b"):
        (tmp_path / run / "weights").mkdir(parents=True)
        for u in (10, 2):
            (tmp_path / run / "weights" / f"update-{u:06d}.safetensors").write_bytes(b"x")
    ckpt = tmp_path / "checkpoint-000025"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"x")
    got = checkpoint_weights(f"{tmp_path / 'a'}, {tmp_path / 'b'},{ckpt}")
    assert [label for label, _ in got] == ["update-000002", "update-000010", "update-000002-2", "update-000010-2",
                                           "checkpoint-000025"]
    assert got[-1][1] == ckpt / "model.safetensors"


@pytest.mark.parametrize("make, match", [
    (lambda p: "", "names no weights"),
    (lambda p: str(p / "missing"), "does not exist"),
    (lambda p: (p / "w.bin").write_bytes(b"x") and str(p / "w.bin"), "not a .safetensors"),
    (lambda p: (p / "run").mkdir() or str(p / "run"), "save_weights_at"),
    (lambda p: (p / "w.safetensors").write_bytes(b"x") and f"{p / 'w.safetensors'},{p / 'w.safetensors'}", "twice"),
])
def test_bad_checkpoint_paths_are_refused_naming_the_fix(tmp_path, make, match):
    with pytest.raises(ValueError, match=match):
        checkpoint_weights(make(tmp_path))


def test_weights_of_another_model_or_damaged_are_refused_before_any_batch(weights, tmp_path, monkeypatch):
    from gradprobe.rollout import collect

    def no_generation(*a, **k):
        raise AssertionError("generation started")

    other = load_policy("tiny-llama", dtype="float64", seed=0)
    save_model(other.model, str(tmp_path / "llama.safetensors"))
    (tmp_path / "bad.safetensors").write_text("garbage\n")
    policy = load_policy("tiny-qwen2", dtype="float64", seed=0)
    before = _state(policy.model)
    monkeypatch.setattr(collect, "collect_rollouts", no_generation)
    good = str(weights / "moved.safetensors")  # a good file first: every file is checked before any batch
    with pytest.raises(ValueError, match=r"llama\.safetensors does not fit the probe's model \((missing|unexpected|other "
                                         r"shapes): .*same --model"):
        run_probe_checkpoints(_config(), f"{good},{tmp_path / 'llama.safetensors'}", policy=policy, task=ScoredTask(),
                              out=tmp_path / "o1")
    with pytest.raises(ValueError, match=r"bad\.safetensors is not a readable safetensors file .*damaged"):
        run_probe_checkpoints(_config(), str(tmp_path / "bad.safetensors"), policy=policy, task=ScoredTask(),
                              out=tmp_path / "o2")
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(weights / "moved.safetensors"))
    tensors["model.norm.weight"] = tensors["model.norm.weight"][:-1].contiguous()  # one shape off, names all there
    save_file(tensors, str(tmp_path / "short.safetensors"))
    with pytest.raises(ValueError, match=r"short\.safetensors does not fit .*other shapes: model\.norm\.weight"):
        run_probe_checkpoints(_config(), str(tmp_path / "short.safetensors"), policy=policy, task=ScoredTask(),
                              out=tmp_path / "o3")
    del tensors["model.layers.0.mlp.up_proj.weight"]  # a missing name that is not tied to one the file has
    save_file(tensors, str(tmp_path / "fewer.safetensors"))
    with pytest.raises(ValueError, match=r"missing: model\.layers\.0\.mlp\.up_proj\.weight"):
        run_probe_checkpoints(_config(), str(tmp_path / "fewer.safetensors"), policy=policy, task=ScoredTask())
    assert not any((tmp_path / o).exists() for o in ("o1", "o2", "o3"))
    assert all(torch.equal(v, before[k]) for k, v in policy.model.state_dict().items())


def test_cli_refuses_a_missing_checkpoint_before_any_compute(tmp_path, capsys, monkeypatch):
    from gradprobe.cli import main
    from gradprobe.rollout import collect

    def no_generation(*a, **k):
        raise AssertionError("generation started")

    monkeypatch.setattr(collect, "collect_rollouts", no_generation)
    rc = main(["probe", "--model", "tiny-qwen2", "--no-progress", "--checkpoints", str(tmp_path / "run"),
               "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "--checkpoints" in err and "does not exist" in err and not (tmp_path / "o").exists()


def test_the_python_api_refuses_a_missing_checkpoint_before_any_compute(tmp_path, monkeypatch):
    import gradprobe
    from gradprobe.rollout import collect

    def no_generation(*a, **k):
        raise AssertionError("generation started")

    monkeypatch.setattr(collect, "collect_rollouts", no_generation)
    with pytest.raises(ValueError, match=r"--checkpoints: .*run does not exist"):
        gradprobe.probe("tiny-qwen2", checkpoints=[tmp_path / "run"], out=tmp_path / "o", progress=False)
    assert not (tmp_path / "o").exists()


def test_cli_probes_along_the_checkpoints_and_says_so_in_the_table_and_the_report(weights, tmp_path, capsys):
    from gradprobe.cli import main

    out = tmp_path / "o"
    rc = main(["probe", "--model", "tiny-qwen2", "--dtype", "float64", "--no-progress", "--rewards", "outcome,mc_value",
               "--prompts", "2", "--group", "4", "--heldout-prompts", "2", "--heldout-group", "4", "--max-new-tokens", "8",
               "--continuations", "2", "--bootstrap", "100", "--checkpoints", str(weights / "moved.safetensors"),
               "--out", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert "probed along a reference run: 2 policies (initial, moved), 1 batch(es) each, pooled" in printed
    result = json.loads((out / "probe.json").read_text())
    assert [b["checkpoint"] for b in result["batches"]] == ["initial", "moved"]
    html = (out / "report.html").read_text()
    assert "along a reference run: 1 at each of 2 policies (the initial one and " in html and "moved.safetensors" in html
