"""majority_vote: the label-free TTRL vote, its tie/unparsable rules and the answer-span mask."""

import math

import pytest
import torch

from gradprobe.char_tokenizer import char_tokenizer
from gradprobe.config import MCConfig, SamplingConfig
from gradprobe.ledger import Ledger
from gradprobe.rewards import REWARDS, RewardContext, get_reward, majority_vote_rewards
from gradprobe.rewards.majority import answer_span, answer_span_mask, answer_token_mask
from gradprobe.rollout.base import Sample
from gradprobe.rollout.collect import build_batch
from gradprobe.tasks.base import Problem
from gradprobe.tasks.verify import extract_answer

from helpers_rollout import EOS, char_ids, one_thread

EPS = 1e-4
F64 = torch.float64
_threads = pytest.fixture(scope="module", autouse=True)(one_thread)


class NumericTask:
    name = "chain_sum"
    numeric_answers = True


def _batch(groups, gold=("12",), scores=None, tok=None):
    """One group per entry of ``groups`` (lists of completion texts, EOS appended), char tokenizer."""
    tok = tok or char_tokenizer()
    g = len(groups[0])
    problems = [Problem(f"chain_sum/train/{i}", "3 + 3 + 6 =", gold[i % len(gold)], {"expression": "3 + 3 + 6"})
                for i in range(len(groups))]
    prompts = [[1] + char_ids(tok, "3 + 3 + 6 =\n") for _ in groups]
    samples = [Sample(char_ids(tok, t) + [EOS], truncated=False) for grp in groups for t in grp]
    return build_batch(tok, problems, prompts, samples, group_size=g, temperature=1.0, scores=scores)


def _ctx(tok=None, task=None):
    return RewardContext(task=task or NumericTask(), sampler=None, sampling=SamplingConfig(), mc=MCConfig(),
                         ledger=Ledger(), tokenizer=tok or char_tokenizer(), eos_token_ids=[EOS])


# ----------------------------------------------------------------------------- the vote

def test_clear_majority_numbers_compare_exactly_and_the_gold_is_not_read():
    r, majority, stats = majority_vote_rewards(["12", "12.0", "13", "$12"], 4, numeric=True)
    assert r.dtype == F64 and r.tolist() == [1.0, 1.0, 0.0, 1.0]
    assert majority == ["12"] and stats["majority_groups"] == 1 and stats["majority_share"] == 0.75
    assert stats["tie_groups"] == 0 and stats["unparsable_completions"] == 0
    # the majority may be wrong: the wrong answer wins, the gold does not enter
    r, majority, _ = majority_vote_rewards(["13", "13", "12", "7"], 4)
    assert r.tolist() == [1.0, 1.0, 0.0, 0.0] and majority == ["13"]


def test_ties_give_the_whole_group_zero_and_are_counted():
    r, majority, stats = majority_vote_rewards(["12", "13", "12", "13", "5", "6", "7", "8"], 4)
    assert r.tolist() == [0.0] * 8 and majority == [None, None]
    assert stats["tie_groups"] == 2 and stats["majority_groups"] == 0 and math.isnan(stats["majority_share"])


def test_unparsable_answers_never_form_the_majority():
    # three completions without a (numeric) answer, one with: the lone parsable answer is the majority
    r, majority, stats = majority_vote_rewards([None, "no number", None, "5", None, None, None, None], 4,
                                               numeric=True)
    assert r.tolist() == [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert majority == ["5", None]
    assert stats["unparsable_completions"] == 7 and stats["unparsable_groups"] == 1 and stats["tie_groups"] == 0
    # on a task with text answers any non-blank answer is parsable (case and spaces folded)
    r, _, stats = majority_vote_rewards(["Blue  sky", "blue sky.", "red", None], 4, numeric=False)
    assert r.tolist() == [1.0, 1.0, 0.0, 0.0] and stats["unparsable_completions"] == 1


def test_bad_group_size_is_refused():
    with pytest.raises(ValueError, match="group_size"):
        majority_vote_rewards(["1", "2"], 0)
    with pytest.raises(ValueError, match="groups of G = 3"):
        majority_vote_rewards(["1", "2"], 3)


# ----------------------------------------------------------------------------- the reward

A = "3 + 3 = 6\n6 + 6 = 12\n#### 12"
B = "3 + 3 = 6\n6 + 6 = 13\n#### 13"
C = "3 + 3 = 6\n#### 12.0"
NONE = "3 + 3 = 6"


def test_majority_vote_advantages_equal_a_float64_hand_computation_with_the_answer_masked():
    batch = _batch([[A, B, C, NONE]], gold=("999",), scores=[float("nan"), 1.0, 0.0, 1.0])
    out = get_reward("majority_vote")(batch, _ctx())
    assert "majority_vote" in REWARDS and out.name == "majority_vote"
    assert out.advantages.dtype == F64 and out.valid.all() and out.generated_tokens == {}
    # rewards (1, 0, 1, 0): mean 1/2, sample std sqrt(1/3); scores and the gold answer "999" play no part
    a = 0.5 / (math.sqrt(1 / 3) + EPS)
    expected = torch.zeros_like(out.advantages)
    for n, (text, sign) in enumerate(((A, 1), (B, -1), (C, 1), (NONE, -1))):
        expected[n, : len(text) + 1] = sign * a  # every token, EOS included ...
        span = answer_span(text)
        if span is not None:
            expected[n, span[0]: span[1]] = 0.0  # ... except the answer's characters (char tokenizer)
    torch.testing.assert_close(out.advantages, expected, rtol=0, atol=1e-12)
    assert out.stats["masked_answer_tokens"] == 2 + 2 + 4 and out.stats["answer_span_missing"] == 0
    assert out.stats["mean_reward"] == 0.5 and out.stats["unparsable_completions"] == 1
    assert out.stats["label_accuracy"] == 0.0  # majority 12, gold 999: a diagnostic only
    assert get_reward("majority_vote")(_batch([[A, B, C, NONE]], gold=("12",)), _ctx()).stats["label_accuracy"] == 1.0
    # the advantage scale is an explicit parameter (registered: "group"); "none" only centres: +-1/2
    centred = REWARDS["majority_vote"](batch, _ctx(), scale="none")
    torch.testing.assert_close(centred.advantages, expected / (2 * a), rtol=0, atol=1e-12)


def test_tied_and_unparsable_groups_give_zero_advantages_and_are_counted():
    batch = _batch([[A, B, A, B], [NONE, NONE, NONE, NONE], [A, A, B, NONE]])
    out = get_reward("majority_vote")(batch, _ctx())
    assert torch.equal(out.advantages[:8], torch.zeros_like(out.advantages[:8]))
    assert out.stats["tie_groups"] == 1 and out.stats["unparsable_groups"] == 1
    assert out.stats["zero_variance_groups"] == 2 and out.stats["majority_groups"] == 1
    assert out.stats["unparsable_completions"] == 5
    assert (out.advantages[8:10, 0] > 0).all() and (out.advantages[10:12, 0] < 0).all()


def test_the_reward_needs_a_tokenizer():
    with pytest.raises(ValueError, match="tokenizer"):
        get_reward("majority_vote")(_batch([[A, B]]), None)


# ----------------------------------------------------------------------------- answer spans

@pytest.mark.parametrize("text", ["a #### 5 apples\n", "####\n\n  -3 \nz", "x\n#### 4\n#### 5 ", "\\boxed{ 7 } x",
                                  "\\boxed{a} and \\boxed{\\frac{1}{2}}", "####", "no answer", "\\boxed{  }",
                                  "#### 1\r\n#### 2\u2028  3"])
def test_answer_span_is_where_extract_answer_reads(text):
    span, answer = answer_span(text), extract_answer(text)
    assert (None if span is None else text[span[0]: span[1]]) == answer


def test_answer_span_mask_on_real_tiny_tier_chain_sum_rollouts():
    from gradprobe.models import load_policy
    from gradprobe.rollout import HFSampler, collect_rollouts
    from gradprobe.tasks import load_task
    from gradprobe.tiers import TINY_FRONTIER_TASK, chain_sum_target

    policy = load_policy("tiny", dtype="float32", seed=0)
    tok = policy.tokenizer
    task = load_task("chain_sum", **TINY_FRONTIER_TASK)
    problems = task.problems("train", 4, seed=0)
    # the SFT targets, tokenised: the answer is exactly the last len(answer) tokens before the EOS
    for p in problems:
        target = chain_sum_target(p)
        ids = tok.encode(target, add_special_tokens=False) + [tok.eos_token_id]
        mask = answer_token_mask(ids, tok)
        k = len(extract_answer(target))
        assert mask.tolist() == [False] * (len(ids) - 1 - k) + [True] * k + [False]
    # sampled completions: the masked tokens decode to the task's parsed answer, in one contiguous run
    batch = collect_rollouts(policy, task, problems, group_size=4, sampler=HFSampler(policy, seed=0, progress=False),
                             sampling=SamplingConfig(max_new_tokens=40, temperature=1.0))
    span = answer_span_mask(batch, tok)
    assert not (span & ~batch.completion_mask).any()
    answered = 0
    for n in range(batch.num_rows):
        idx = span[n].nonzero().flatten().tolist()
        answer = extract_answer(batch.completions[n])
        if answer is None:
            assert idx == []
            continue
        answered += 1
        assert idx == list(range(idx[0], idx[-1] + 1))
        assert tok.decode(batch.completion_ids[n, idx].tolist(), skip_special_tokens=True) == answer
        ids = batch.completion_ids[n, : int(batch.completion_lengths[n])].tolist()
        before = tok.decode(ids[: idx[0]], skip_special_tokens=True)
        after = tok.decode(ids[idx[-1] + 1:], skip_special_tokens=True)
        assert before.rstrip(" ").endswith("####") and after.split("\n")[0].strip() == ""
    assert answered >= batch.num_rows // 2  # the warm-started tier writes "#### n" most of the time


def test_answer_token_mask_with_multi_character_tokens():
    """A byte-level BPE tokenizer: the masked tokens are those whose offsets overlap the answer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    corpus = [f"{a} + {b} = {a + b}\n#### {a + b}" for a in range(20) for b in range(20)] + ["apples ####"] * 50
    raw.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, special_tokens=["</s>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="</s>")
    eos = tok.convert_tokens_to_ids("</s>")
    for text in ["12 + 7 = 19\n#### 19", "3 + 4 = 7\n####  127 apples\nok", "#### -15", "x = 3\n#### \n"]:
        enc = raw.encode(text)
        assert tok.decode(enc.ids) == text
        span = answer_span(text)
        expected = [span is not None and s < span[1] and e > span[0] for s, e in enc.offsets] + [False]
        assert answer_token_mask(enc.ids + [eos], tok).tolist() == expected, text
        assert any(len(tok.decode([i])) > 1 for i in enc.ids)  # some tokens span several characters


# ----------------------------------------------------------------------------- the probe accepts it

def test_probe_accepts_majority_vote_on_the_tiny_tier(tmp_path):
    import json

    from gradprobe.probe.run import ProbeConfig, run_probe
    from gradprobe.tasks import load_task
    from gradprobe.tiers import TINY_FRONTIER_TASK

    config = ProbeConfig.from_dict(dict(
        model="tiny", task="chain_sum", rewards=("outcome", "majority_vote"), prompts=3, group=4, heldout_prompts=2,
        heldout_group=4, sampling=SamplingConfig(max_new_tokens=40, temperature=1.0), n_bootstrap=50, lr=1e-4,
        budget_tokens=100_000, progress=False, precondition="none", threads=1))
    result = run_probe(config, out=tmp_path / "probe", task=load_task("chain_sum", **TINY_FRONTIER_TASK))
    entries = {r["name"]: r for r in result["rewards"]}
    assert list(entries) == ["outcome", "majority_vote"]
    e = entries["majority_vote"]
    for key in ("inner_product", "predicted_gain_per_update", "snr"):
        assert math.isfinite(e[key]), key
    assert e["generated_tokens"] == {} and e["tokens_per_update"] == entries["outcome"]["tokens_per_update"]
    saved = json.loads((tmp_path / "probe" / "probe.json").read_text())
    stats = next(r for r in saved["rewards"] if r["name"] == "majority_vote")["reward_stats"]
    groups = stats["tie_groups"] + stats["unparsable_groups"] + stats["majority_groups"]
    assert groups == 3 and stats["masked_answer_tokens"] > 0 and stats["answer_span_missing"] == 0
