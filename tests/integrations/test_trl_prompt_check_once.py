"""GradprobeCallback in a REAL trl.GRPOTrainer checks its probe's prompt lengths once: every probe step draws the
same prompts (the task, ``prompts`` and ``heldout_prompts`` by the trainer's seed), and each step's ``run_probe``
encoded them all again. The first probe step checks them; the later ones, whose only change is the learning rate,
skip it (``run_probe(prompt_check=...)``), and every probe still ran on those prompts.
"""

from __future__ import annotations

import gradprobe.probe.run as probe_run
from gradprobe.integrations.trl import GradprobeCallback


def test_three_probe_steps_check_the_prompts_once(tmp_path, monkeypatch):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from gradprobe.models import load_policy
    from gradprobe.tasks import format_prompt, load_task
    from gradprobe.tiers import TINY_FRONTIER_TASK

    checked, check = [], probe_run.check_probe_prompts

    def counted(config, policy, task, sampler):
        checked.append([p.question for p in task.problems("train", config.batch.prompts, seed=config.batch.seed)])
        check(config, policy, task, sampler)

    monkeypatch.setattr(probe_run, "check_probe_prompts", counted)
    policy = load_policy("tiny", seed=0)
    task = load_task("chain_sum", **TINY_FRONTIER_TASK)
    dataset = Dataset.from_list([{"prompt": format_prompt(policy.tokenizer, p.question), "answer": p.answer}
                                 for p in task.problems("train", 8, seed=1)])

    def correct(prompts, completions, answer, **kwargs):
        return [float(a in c) for c, a in zip(completions, answer)]

    args = GRPOConfig(output_dir=str(tmp_path / "trainer"), per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=12, max_steps=3, logging_steps=1, learning_rate=1e-4, report_to="none",
                      use_cpu=True, bf16=False, save_strategy="no", seed=0, loss_type="dapo", beta=0.0,
                      disable_tqdm=True)
    trainer = GRPOTrainer(model=policy.model, reward_funcs=[correct], args=args, train_dataset=dataset,
                          processing_class=policy.tokenizer)
    cb = GradprobeCallback(task=task, probe_every=1, rewards=("outcome",), prompts=2, heldout_prompts=2,
                           heldout_group=2, n_bootstrap=20, precondition="none").attach(trainer)
    trainer.train()
    assert [p["step"] for p in cb.probes] == [1, 2, 3] and all("result" in p for p in cb.probes)
    assert checked == [[p.question for p in task.problems("train", 2, seed=0)]]  # once, at step 1
    assert len({p["result"]["config"]["lr"] for p in cb.probes}) == 3  # what changed between probes
