"""End-to-end probe: the real pipeline (load, rollouts, rewards, reference, jvp, estimates, files)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from gradprobe.cli import main
from gradprobe.config import MCConfig, SamplingConfig
from gradprobe.probe.run import ProbeConfig, format_table, run_probe
from gradprobe.tasks import load_task

from helpers_tasks import ScoredTask


def _config(**kw):
    base = dict(model="tiny-qwen2", task="digit3", rewards=("outcome", "mc_value", "mc_advantage"), prompts=4, group=4,
                heldout_prompts=3, heldout_group=4, sampling=SamplingConfig(max_new_tokens=24, temperature=1.0),
                mc=MCConfig(continuations=2, max_steps=3), n_bootstrap=200, lr=1e-4, budget_tokens=100_000,
                progress=False, precondition="adam", second_moment_minibatches=2)
    base.update(kw)
    return ProbeConfig.from_dict(base)


@pytest.fixture(scope="module")
def tiny_result(tmp_path_factory):
    out = tmp_path_factory.mktemp("probe")
    return run_probe(_config(), out=out, task=ScoredTask()), out


def test_probe_json_has_the_promised_fields(tiny_result):
    result, out = tiny_result
    saved = json.loads((out / "probe.json").read_text())
    assert [r["name"] for r in saved["rewards"]] == ["outcome", "mc_value", "mc_advantage"]
    for r in saved["rewards"]:
        for key in ("name", "inner_product", "predicted_gain_per_update", "tokens_per_update",
                    "predicted_gain_at_budget", "interval", "snr"):
            assert key in r, key
        assert math.isfinite(r["inner_product"])
    assert set(saved["ledger"]["generated_tokens"]) == {"rollout", "continuation", "selection", "eval"}
    assert saved["config"]["model"] == "tiny-qwen2" and saved["versions"]["torch"] == torch.__version__
    assert (out / "alignment.safetensors").stat().st_size > 0
    lines = (out / "tokens.jsonl").read_text().splitlines()
    assert len(lines) == 16
    row = json.loads(lines[0])
    assert len(row["tokens"]) == len(row["alignment"]) == len(row["advantages"]["outcome"]) == len(row["texts"])


def test_token_texts_join_to_the_decoded_text_with_a_byte_level_bpe():
    """A byte-level BPE (the GPT-2/Qwen/SmolLM2 kind) splits "é€" into byte pieces: the raw pieces
    are unreadable ("Ġ", "Ã"...), the texts are what each token adds and join to the decoded text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from gradprobe.probe.run import token_texts

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    raw.train_from_iterator(["12 + 7 = 19\n#### 19", "the cat sat"] * 20,
                            trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=raw)
    text = "12 + 7 = 19\n#### 19 café €5"
    ids = tok.encode(text)
    texts = token_texts(tok, ids)
    assert len(texts) == len(ids) and "".join(texts) == tok.decode(ids) == text
    pieces = tok.convert_ids_to_tokens(ids)
    assert any("Ġ" in p for p in pieces) and not any("Ġ" in t for t in texts)
    assert "" in texts  # a byte of "é" or "€" alone adds no character; the next byte completes it
    assert token_texts(tok, []) == []


def test_ledger_and_token_accounting_add_up(tiny_result):
    result, _ = tiny_result
    led = result["ledger"]["generated_tokens"]
    by_name = {r["name"]: r for r in result["rewards"]}
    assert led["rollout"] == result["batch"]["generated_tokens"] > 0
    assert led["continuation"] > 0 and led["eval"] == 0 and led["selection"] == 0
    assert by_name["outcome"]["tokens_per_update"] == led["rollout"]
    # continuations are charged once to the ledger, but every MC reward pays them per update
    assert by_name["mc_value"]["tokens_per_update"] == led["rollout"] + led["continuation"]
    assert by_name["mc_advantage"]["tokens_per_update"] == led["rollout"] + led["continuation"]
    # the reference's held-out rollouts live in their own ledger, never charged to the rewards
    assert result["reference"]["ledger"]["generated_tokens"]["eval"] > 0
    # the alignment-to-update ratio on both clocks: the CPU one is what benchmarks/probe_cost.py --clock cpu judges
    c = result["costs"]
    assert c["update_forward_backward_cpu_seconds"] > 0 and c["alignment_pass_cpu_seconds"] > 0
    assert c["alignment_to_update_cpu_ratio"] == pytest.approx(c["alignment_pass_cpu_seconds"]
                                                               / c["update_forward_backward_cpu_seconds"])
    assert "on the process's CPU clock" in format_table(result)


def test_estimates_are_internally_consistent(tiny_result):
    result, _ = tiny_result
    for r in result["rewards"]:
        assert sum(r["per_group"]) == pytest.approx(r["inner_product"], rel=1e-9, abs=1e-15)
        assert r["predicted_gain_per_update"] == pytest.approx(100 * 1e-4 * r["inner_product"])
        assert r["predicted_gain_at_budget"] == pytest.approx(100_000 / r["tokens_per_update"] * r["predicted_gain_per_update"])
        lo, hi = r["interval"]
        assert lo <= r["inner_product"] <= hi or lo == hi == r["inner_product"]
    assert result["batch"]["mean_reward"] not in (0.0, 1.0)  # the digit task gives mixed groups
    assert any(abs(r["inner_product"]) > 0 for r in result["rewards"])


def test_alignment_file_matches_a_fresh_recomputation(tiny_result):
    """The saved outcome inner product equals sum w A a recomputed from the saved tensors."""
    from safetensors.torch import load_file

    from gradprobe.grpo.losses import token_weights

    result, out = tiny_result
    t = load_file(str(out / "alignment.safetensors"))
    w = token_weights(t["completion_mask"], "grpo")
    ip = float((w * t["advantages.outcome"] * t["alignment"].double()).sum())
    assert ip == pytest.approx(result["rewards"][0]["inner_product"], rel=1e-6)


def test_direction_reference_and_sgd(tmp_path):
    from gradprobe.models import load_policy
    from gradprobe.probe import save_direction, trainable_parameters

    policy = load_policy("tiny-qwen2")
    gen = torch.Generator().manual_seed(3)
    v = {k: torch.randn(p.shape, generator=gen) for k, p in trainable_parameters(policy.model).items()}
    path = tmp_path / "v.safetensors"
    save_direction(v, path)
    result = run_probe(_config(reference=f"direction:{path}", precondition="none", rewards=("outcome", "mc_value"),
                               cosine=True), policy=policy, task=ScoredTask())
    assert result["reference"]["kind"] == "direction"
    for r in result["rewards"]:  # with u = v the cosine has the inner product's sign
        assert -1 <= r["cosine"] <= 1 and (r["cosine"] > 0) == (r["inner_product"] > 0)
    assert result["reference"]["norm"] == pytest.approx(float(torch.sqrt(sum((x.double() ** 2).sum() for x in v.values()))), rel=1e-5)


def test_cli_runs_and_reports_bad_input(tmp_path, capsys, caplog):
    rc = main(["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--rewards", "outcome", "--prompts", "2",
               "--group", "2", "--heldout-prompts", "2", "--heldout-group", "2", "--max-new-tokens", "8",
               "--bootstrap", "50", "--out", str(tmp_path / "o"), "--no-progress"])
    assert rc == 0 and (tmp_path / "o" / "probe.json").exists()
    printed = capsys.readouterr().out
    assert "outcome" in printed
    # a random model never solves chain_sum: the reference is zero, and the user is told why and what to do
    assert "reference update is zero" in printed and "--heldout-prompts" in printed
    # each note is printed once, in the table, not logged a second time
    assert printed.count("reference update is zero") == 1
    assert not [r for r in caplog.records if "reference update is zero" in r.getMessage()]
    saved = json.loads((tmp_path / "o" / "probe.json").read_text())
    assert saved["warnings"]
    # all outcome groups flat: no second moment to precondition with, so no 1/eps blow-up (SGD fallback, warned)
    assert saved["reference"]["precondition"].startswith("none (fallback")
    assert any("Adam preconditioning was skipped" in w for w in saved["warnings"])
    for args, needle in ((["--model", "no-such-model"], "smollm2-135m"),
                         (["--task", "no_such_task"], "chain_sum"),
                         (["--rewards", "outcome,bogus"], "mc_value"),
                         (["--group", "1"], "group"),
                         (["--micro-batch-size", "0"], "--micro-batch-size"),
                         (["--budget-seconds", "-5"], "--budget-seconds"),
                         (["--heldout-prompts", "0"], "--heldout-prompts"),
                         (["--device", "cuda:0"] if not torch.cuda.is_available() else ["--group", "0"], "--device cpu"
                          if not torch.cuda.is_available() else "group"),
                         (["--out", "/proc/version/x"], "choose another --out")):
        rc = main(["probe", "--model", "tiny-qwen2", "--no-progress", "--out", str(tmp_path / "x"), *args])
        err = capsys.readouterr().err
        assert rc == 2 and needle in err, (args, err)


def test_direction_errors_come_before_any_generation(tmp_path, monkeypatch):
    from gradprobe.probe import DirectionMismatchError
    from gradprobe.rollout import collect

    def no_generation(*a, **k):
        raise AssertionError("generated before checking the direction")

    monkeypatch.setattr(collect, "collect_rollouts", no_generation)
    monkeypatch.setattr("gradprobe.rollout.collect_rollouts", no_generation)
    monkeypatch.setattr("gradprobe.probe.stages.collect_rollouts", no_generation)  # where the probe looks it up
    from safetensors.torch import save_file

    save_file({"bogus": torch.zeros(2)}, str(tmp_path / "bad.safetensors"))
    with pytest.raises(DirectionMismatchError):
        run_probe(_config(reference=f"direction:{tmp_path / 'bad.safetensors'}"), task=ScoredTask())


def test_task_config_inline():
    task = load_task("chain_sum:min_terms=2,max_terms=2,min_digits=1,max_digits=1")
    for p in task.problems("train", 20, seed=0):
        assert p.question.count("+") + p.question.count("-") == 1


def test_reward_returning_none_and_raising(tmp_path):
    from gradprobe.rewards import sequence_reward
    from gradprobe.rewards.base import RewardFunctionError

    def half_none(prompts, completions, **kw):  # None on odd rows, NaN on every 4th: both masked and counted
        return [None if i % 2 else (float("nan") if i % 4 == 0 else float(len(c) % 2)) for i, c in enumerate(completions)]

    def first_group_none(prompts, completions, **kw):  # group 0 (rows 0-3) gets no reward at all
        return [None if i < 4 else float(len(c) % 2) for i, c in enumerate(completions)]

    result = run_probe(_config(rewards=("outcome",)), task=ScoredTask(),
                       extra_rewards={"half_none": sequence_reward(half_none),
                                      "first_group_none": sequence_reward(first_group_none)})
    entry = {r["name"]: r for r in result["rewards"]}["half_none"]
    assert entry["valid_completions"] == 4 and entry["reward_stats"]["missing"] == 12
    assert math.isfinite(entry["inner_product"])
    # masked rewards and groups without any reward are printed, not only recorded in probe.json
    from gradprobe.probe.run import format_table

    printed = format_table(result)
    for note in ("reward 'half_none': 12 of 16 completions got no reward (its value was None, NaN or +-inf); they are "
                 "masked (advantage 0, left out of their group's mean and std), not scored 0",
                 "reward 'first_group_none': 4 of 16 completions got no reward",
                 "reward 'first_group_none': 1 of 4 groups have no reward at all (every completion's reward is "
                 "missing), so they add nothing to its estimate"):
        assert any(w.startswith(note) for w in result["warnings"]), (note, result["warnings"])
        assert f"warning: {note}" in printed
    assert not any(w.startswith("reward 'half_none': ") and "groups have no reward" in w for w in result["warnings"])
    assert not any(w.startswith("reward 'outcome': ") and "no reward" in w for w in result["warnings"])

    def boom(prompts, completions, **kw):
        raise KeyError("no such column")

    with pytest.raises(RewardFunctionError, match="boom"):
        run_probe(_config(rewards=("outcome",)), task=ScoredTask(), extra_rewards={"boom": sequence_reward(boom, name="boom")})


@pytest.mark.slow
def test_end_to_end_on_smollm2(tmp_path):
    """The real pretrained model, real chain_sum prompts (small sizes)."""
    cfg = ProbeConfig.from_dict(dict(
        model="smollm2-135m", task="chain_sum", rewards=("outcome", "mc_value"), prompts=2, group=2,
        heldout_prompts=2, heldout_group=2, sampling=SamplingConfig(max_new_tokens=24),
        mc=MCConfig(continuations=1, max_steps=2), n_bootstrap=50, progress=False, second_moment_minibatches=1))
    result = run_probe(cfg, out=tmp_path)
    assert json.loads((tmp_path / "probe.json").read_text())["config"]["model"] == "smollm2-135m"
    assert result["ledger"]["generated_tokens"]["rollout"] == result["batch"]["generated_tokens"] > 0
    assert all(math.isfinite(r["inner_product"]) for r in result["rewards"])
    assert result["costs"]["alignment_pass_seconds"] > 0


def test_dr_grpo_normalises_by_the_sampling_limit_as_training_does(tmp_path):
    """dr_grpo's constant is L_max = max_new_tokens (Dr. GRPO; as grpo_step in training), not the
    batch's widest completion: the saved inner product equals sum w A a with that constant."""
    from safetensors.torch import load_file

    from gradprobe.grpo.losses import token_weights
    from gradprobe.models import load_policy

    policy = load_policy("tiny-qwen2")
    v = {k: torch.ones_like(p) for k, p in policy.model.named_parameters()}
    from gradprobe.probe import save_direction

    save_direction(v, tmp_path / "v.safetensors")
    result = run_probe(_config(reference=f"direction:{tmp_path / 'v.safetensors'}", precondition="none",
                               rewards=("outcome",), loss_type="dr_grpo",
                               sampling=SamplingConfig(max_new_tokens=40, temperature=1.0)),
                       out=tmp_path / "out", policy=policy, task=ScoredTask())
    t = load_file(str(tmp_path / "out" / "alignment.safetensors"))
    ip = float((token_weights(t["completion_mask"], "dr_grpo", max_completion_length=40)
                * t["advantages.outcome"] * t["alignment"].double()).sum())
    assert ip != 0.0 and result["rewards"][0]["inner_product"] == pytest.approx(ip, rel=1e-6)
    # any other constant (e.g. a batch width of 20) gives another value: the constant is really used
    other = float((token_weights(t["completion_mask"], "dr_grpo", max_completion_length=20) * t["advantages.outcome"]
                   * t["alignment"].double()).sum())
    assert other == pytest.approx(2 * ip, rel=1e-9) and result["rewards"][0]["inner_product"] != pytest.approx(other)


def test_corrupt_direction_file_is_a_clear_error_before_generation(tmp_path):
    bad = tmp_path / "garbage.safetensors"
    bad.write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        run_probe(_config(reference=f"direction:{bad}"), task=ScoredTask())


def test_skip_malformed_flag_on_real_gsm8k_rows(tmp_path, capsys, gsm8k_dir):
    lines = (gsm8k_dir / "test.jsonl").read_text().splitlines()[:10]
    src = tmp_path / "gsm8k.jsonl"
    src.write_text("\n".join(lines[:5] + ['{"question": "no answer here"}', "not json"] + lines[5:]) + "\n")
    args = ["probe", "--model", "tiny-qwen2", "--task", f"gsm8k:{src}", "--rewards", "outcome", "--prompts", "2",
            "--group", "2", "--heldout-prompts", "1", "--heldout-group", "2", "--max-new-tokens", "4",
            "--bootstrap", "20", "--no-progress"]
    # without the flag: the first bad row stops the probe, names its line and the flag, and leaves no folder
    assert main([*args, "--out", str(tmp_path / "strict")]) == 2
    err = capsys.readouterr().err
    assert "line 6" in err and "skip_malformed" in err
    assert not (tmp_path / "strict").exists()
    # with it: both bad rows are skipped, counted in probe.json, and the probe runs on the 10 good ones
    with pytest.warns(UserWarning, match="skipping malformed GSM8K row"):
        assert main([*args, "--skip-malformed", "--out", str(tmp_path / "lenient")]) == 0
    saved = json.loads((tmp_path / "lenient" / "probe.json").read_text())
    assert saved["batch"]["skipped_rows"] == 2 and saved["config"]["skip_malformed"] is True
    assert saved["batch"]["prompts"] == 2
    # the flag is refused for generated tasks, before any folder or model
    assert main(["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--skip-malformed",
                 "--out", str(tmp_path / "rg")]) == 2
    assert "applies only to tasks read from data" in capsys.readouterr().err and not (tmp_path / "rg").exists()


def test_refused_input_leaves_no_output_folder(tmp_path, capsys):
    for args in (["--task", "no_such_task"], ["--model", "no-such-model"], ["--rewards", "bogus"]):
        out = tmp_path / "refused"
        rc = main(["probe", "--model", "tiny-qwen2", "--no-progress", "--out", str(out), *args])
        assert rc == 2 and not out.exists(), (args, capsys.readouterr().err)
    kept = tmp_path / "kept"
    (kept / "mine.txt").parent.mkdir()
    (kept / "mine.txt").write_text("user file")
    assert main(["probe", "--model", "tiny-qwen2", "--task", "no_such_task", "--out", str(kept)]) == 2
    assert (kept / "mine.txt").read_text() == "user file"  # a folder the user made is never removed


def test_update_batch_scales_tokens_and_the_budget_extrapolation_only(tiny_result):
    """A probe of a 4x4 batch predicting a 16x4 training update: same per-update gain, 4x the
    tokens and seconds per update, a quarter of the updates (and of the gain) at the budget."""
    base, _ = tiny_result
    assert any(b["predicted_gain_per_update"] != 0 for b in base["rewards"])  # else the gain checks are vacuous
    scaled = run_probe(_config(update_prompts=16), task=ScoredTask())
    assert scaled["batch"]["update_scale"] == 4.0 and base["batch"]["update_scale"] == 1.0
    for b, s in zip(base["rewards"], scaled["rewards"]):
        assert s["name"] == b["name"]
        assert s["predicted_gain_per_update"] == pytest.approx(b["predicted_gain_per_update"], rel=1e-9)
        assert s["tokens_per_update"] == 4 * b["tokens_per_update"]
        assert s["predicted_gain_at_budget"] == pytest.approx(b["predicted_gain_at_budget"] / 4, rel=1e-9)
    with pytest.raises(ValueError, match="update_group"):
        _config(update_group=1)
    with pytest.raises(ValueError, match="update_prompts"):
        _config(update_prompts=0)


def test_the_probe_samples_on_the_backend_it_is_given(tmp_path, monkeypatch, capsys):
    """``--backend`` / ``SamplingConfig.backend`` reaches :func:`gradprobe.rollout.make_sampler`."""
    import gradprobe.rollout as rollout
    from gradprobe.cli import main

    asked = []
    real = rollout.make_sampler

    def spy(backend, policy, **kw):
        asked.append(backend)
        return real("hf", policy, **kw)  # the same samples, so the run is cheap and checkable

    monkeypatch.setattr(rollout, "make_sampler", spy)
    monkeypatch.setattr("gradprobe.probe.stages.make_sampler", spy)  # where the probe looks it up
    cfg = _config(rewards=("outcome",), sampling=SamplingConfig(max_new_tokens=24, backend="hf_paged"))
    result = run_probe(cfg, task=ScoredTask())
    assert asked == ["hf_paged"] and result["config"]["sampling"]["backend"] == "hf_paged"
    with pytest.raises(SystemExit) as e:  # argparse refuses an unknown backend before anything runs
        main(["probe", "--backend", "nope", "--out", str(tmp_path / "p")])
    assert e.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()
