"""GradprobeCallback in a REAL trl.GRPOTrainer: the shipped tiny tier, 3 steps on CPU."""

from __future__ import annotations

import json
import math

import pytest

from gradprobe.integrations.trl import GradprobeCallback, generations_between, reward_generated_tokens


class JudgeReward:
    """A reward that 'generates' 3 tokens per completion it scores (the generated-tokens protocol)."""

    __name__ = "judge"

    def __init__(self):
        self.generated_tokens = {"continuation": 0}

    def __call__(self, prompts, completions, **kwargs):
        self.generated_tokens["continuation"] += 3 * len(completions)
        return [float(len(c) % 3 == 0) for c in completions]


def test_generations_between_follows_trl_schedule():
    # generate every 2 micro-steps, 1 micro-step per optimizer step: steps 1, 3, 5 generate
    assert generations_between(0, 1, gradient_accumulation_steps=1, steps_per_generation=2, num_iterations=1) == 1
    assert generations_between(1, 2, gradient_accumulation_steps=1, steps_per_generation=2, num_iterations=1) == 0
    assert generations_between(0, 5, gradient_accumulation_steps=1, steps_per_generation=2, num_iterations=1) == 3
    assert generations_between(0, 3, gradient_accumulation_steps=4, steps_per_generation=4, num_iterations=1) == 3


def test_reward_protocol_validation():
    assert reward_generated_tokens(lambda p, c: []) == {}
    judge = JudgeReward()
    judge.generated_tokens = 5
    assert reward_generated_tokens(judge) == {"continuation": 5}
    judge.generated_tokens = {"judging": 1}
    with pytest.raises(ValueError, match="category 'judging'"):
        reward_generated_tokens(judge)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from gradprobe.models import load_policy
    from gradprobe.tasks import format_prompt, load_task
    from gradprobe.tiers import TINY_FRONTIER_TASK

    out = tmp_path_factory.mktemp("grpo")
    policy = load_policy("tiny", seed=0)
    task = load_task("chain_sum", **TINY_FRONTIER_TASK)
    problems = task.problems("train", 12, seed=1)
    dataset = Dataset.from_list([{"prompt": format_prompt(policy.tokenizer, p.question), "answer": p.answer}
                                 for p in problems])
    generated = []  # ground truth: the completion tokens TRL hands to its reward functions

    def correct(prompts, completions, completion_ids, answer, **kwargs):
        if "trainer_state" in kwargs:  # called by the trainer (the probe calls it too, without it)
            generated.append(sum(len(ids) for ids in completion_ids))
        return [float(a in c) for c, a in zip(completions, answer)]

    judge = JudgeReward()
    args = GRPOConfig(output_dir=str(out / "trainer"), per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=48, max_steps=3, logging_steps=1, learning_rate=1e-4,
                      report_to="none", use_cpu=True, bf16=False, save_strategy="no", seed=0,
                      loss_type="dapo", beta=0.0, disable_tqdm=True)
    trainer = GRPOTrainer(model=policy.model, reward_funcs=[correct, judge], args=args, train_dataset=dataset,
                          processing_class=policy.tokenizer)
    cb = GradprobeCallback(task=task, probe_every=2, rewards=("outcome",), trainer_rewards=True, prompts=4,
                           heldout_prompts=6, heldout_group=8, n_bootstrap=50, precondition="none",
                           out=out / "gradprobe").attach(trainer)
    trainer.train()
    return trainer, cb, generated, judge, out


def test_ledger_counts_the_completion_tokens_the_trainer_generated(trained):
    trainer, cb, generated, judge, out = trained
    assert len(generated) == 3  # one generation batch per optimizer step
    assert cb.ledger.generated_tokens["rollout"] == sum(generated) > 0
    logged = [h for h in trainer.state.log_history if "completions/mean_length" in h]
    assert [h["step"] for h in logged] == [1, 2, 3]  # TRL's metrics of every step were still logged
    assert [w["rollout_tokens"] for w in cb.windows] == generated
    assert [round(h["completions/mean_length"] * 8) for h in logged] == generated
    # num_tokens (prompt + completion) bounds the completion count from above
    assert all(w["prompt_tokens"] > 0 for w in cb.windows)
    # the judge's tokens of the 3 training steps; the 4 x 4 completions it judged for the probe are the probe's
    assert cb.ledger.generated_tokens["continuation"] == 3 * 8 * 3
    assert judge.generated_tokens["continuation"] == 3 * 8 * 3 + 3 * 4 * 4
    saved = [json.loads(line) for line in (out / "gradprobe" / "ledger.jsonl").read_text().splitlines()]
    assert [w["rollout_tokens"] for w in saved] == generated
    assert json.loads((out / "gradprobe" / "ledger.json").read_text())["generated_tokens"]["rollout"] == sum(generated)


def test_probe_ran_at_the_chosen_step_and_logged_finite_figures(trained):
    trainer, cb, generated, judge, out = trained
    assert [p["step"] for p in cb.probes] == [2]
    assert "error" not in cb.probes[0]
    names = [r["name"] for r in cb.probes[0]["result"]["rewards"]]
    assert names == ["outcome", "correct", "judge"]  # registered + the trainer's own, wrapped
    assert cb.probes[0]["result"]["config"]["group"] == 4 and cb.probes[0]["result"]["config"]["loss_type"] == "dapo"
    entries = [h for h in trainer.state.log_history if "gradprobe/outcome/inner_product" in h]
    assert len(entries) == 1 and entries[0]["step"] == 2
    figures = {k: v for k, v in entries[0].items() if k.startswith("gradprobe/")}
    assert all(math.isfinite(v) for v in figures.values())
    # a real signal: completions long enough for the tiny tier's answers (~34 ids) give mixed groups and a
    # non-zero held-out reference; the trainer's `correct` is the outcome reward, so its figure is outcome's
    assert figures["gradprobe/outcome/inner_product"] != 0
    assert figures["gradprobe/correct/inner_product"] == pytest.approx(figures["gradprobe/outcome/inner_product"],
                                                                       rel=1e-9)
    rollout = figures["gradprobe/outcome/tokens_per_update"]
    assert rollout > 0 and figures["gradprobe/correct/tokens_per_update"] == rollout
    assert figures["gradprobe/judge/tokens_per_update"] == rollout + 3 * 4 * 4  # its judge tokens included
    assert figures["gradprobe/tokens/rollout"] == sum(generated[:2])  # the ledger up to the probe step
    assert (out / "gradprobe" / "probe_step_2" / "probe.json").is_file()
    assert trainer.model.training  # the probe restored the training mode
