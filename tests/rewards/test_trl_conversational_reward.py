"""A TRL reward written for a conversational dataset ports unchanged: for a prompt that is TRL's list of
``{"role", "content"}`` messages, ``sequence_reward`` passes ``prompts[n]`` as that list of messages and
``completions[n]`` as ``[{"role": "assistant", "content": text}]``, as TRL's ``GRPOTrainer`` does
(``_generate`` / ``_calculate_rewards``). The reward of TRL's docs, ``c[0]["content"].startswith("<think>")``,
failed with "string indices must be integers": gradprobe passed the prompt's text and the completion's string.
Plain data keeps strings; a batch mixing both shapes, which TRL's datasets cannot hold, is refused."""

import json
import math
import re
import warnings

import pytest
import torch

import gradprobe
from gradprobe.char_tokenizer import char_tokenizer
from gradprobe.rewards import RewardFunctionError, sequence_reward
from gradprobe.rewards.sequence import trl_prompts_and_completions
from gradprobe.rollout.base import Sample
from gradprobe.rollout.collect import build_batch
from gradprobe.tasks import load_task

EPS = 1e-4
TINY = dict(prompts=2, group=2, heldout_prompts=2, heldout_group=2, max_new_tokens=8, n_bootstrap=20, progress=False)
CHAT = [{"prompt": [{"role": "system", "content": "Think first."}, {"role": "user", "content": f"What is {i} + 1?"}],
         "answer": str(i + 1), "level": i % 3} for i in range(12)]
PLAIN = [{"prompt": f"What is {i} + 1?", "answer": str(i + 1), "level": i % 3} for i in range(12)]


def format_reward(completions, **kwargs):
    """TRL's docs' format reward for conversational data (GRPOTrainer, "Using a custom reward function")."""
    return [1.0 if c[0]["content"].startswith("<think>") else 0.0 for c in completions]


def _file(tmp_path, rows, name):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _batch(problems, texts):
    """A RolloutBatch of ``problems`` with G = len(texts) // len(problems) completions each (char tokenizer)."""
    tok = char_tokenizer()
    prompt_ids = [[1] + tok.encode(f"P{i}:", add_special_tokens=False) for i in range(len(problems))]
    samples = [Sample(tok.encode(t, add_special_tokens=False), truncated=False) for t in texts]
    return build_batch(tok, problems, prompt_ids, samples, group_size=len(texts) // len(problems), temperature=1.0)


def _spy(seen: dict):
    def spy(prompts, completions, **kwargs):
        seen.update(prompts=prompts, completions=completions, row=kwargs["row"])
        return [0.0] * len(completions)
    return spy


def test_trl_docs_conversational_reward_gets_messages_and_scores_the_completions(tmp_path):
    problems = load_task(f"jsonl:{_file(tmp_path, CHAT, 'chat.jsonl')}").problems("train", 2, seed=3)
    texts = ["<think>2</think> 3", "3", "<think>", "no <think>"]
    batch = _batch(problems, texts)
    out = sequence_reward(format_reward)(batch, None)
    assert out.valid.all() and out.stats["mean_reward"] == 0.5 and out.stats["missing"] == 0
    a = 0.5 / (math.sqrt(0.5) + EPS)  # each group (1, 0): group-normalised as outcome is
    torch.testing.assert_close(out.advantages[:, 0], torch.tensor([a, -a, a, -a], dtype=torch.float64))
    seen = {}
    sequence_reward(_spy(seen))(batch, None)
    assert seen["completions"] == [[{"role": "assistant", "content": t}] for t in texts]
    assert seen["prompts"] == [CHAT[r]["prompt"] for r in seen["row"]]  # row n's list of messages, as in the data
    assert seen["row"][0] == seen["row"][1] != seen["row"][2] == seen["row"][3]  # completion n of problem n // G
    trl = pytest.importorskip("trl.data_utils")
    assert trl.is_conversational({"prompt": seen["prompts"][0]})  # TRL reads this batch as conversational


def test_plain_and_conversational_data_each_get_trls_shape(tmp_path):
    seen_plain = {}
    plain = load_task(f"jsonl:{_file(tmp_path, PLAIN, 'plain.jsonl')}").problems("train", 2, seed=1)
    sequence_reward(_spy(seen_plain))(_batch(plain, ["a", "b", "c", "d"]), None)
    assert seen_plain["prompts"] == [PLAIN[r]["prompt"] for r in seen_plain["row"]]
    assert all(type(p) is not list for p in seen_plain["prompts"])  # the prompt's text, a str, as before
    assert seen_plain["completions"] == ["a", "b", "c", "d"]
    chat = load_task(f"jsonl:{_file(tmp_path, CHAT, 'chat.jsonl')}").problems("train", 2, seed=1)
    prompts, completions = trl_prompts_and_completions(_batch(chat, ["a", "b", "c", "d"]))
    assert [p[-1]["content"] for p in prompts] == [str(c.question) for c in chat for _ in range(2)]
    assert completions == [[{"role": "assistant", "content": t}] for t in "abcd"]


def test_a_reward_that_changes_its_messages_changes_neither_the_problem_nor_another_row(tmp_path):
    problems = load_task(f"jsonl:{_file(tmp_path, CHAT, 'chat.jsonl')}").problems("train", 1, seed=0)
    batch = _batch(problems, ["x", "y"])
    before = [dict(m) for m in problems[0].question.messages]

    def greedy(prompts, completions, **kwargs):
        prompts[0][0]["content"] = "changed"
        prompts[0].append({"role": "assistant", "content": "junk"})
        completions[0][0]["content"] = "<think>"
        return [float(p[0]["content"] == "changed") for p in prompts]

    assert sequence_reward(greedy)(batch, None).stats["mean_reward"] == 0.5  # row 1's copy is untouched
    assert [dict(m) for m in problems[0].question.messages] == before and batch.completions == ["x", "y"]
    assert sequence_reward(format_reward)(batch, None).stats["mean_reward"] == 0.0


def test_a_batch_mixing_conversational_and_plain_prompts_is_refused(tmp_path):
    rows = [(CHAT if i % 2 else PLAIN)[i] for i in range(12)]
    task = load_task(f"jsonl:{_file(tmp_path, rows, 'mixed.jsonl')}")
    problems = task.problems("train", len(task.split_rows("train")), seed=0)
    chat = [p for p in problems if getattr(p.question, "prompt_format", None) == "conversational"]
    plain = [p for p in problems if getattr(p.question, "prompt_format", None) == "plain"]
    with pytest.raises(RewardFunctionError, match=r"reward 'format_reward': this batch mixes conversational prompts "
                       rf"\(problem '{re.escape(chat[0].id)}'.*plain ones \(problem '{re.escape(plain[0].id)}'"
                       r".*every one as a string"):
        sequence_reward(format_reward)(_batch([chat[0], plain[0]], ["<think>", "a", "b", "c"]), None)
    assert sequence_reward(format_reward)(_batch(chat[:1], ["<think>", "a"]), None).stats["mean_reward"] == 0.5


def test_probe_passes_conversational_shapes_end_to_end(tmp_path):
    seen = {}

    def format_reward(completions, **kwargs):  # TRL's docs' reward, recording what it gets
        seen.update(completions=completions, prompts=kwargs["prompts"], row=kwargs["row"])
        return [1.0 if c[0]["content"].startswith("<think>") else 0.0 for c in completions]

    result = gradprobe.probe("tiny", task=f"jsonl:{_file(tmp_path, CHAT, 'chat.jsonl')}",
                             rewards=["outcome", format_reward], **TINY)
    assert seen["prompts"] == [CHAT[r]["prompt"] for r in seen["row"]] and len(seen["row"]) == 4
    assert all(len(c) == 1 and c[0]["role"] == "assistant" and isinstance(c[0]["content"], str)
               for c in seen["completions"])
    tokens = result.tokens().sort_values(["completion", "position"])
    texts = tokens.groupby("completion")["text"].apply("".join).tolist()
    assert [c[0]["content"] for c in seen["completions"]] == texts  # the decoded completions, row by row
    (record,) = [r for r in result.raw["rewards"] if r["name"] == "format_reward"]
    expected = [1.0 if t.startswith("<think>") else 0.0 for t in texts]
    assert record["reward_stats"]["valid"] == 4 and record["reward_stats"]["mean_reward"] == sum(expected) / 4

    seen.clear()
    gradprobe.probe("tiny", task=f"jsonl:{_file(tmp_path, PLAIN, 'plain.jsonl')}",
                    rewards=["outcome", ("plain_seen", sequence_reward(
                        lambda completions, **kw: seen.update(completions=completions, prompts=kw["prompts"],
                                                              row=kw["row"]) or [0.0] * len(completions)))],
                    **TINY)
    assert seen["prompts"] == [PLAIN[r]["prompt"] for r in seen["row"]]
    assert all(isinstance(c, str) for c in seen["completions"]) and len(seen["completions"]) == 4


def test_the_first_conversational_batch_of_a_reward_warns_once_about_the_shapes(monkeypatch, tmp_path):
    from gradprobe.rewards import sequence

    monkeypatch.setattr(sequence, "_TOLD_CONVERSATIONAL", set())
    batch = _batch(load_task(f"jsonl:{_file(tmp_path, CHAT, 'chat.jsonl')}").problems("train", 2, seed=3),
                   ["a", "b", "c", "d"])
    with pytest.warns(UserWarning, match=r"^reward 'lengths': conversational data, so it gets TRL's conversational "
                                         r"shapes: .*\(len\(c\) is 1, c.startswith raises\)$"):
        sequence.trl_prompts_and_completions(batch, "lengths")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per reward
        sequence.trl_prompts_and_completions(batch, "lengths")
