"""Process rewards from a step verifier (no continuations), their hybrids, the PRM hook and trace fidelity."""

import math

import pytest
import torch

from gradprobe.char_tokenizer import char_tokenizer
from gradprobe.config import MCConfig, SamplingConfig
from gradprobe.ledger import Ledger
from gradprobe.rewards import (NotAClassificationModelError, RewardContext, UnknownRewardError,
                               get_reward, make_process_reward, prm_reward, trace_fidelity)
from gradprobe.rewards.process import (MASKED, arithmetic_line, chain_sum_line, chain_terms,
                                       check_steps, solution_reference_steps)
from gradprobe.rollout.base import Sample
from gradprobe.rollout.collect import build_batch
from gradprobe.tasks.base import Problem

from helpers_rollout import EOS, char_ids, one_thread
from helpers_training import metric_lines, train_tiny

EPS = 1e-4
F64 = torch.float64
_threads = pytest.fixture(scope="module", autouse=True)(one_thread)

CHAIN = Problem("chain_sum/train/0", "State the final answer to the following arithmetic problem: 3 + 3 + 6 =", "12",
                {"expression": "3 + 3 + 6"})
VALID = "3 + 3 = 6\n6 + 6 = 12\n#### 12"
WRONG = "3 + 3 = 7\n7 + 6 = 13\n#### 13"  # line 1 wrong; line 2 right given line 1
NO_STEPS = "#### 12"


class ChainTask:
    name = "chain_sum"

    def score(self, completion, problem):
        return float(completion.strip().endswith("#### " + problem.answer))

    def format_rate(self, completion):
        return "####" in completion


def statuses(text, problem=CHAIN, verifier=chain_sum_line):
    return check_steps(text.split("\n"), problem, verifier).statuses


def test_chain_verifier_on_hand_made_traces():
    assert statuses(VALID) == ["valid", "valid", "neutral"]  # the #### line is no step
    assert statuses(WRONG) == ["invalid", "valid", "neutral"]
    assert statuses("3 + 3 = 6\n6 + 7 = 13\n#### 13") == ["valid", "invalid", "neutral"]  # uses no term of the chain
    assert statuses("3 + 6 = 9\n9 + 3 = 12\n#### 12") == ["invalid", "invalid", "neutral"]  # skips a term (order)
    assert statuses("3 + 3 = 6\n5 + 6 = 11\n#### 11") == ["valid", "invalid", "neutral"]  # does not continue 6
    assert statuses("3 + 3 = 6\n6 + 6 = 12\n12 + 0 = 12") == ["valid", "valid", "invalid"]  # past the last term
    assert statuses("3 + 3 + 6 = 12") == ["invalid"]  # not the a op b = c form
    assert statuses("let me add\n3 + 3 = 6") == ["neutral", "valid"]  # no "=": neutral
    assert statuses(NO_STEPS) == ["neutral"]
    neg = Problem("c/1", "q: -6 + 5 - -3 - 7 =", "-5", {})
    assert chain_terms(neg) == [-6, 5, 3, -7]
    assert statuses("-6 + 5 = -1\n-1 + 3 = 2\n2 - 7 = -5", neg) == ["valid"] * 3  # "+ 3" continues "- -3"
    assert statuses("-6 + 5 = -1\n-1 - 3 = -4", neg) == ["valid", "invalid"]


def test_arithmetic_verifier_rules():
    assert arithmetic_line("Natalia sold 48/2 = <<48/2=24>>24 clips in May.") is True
    assert arithmetic_line("she earned 0.2 x 50 = $10.") is True
    assert arithmetic_line("1,200 + 300 = 1,500 and (3 + 2) * 4 = 20 = 4 * 5") is True
    assert arithmetic_line("10/3 = 3.33") is True and arithmetic_line("7/2 = 3") is False
    assert arithmetic_line("2 + 2 = 5") is False and arithmetic_line("5/0 = 1") is False
    assert arithmetic_line("She has 5 apples.") is None and arithmetic_line("x = 5") is None
    assert arithmetic_line("S + 143 = 200 - 16 = 184.") is True  # the cut-off "S + 143" is not judged
    gold = "Natalia sold 48/2 = <<48/2=24>>24 clips.\nShe has some.\nIn all 48+24 = <<48+24=72>>72.\n#### 72"
    assert solution_reference_steps(Problem("g/0", "q", "72", {"solution": gold})) == 2


def _batch(texts, scores, problem=CHAIN, tok=None):
    tok = tok or char_tokenizer()
    samples = [Sample(char_ids(tok, t) + [EOS], truncated=False) for t in texts]
    prompt = [1] + char_ids(tok, "3 + 3 + 6 =\n")
    return build_batch(tok, [problem], [prompt], samples, group_size=len(texts), temperature=1.0, scores=scores)


def _ctx(task=None, tok=None):
    return RewardContext(task=task or ChainTask(), sampler=None, sampling=SamplingConfig(), mc=MCConfig(),
                         ledger=Ledger(), tokenizer=tok or char_tokenizer(), eos_token_ids=[EOS])


def expected_process():
    """Float64 by hand. Step rewards A (1, 1), B (0, 1), C none: group mean 0.75, sample std
    sqrt(0.75 / 3) = 0.5; z = (v - 0.75) / (0.5 + eps); a token gets the suffix sum of its step."""
    s = 0.5 + EPS
    z_a, z_b = [0.25 / s, 0.25 / s], [-0.75 / s, 0.25 / s]
    rows = []
    for z, text in ((z_a, VALID), (z_b, WRONG)):
        l1, l2 = text.split("\n")[:2]
        rows.append([z[0] + z[1]] * (len(l1) + 1) + [z[1]] * (len(l2) + 1))
    width = len(VALID) + 1  # the longest completion, EOS included
    out = torch.zeros((3, width), dtype=F64)
    for n, r in enumerate(rows):
        out[n, : len(r)] = torch.tensor(r, dtype=F64)
    return out


def test_process_advantages_equal_a_float64_hand_computation_and_cost_no_tokens():
    batch, ctx = _batch([VALID, WRONG, NO_STEPS], [1.0, 0.0, 1.0]), _ctx()
    out = get_reward("process")(batch, ctx)
    assert out.advantages.dtype == F64
    torch.testing.assert_close(out.advantages, expected_process(), rtol=0, atol=1e-12)
    assert out.valid.all() and out.generated_tokens == {}
    assert out.stats["no_step_completions"] == 1 and out.stats["valid_steps"] == 3
    assert out.stats["invalid_steps"] == 1 and out.stats["verifier_errors"] == 0
    assert out.stats["mean_reward"] == pytest.approx((1.0 + 0.5 + 0.0) / 3)  # no steps: process reward 0
    assert ctx.ledger.total_generated == 0 and ctx.ledger.device_seconds["reward"] > 0
    seconds = ctx.ledger.device_seconds["reward"]
    get_reward("process_hybrid_0.9")(batch, ctx)  # the verdicts are cached per batch: not timed twice
    assert ctx.ledger.device_seconds["reward"] == seconds


@pytest.mark.parametrize("name, lam", [("process_hybrid_0.9", 0.9), ("process_hybrid_0.5", 0.5),
                                       ("process_hybrid_0.1", 0.1)])
def test_process_hybrids_are_convex_combinations_with_outcome(name, lam):
    batch, ctx = _batch([VALID, WRONG, NO_STEPS], [1.0, 0.0, 1.0]), _ctx()
    out = get_reward(name)(batch, ctx)
    a = [(r - 2 / 3) / (math.sqrt(1 / 3) + EPS) for r in (1.0, 0.0, 1.0)]  # outcome: mean 2/3, sample std
    outcome = torch.tensor(a, dtype=F64)[:, None] * batch.completion_mask.to(F64)
    torch.testing.assert_close(out.advantages, lam * expected_process() + (1 - lam) * outcome, rtol=0, atol=1e-12)
    assert out.name == name and out.generated_tokens == {} and out.stats["lambda"] == lam


def test_hybrid_weight_outside_the_unit_interval_is_refused():
    for lam in (1.5, -0.1, "0.5", True):
        with pytest.raises(ValueError, match="lam must be a number in \\[0, 1\\]"):
            make_process_reward(lam=lam)
    with pytest.raises(UnknownRewardError, match="process_hybrid_0.5"):
        get_reward("process_hybrid_1.5")


def test_a_raising_user_verifier_masks_its_step_and_the_run_goes_on():
    def verifier(line, problem, previous):
        if "7" in line:
            raise RuntimeError("cannot judge a 7")
        return chain_sum_line(line, problem, previous)

    batch, ctx = _batch([VALID, WRONG, NO_STEPS], [1.0, 0.0, 1.0]), _ctx()
    out = make_process_reward(verifier, name="mine")(batch, ctx)
    assert out.stats["verifier_errors"] == 2 and "cannot judge a 7" in out.stats["verifier_error_example"]
    # only A's two valid steps are scored: one value, zero variance -> all zero; masked tokens exactly 0
    assert out.stats["valid_steps"] == 2 and out.stats["no_step_completions"] == 2
    assert not out.advantages.any()
    assert check_steps(WRONG.split("\n"), CHAIN, verifier).statuses == [MASKED, MASKED, "neutral"]

    def by_line(line, problem, previous):  # raises on B's first line only: its tokens 0, its second step kept
        if line == "3 + 3 = 7":
            raise ValueError("boom")
        return chain_sum_line(line, problem, previous)

    skip = "3 + 3 = 6\n6 + 7 = 13\n#### 13"  # steps (1, 0): the group's step rewards vary
    out = make_process_reward(by_line, name="by_line")(_batch([VALID, WRONG, skip], [1.0, 0.0, 0.0]), _ctx())
    assert out.stats["verifier_errors"] == 1 and out.stats["valid_steps"] == 4
    assert not out.advantages[1, :10].any() and out.advantages[1, 10:21].ne(0).all()
    with pytest.raises(Exception, match="expected True, False or None"):
        check_steps(["3 + 3 = 6"], CHAIN, lambda line, p, prev: "yes")


def test_trace_fidelity():
    texts = [VALID, WRONG, NO_STEPS, "3 + 3 = 6\n#### 6"]
    got = trace_fidelity(ChainTask(), texts, [CHAIN] * 4)
    assert got["step_validity_rate"] == pytest.approx(4 / 5)  # valid steps 2 + 1 + 0 + 1 of 5
    assert got["step_count_deviation"] == pytest.approx((0 + 0 + 2 + 1) / 4)  # reference 2 steps
    class Other:
        name = "something_else"
    assert trace_fidelity(Other(), texts, [CHAIN] * 4) == {"step_validity_rate": None, "step_count_deviation": None}


# ----------------------------------------------------------------------------- PRM hook

def _save_prm(path, cls_name, num_labels=2):
    import transformers
    from transformers import Qwen2Config

    tok = char_tokenizer()
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, num_labels=num_labels, pad_token_id=0)
    torch.manual_seed(0)
    model = getattr(transformers, cls_name)(cfg)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return model.eval()  # no dropout: as the PRM is run


def test_prm_token_classifier_scores_steps_and_charges_flops(tmp_path):
    model = _save_prm(tmp_path, "Qwen2ForTokenClassification")
    reward = prm_reward(tmp_path)
    assert reward.kind == "token"
    batch, ctx = _batch([VALID, WRONG, NO_STEPS], [1.0, 0.0, 1.0]), _ctx()
    out = reward(batch, ctx)
    tok = reward.tokenizer
    tokens, probs = 0, []
    for text in (VALID, WRONG):  # independent forward: question, then the two steps; V_s at each step's last token
        q = tok(CHAIN.question + "\n")["input_ids"]
        s1, s2 = [tok(x, add_special_tokens=False)["input_ids"] for x in (text.split("\n")[0] + "\n",
                                                                           text.split("\n")[1] + "\n")]
        ids = q + s1 + s2 + tok(text.split("\n")[2], add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            p = torch.softmax(model(input_ids=torch.tensor([ids])).logits[0].double(), -1)[:, 1]
        probs += [float(p[len(q + s1) - 1]), float(p[len(q + s1 + s2) - 1])]
        tokens += len(ids)
    params = sum(p.numel() for p in model.parameters())
    assert out.stats["prm_tokens"] == tokens and out.stats["no_step_completions"] == 1
    assert ctx.ledger.flops["reward"] == 2.0 * params * tokens and ctx.ledger.device_seconds["reward"] > 0
    assert out.stats["mean_step_value"] == pytest.approx(sum(probs) / 4, abs=1e-6)
    assert out.generated_tokens == {} and ctx.ledger.total_generated == 0
    assert torch.isfinite(out.advantages).all() and out.advantages[0].any() and not out.advantages[2].any()


def test_prm_sequence_classifier_reads_one_prefix_per_step(tmp_path):
    _save_prm(tmp_path, "Qwen2ForSequenceClassification", num_labels=1)
    reward = prm_reward(tmp_path, lam=0.5)
    batch, ctx = _batch([VALID, WRONG, NO_STEPS], [1.0, 0.0, 1.0]), _ctx()
    out = reward(batch, ctx)
    assert reward.kind == "sequence" and out.stats["prm_forward_sequences"] == 4 and out.stats["lambda"] == 0.5
    assert 0.0 < out.stats["mean_step_value"] < 1.0 and torch.isfinite(out.advantages).all()


def test_prm_refuses_a_model_that_is_not_a_classifier(tmp_path):
    _save_prm(tmp_path, "Qwen2ForCausalLM")
    with pytest.raises(NotAClassificationModelError, match="Qwen2ForCausalLM.*ForTokenClassification"):
        prm_reward(tmp_path)
    _save_prm(tmp_path / "tok", "Qwen2ForTokenClassification")
    with pytest.raises(NotAClassificationModelError, match="sequence-classification"):
        prm_reward(tmp_path / "tok", kind="sequence")


# ----------------------------------------------------------------------------- probe and training accept them

def test_probe_runs_with_the_process_rewards_on_the_tiny_tier(tmp_path):
    from gradprobe.probe.run import ProbeConfig, run_probe
    from gradprobe.tiers import TINY_FRONTIER_TASK
    from gradprobe.tasks import load_task

    config = ProbeConfig.from_dict(dict(
        model="tiny", task="chain_sum", rewards=("outcome", "process", "process_hybrid_0.5"), prompts=3, group=4,
        heldout_prompts=2, heldout_group=4, sampling=SamplingConfig(max_new_tokens=40, temperature=1.0),
        n_bootstrap=50, lr=1e-4, budget_tokens=100_000, progress=False, precondition="none", threads=1))
    result = run_probe(config, out=tmp_path / "probe", task=load_task("chain_sum", **TINY_FRONTIER_TASK))
    entries = {r["name"]: r for r in result["rewards"]}
    assert list(entries) == ["outcome", "process", "process_hybrid_0.5"]
    for name in ("process", "process_hybrid_0.5"):
        e = entries[name]
        for key in ("inner_product", "predicted_gain_per_update", "predicted_gain_at_budget", "snr"):
            assert math.isfinite(e[key]), (name, key)
        assert e["generated_tokens"] == {} and e["tokens_per_update"] == entries["outcome"]["tokens_per_update"]
        assert e["reward_stats"]["valid_steps"] + e["reward_stats"]["invalid_steps"] > 0
    assert result["ledger"]["generated_tokens"]["continuation"] == 0
    assert result["ledger"]["device_seconds"]["reward"] > 0


def test_one_training_update_with_the_process_reward(tmp_path):
    summary = train_tiny(tmp_path / "run", arm="process", reward="process")
    assert summary["updates"] == 1 and summary["ledger"]["generated_tokens"]["continuation"] == 0
    lines = metric_lines(tmp_path / "run")
    update = next(x for x in lines if not x.get("eval"))
    assert update["reward_stats"]["valid_steps"] + update["reward_stats"]["invalid_steps"] > 0
    assert math.isfinite(update["loss"])
    for e in (x for x in lines if x.get("eval")):
        assert 0.0 <= e["step_validity_rate"] <= 1.0 and e["step_count_deviation"] >= 0.0


@pytest.mark.parametrize("line, verdict", [
    ("3 + 4 = 7 = 8", False), ("3 + 4 = 7 = 7", True), ("3 + 4 = 8 = 7", False), ("10/3 = 3.33 = 3.3", True),
    ("x = 5 = 5", None), ("2 + 2 = 4 and 5 = 6", True), ("3 + 4 = 7 = 8.", False),
    # a chain that converts units is no false step (a reviewer's cases, held before the chain rule)
    ("20/100 = 0.2 = 20%", True), ("1/2 = 0.5 = 50%", True), ("2 * 60 = 120 = 2 hours", True),
    ("12 * 5 = 60 = 1 hour", True), ("2000 * 2 = 4000 = 4 thousand", True)])
def test_a_chained_equality_is_checked_to_its_end(line, verdict):
    """'3 + 4 = 7 = 8' held: '7 = 8' has no operation on either side, so it was not counted; it continues a counted
    pair, so it counts now. Lone numbers not chained to a counted pair are still not steps."""
    assert arithmetic_line(line) is verdict
