"""Loss types ``bnpo``, ``cispo`` and ``gspo`` against TRL's own ``GRPOTrainer._compute_loss`` (TRL 1.16).

TRL's settings for each of our loss types (:data:`TRL_ARGS`; ``trl/trainer/grpo_trainer.py``,
``_compute_loss``):

``bnpo``   ``loss_type="bnpo"``: token-level PPO clip, divided by the local batch's active tokens
           (our batch-global token mean when the batch is one micro-batch, as here);
``cispo``  ``loss_type="cispo"``: ``-clamp(coef_1, max=epsilon_high).detach() * A * logp``,
           divided by ``num_items_in_batch``; TRL's ``epsilon_high`` is the cap itself, ours is
           1 + ``clip_high``;
``gspo``   ``loss_type="grpo"``, ``importance_sampling_level="sequence"``: one ratio per
           sequence, exp of the masked mean log-ratio, clipped at sequence level, then grpo's
           per-sequence mean.

1. TRL on random inputs: a real :class:`trl.GRPOTrainer` (built once per loss type around a tiny
   random float64 model that it never runs) has its log-probability hook replaced by one that
   returns a given float64 leaf tensor, so TRL's unmodified ``_compute_loss`` computes the loss of
   random log-probs, old log-probs (ratios far from 1: the clips are active), advantages (one per
   sequence, or per token) and ragged masks. Loss and gradient w.r.t. the log-probs agree with
   :func:`gradprobe.grpo.losses.policy_loss` to 1e-12 (relative; measured <= 5.4e-16), well inside
   the 1e-6 asked.
2. TRL on the tiny model: our micro-batched update (:func:`gradprobe.grpo.step.loss_and_backward`,
   sdpa attention) against TRL's ``_compute_loss`` with our log-probabilities, parameter gradients
   (the batch and helpers of ``test_trl_equivalence.py``).
3. The probe: at rho = 1 the probe's prediction (:func:`gradprobe.probe.estimate.group_sums` of
   the forward-mode alignment) equals <-grad loss, u> of the training step in float64, for every
   loss type, with per-token advantages (where gspo's sequence-mean advantage matters).
4. Plan validation, the CLI, and a one-update run of the shipped tiny tier per new loss type.
"""

from __future__ import annotations

import argparse
import warnings

import pytest
import torch

from gradprobe.grpo.losses import LOSS_TYPES, OBJECTIVES, policy_loss, probe_advantages, token_weights
from gradprobe.grpo.step import UpdateConfig, loss_and_backward
from gradprobe.probe import token_alignment
from gradprobe.grpo.loss_types import GROUP_PARTS
from gradprobe.probe.estimate import group_sums

import probe_helpers  # float64-exact tiny models and batches
import test_trl_equivalence as eq  # its batch, trainer-input and gradient helpers (same folder)
from helpers_rollout import one_thread
from helpers_training import tiny_plan

policy, data = eq.policy, eq.data  # its fixtures: a fresh float64 tiny-qwen2, its off-policy batch
_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

NEW = ("bnpo", "cispo", "gspo")
CLIP_LOW, CLIP_HIGH = 0.2, 0.28  # decoupled (DAPO-style), so a swapped low/high would show


def _trl_args(loss_type: str, clip_low: float, clip_high: float) -> dict:
    """The GRPOConfig fields that make TRL compute our ``loss_type`` with our clip range."""
    return {"bnpo": dict(loss_type="bnpo", epsilon=clip_low, epsilon_high=clip_high),
            "cispo": dict(loss_type="cispo", epsilon=clip_low, epsilon_high=1 + clip_high),
            "gspo": dict(loss_type="grpo", importance_sampling_level="sequence", epsilon=clip_low,
                         epsilon_high=clip_high)}[loss_type]


def _trl_trainer(model, tokenizer, loss_type: str, *, rows: int, clip_low=CLIP_LOW, clip_high=CLIP_HIGH):
    """A real GRPOTrainer configured as a TRL user would for ``loss_type`` (one micro-batch of ``rows``)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    with warnings.catch_warnings():  # "gradient_checkpointing is deprecated"; TRL's sequence-level advice
        warnings.simplefilter("ignore")
        args = GRPOConfig(output_dir=eq.OUTPUT_DIR, report_to="none", use_cpu=True, bf16=False,
                          gradient_checkpointing=False, per_device_train_batch_size=rows, num_generations=eq.G,
                          max_completion_length=eq.L_MAX, beta=0.0, temperature=eq.TEMPERATURE,
                          logging_strategy="no", save_strategy="no", **_trl_args(loss_type, clip_low, clip_high))
        trainer = GRPOTrainer(model=model, reward_funcs=lambda prompts, completions, **kw: [0.0] * len(prompts),
                              args=args, train_dataset=Dataset.from_dict({"prompt": ["1 + 2"] * 4}),
                              processing_class=tokenizer)
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's loop, which we do not run
    trainer.model.train()
    return trainer


@pytest.fixture(scope="module")
def trainers():
    """One TRL trainer per new loss type, for tensors given directly (their model never runs)."""
    from gradprobe.models import load_policy

    out = {}
    for loss_type in NEW:
        pol = load_policy("tiny-qwen2", dtype="float64", seed=0)
        out[loss_type] = _trl_trainer(pol.model, pol.tokenizer, loss_type, rows=len(eq.COMPLETION_LENS))
    return out


def _random_inputs(seed: int, per_token_advantages: bool) -> dict:
    """Log-probs, old log-probs (ratios far from 1), advantages and a ragged mask, float64.

    Rows have eq.COMPLETION_LENS tokens (1 to 9, T = 9); positions past a row's end hold random
    finite values in every tensor, which both implementations must ignore.
    """
    g = torch.Generator().manual_seed(seed)
    lens = torch.tensor(eq.COMPLETION_LENS)
    n, t = len(lens), int(lens.max())
    mask = torch.arange(t)[None, :] < lens[:, None]
    logp = -3.0 * torch.rand((n, t), generator=g, dtype=torch.float64) - 0.05
    old = (logp + 0.6 * torch.randn((n, 1), generator=g, dtype=torch.float64)
           + 0.5 * torch.randn((n, t), generator=g, dtype=torch.float64))
    shape = (n, t) if per_token_advantages else (n,)
    adv = torch.randn(shape, generator=g, dtype=torch.float64)
    return dict(mask=mask, logp=logp, old=old, adv=adv)


def _trl_on_tensors(trainer, x: dict) -> tuple[float, torch.Tensor]:
    """TRL's unmodified ``_compute_loss`` with ``x["logp"]`` as the policy's log-probs: loss, d loss / d logp."""
    logp = x["logp"].clone().requires_grad_(True)
    n, t = logp.shape

    def given_logps(model, input_ids, attention_mask, logits_to_keep, **kwargs):
        assert logits_to_keep == t
        return logp, torch.zeros_like(logp.detach()), None

    trainer._get_per_token_logps_and_entropies = given_logps
    inputs = {"prompt_ids": torch.zeros((n, 2), dtype=torch.long), "prompt_mask": torch.ones((n, 2), dtype=torch.long),
              "completion_ids": torch.zeros((n, t), dtype=torch.long), "completion_mask": x["mask"].long(),
              "advantages": x["adv"], "old_per_token_logps": x["old"],
              "num_items_in_batch": x["mask"].sum().to(torch.float64)}
    loss = trainer._compute_loss(trainer.model, inputs)
    (grad,) = torch.autograd.grad(loss, logp)
    return float(loss.detach()), grad


def _ours_on_tensors(loss_type: str, x: dict, *, clip_low=CLIP_LOW, clip_high=CLIP_HIGH) -> tuple[float, torch.Tensor]:
    logp = x["logp"].clone().requires_grad_(True)
    adv = x["adv"] if x["adv"].dim() == 2 else x["adv"][:, None].expand_as(logp)
    w = token_weights(x["mask"], loss_type)
    loss = policy_loss(logp, adv, w, old_logp=x["old"], clip_low=clip_low, clip_high=clip_high,
                       loss_type=loss_type, completion_mask=x["mask"])
    (grad,) = torch.autograd.grad(loss, logp)
    return float(loss.detach()), grad


def _clipped_fraction(loss_type: str, x: dict) -> float:
    """Fraction of completion tokens whose gradient the clip changes: cispo's weight is capped
    (r > 1 + clip_high), or PPO's min picks the clipped branch (r > 1 + clip_high with A > 0, or
    r < 1 - clip_low with A < 0), r the token's ratio, or its sequence's under gspo."""
    m = x["mask"]
    log_ratio = torch.where(m, x["logp"] - x["old"], torch.zeros((), dtype=torch.float64))
    if loss_type == "gspo":
        log_ratio = (log_ratio.sum(-1) / m.sum(-1))[:, None].expand_as(log_ratio)
    r = torch.exp(log_ratio)
    adv = x["adv"] if x["adv"].dim() == 2 else x["adv"][:, None].expand_as(r)
    if loss_type == "cispo":
        hit = r > 1 + CLIP_HIGH
    else:
        hit = ((r > 1 + CLIP_HIGH) & (adv > 0)) | ((r < 1 - CLIP_LOW) & (adv < 0))
    return float(hit[m].double().mean())


@pytest.mark.parametrize("per_token_advantages", [False, True], ids=["sequence_adv", "token_adv"])
@pytest.mark.parametrize("loss_type", NEW)
def test_loss_and_logprob_gradient_equal_trl_on_random_inputs(trainers, loss_type, per_token_advantages):
    """TRL's _compute_loss and our policy_loss + token_weights: same loss and d loss / d logp
    on three random draws with active clips."""
    for seed in (1, 2, 3):
        x = _random_inputs(seed, per_token_advantages)
        assert _clipped_fraction(loss_type, x) > 0.1  # the clip is exercised
        trl_loss, trl_grad = _trl_on_tensors(trainers[loss_type], x)
        our_loss, our_grad = _ours_on_tensors(loss_type, x)
        assert abs(trl_loss) > 1e-3 and trl_grad.abs().max() > 1e-3  # a real signal, not 0 == 0
        assert our_loss == pytest.approx(trl_loss, rel=1e-12, abs=1e-15)
        eq._tight(our_grad, trl_grad, 1e-12)
        assert (trl_grad[~x["mask"]] == 0).all() and (our_grad[~x["mask"]] == 0).all()
        # the clip changes the answer: without it, the gradient is another one
        _, unclipped = _ours_on_tensors(loss_type, x, clip_low=1.0, clip_high=1e9)
        assert (unclipped - trl_grad).abs().max() > 1e-3 * trl_grad.abs().max()


def test_the_objectives_differ_where_they_should():
    """Off-policy, bnpo equals dapo exactly (same weights and surrogate), while cispo and gspo are
    other objectives: their gradients differ from dapo's and grpo's."""
    x = _random_inputs(5, per_token_advantages=True)
    grads = {lt: _ours_on_tensors(lt, x)[1] for lt in ("dapo", "grpo", *NEW)}
    assert torch.equal(grads["bnpo"], grads["dapo"])
    assert (grads["cispo"] - grads["dapo"]).abs().max() > 1e-3
    assert (grads["gspo"] - grads["grpo"]).abs().max() > 1e-3
    assert OBJECTIVES["bnpo"] == "ppo" and OBJECTIVES["cispo"] == "cispo" and OBJECTIVES["gspo"] == "gspo"


@pytest.mark.parametrize("loss_type", NEW)
def test_micro_batched_update_equals_trl_on_the_tiny_model(policy, data, loss_type):
    """Our update step (micro-batches of 5 rows, sdpa) against TRL's _compute_loss on the same
    float64 model, off-policy old log-probs: same loss and parameter gradient (1e-12 relative).
    gspo uses a narrow clip [0.95, 1.08] so that sequence ratios (0.3 nats per token of noise)
    leave it."""
    clip_low, clip_high = (0.05, 0.08) if loss_type == "gspo" else (CLIP_LOW, CLIP_HIGH)
    n = data["input_ids"].shape[0]
    trainer = eq._use_our_logprobs(_trl_trainer(policy.model, policy.tokenizer, loss_type, rows=n,
                                                clip_low=clip_low, clip_high=clip_high))
    trl_loss, trl_grad = eq._trl_loss_and_grad(trainer, data, beta=0.0)
    model = policy.model
    model.zero_grad(set_to_none=True)
    mask = data["completion_mask"].bool()
    adv = data["advantages"][:, None] * mask
    config = UpdateConfig(loss_type=loss_type, micro_batch_size=5, clip_low=clip_low, clip_high=clip_high,
                          max_completion_length=eq.L_MAX)
    our_loss = loss_and_backward(model, eq._rollout_batch(data), adv, config, old_logp=data["old"])
    our_grad = eq._grads(model)
    assert abs(trl_loss) > 1e-4 and trl_grad.norm() > 1e-4
    assert our_loss == pytest.approx(trl_loss, rel=1e-12, abs=0)
    eq._tight(our_grad, trl_grad, 1e-12)


@pytest.mark.parametrize("loss_type", sorted(LOSS_TYPES))
def test_probe_prediction_equals_the_training_gradient_at_rho_1(loss_type):
    """float64, tiny model, ragged left-padded batch, per-token advantages: the probe's
    sum_nt w_nt Atilde_nt a_nt (forward mode, group_sums) equals <-grad loss, u> of the update
    step's reverse-mode gradient at rho = 1 (measured: <= 2.2e-15 relative)."""
    h = probe_helpers
    model = h.fresh_tiny_model("tiny-qwen2")
    batch = h.make_batch(num_prompts=3, group_size=2, prompt_length=6, completion_length=8, seed=11)
    assert len(set(batch.completion_lengths.tolist())) > 2  # ragged
    u = h.random_direction(model, seed=12)
    adv = h.random_advantages(batch, seed=13, per_token=True)
    l_max = 10
    a = token_alignment(model, batch, u, micro_batch_size=4)
    num, den = group_sums(a, adv, batch.completion_mask, batch.group_size, loss_type=loss_type,
                          max_completion_length=l_max)
    predicted = float(num.sum() / den.sum())

    model.zero_grad(set_to_none=True)
    loss_and_backward(model, batch, adv, UpdateConfig(loss_type=loss_type, micro_batch_size=4,
                                                      max_completion_length=l_max))
    params = dict(model.named_parameters())
    ascent = -sum(float((params[k].grad.double() * v.double()).sum()) for k, v in u.items()
                  if params[k].grad is not None)
    model.zero_grad(set_to_none=True)
    assert abs(predicted) > 1e-4
    assert predicted == pytest.approx(ascent, rel=1e-10, abs=0)
    if loss_type == "gspo":  # the sequence-mean advantage is what makes it exact here
        w = token_weights(batch.completion_mask, "gspo", max_completion_length=l_max)
        naive = float((w * adv * a).sum())
        assert abs(naive - ascent) > 1e-3 * abs(ascent)


def test_probe_advantages_are_the_sequence_mean_for_gspo_only():
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    adv = torch.tensor([[1.0, 2.0, 6.0, 9.0], [-4.0, 5.0, 5.0, 5.0], [7.0, 7.0, 7.0, 7.0]], dtype=torch.float64)
    expected = torch.tensor([[3.0, 3.0, 3.0, 0.0], [-4.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    assert torch.equal(probe_advantages(adv, mask, "gspo"), expected)
    assert torch.equal(probe_advantages(torch.stack([adv, 2 * adv]), mask, "gspo"), torch.stack([expected, 2 * expected]))
    for loss_type in ("grpo", "dapo", "dr_grpo", "bnpo", "cispo"):
        assert torch.equal(probe_advantages(adv, mask, loss_type), adv * mask)


@pytest.mark.parametrize("loss_type", NEW)
def test_normalizers_agree_with_the_loss_weights(loss_type):
    """w = u / sum(den) (module docstring of gradprobe.probe.estimate) for the new loss types."""
    gen = torch.Generator().manual_seed(4)
    mask = torch.rand((8, 6), generator=gen) < 0.7
    mask[:, 0] = True
    mask[3] = False  # an empty completion
    u, den = GROUP_PARTS[loss_type](mask.double(), 4, 9)
    assert den.shape == (2,)
    assert torch.allclose(u / den.sum(), token_weights(mask, loss_type, max_completion_length=9), rtol=1e-15, atol=0)
    same = {"bnpo": "dapo", "cispo": "dapo", "gspo": "grpo"}[loss_type]
    assert torch.equal(token_weights(mask, loss_type), token_weights(mask, same))


def test_unknown_loss_type_lists_the_valid_ones():
    valid = "['bnpo', 'cispo', 'dapo', 'dr_grpo', 'grpo', 'gspo']"
    mask = torch.ones((2, 3), dtype=torch.bool)
    logp = torch.zeros((2, 3), dtype=torch.float64)
    calls = [lambda: token_weights(mask, "ppo"), lambda: UpdateConfig(loss_type="ppo"),
             lambda: policy_loss(logp, logp, logp, loss_type="ppo"), lambda: probe_advantages(logp, mask, "ppo"),
             lambda: group_sums(logp, logp, mask, 2, loss_type="ppo")]
    for call in calls:
        with pytest.raises(ValueError, match="'ppo' is not one of " + valid.replace("[", r"\[").replace("]", r"\]")):
            call()
    with pytest.raises(ValueError, match="gspo' needs completion_mask of shape"):
        policy_loss(logp, logp, logp, loss_type="gspo")
    with pytest.raises(ValueError, match="cispo caps its importance weight at 1 \\+ clip_high"):
        policy_loss(logp, logp, logp, loss_type="cispo", clip_high=-1.0)


def test_plan_and_cli_accept_every_loss_type(tmp_path):
    from gradprobe.cli import _add_probe
    from gradprobe.training.plan import PlanError, parse_plan

    parser = argparse.ArgumentParser()
    _add_probe(parser.add_subparsers(dest="command"))
    probe = parser._subparsers._group_actions[0].choices["probe"]
    (action,) = [a for a in probe._actions if a.dest == "loss_type"]
    assert sorted(action.choices) == sorted(LOSS_TYPES)
    for loss_type in NEW:
        assert parse_plan(_plan(loss_type)).arm("grpo").train.loss_type == loss_type
    with pytest.raises(PlanError, match="loss_type 'ppo' is not one of bnpo, cispo, dapo, dr_grpo, grpo, gspo"):
        parse_plan(_plan("ppo"))


def _plan(loss_type: str) -> str:
    """The shipped tiny tier on its frontier task with ``[train] loss_type``: one update of 4 prompts x
    4 completions (as tests/training/test_train_overrides.py), 2 greedy held-out prompts."""
    return tiny_plan(task={"pool": 16}, heldout={"prompts": 2},
                     train={"prompts_per_update": 4, "lr": 1e-3, "loss_type": loss_type}, eval={"sampled": False})


@pytest.mark.parametrize("loss_type", NEW)
def test_one_update_of_the_tiny_tier_changes_the_weights(loss_type, tmp_path):
    """run_training, one update on the shipped tiny tier with ``[train] loss_type``: finite loss,
    a non-zero gradient, and parameters that moved."""
    import json

    from gradprobe.models import load_policy
    from gradprobe.training.plan import parse_plan
    from gradprobe.training.run import run_training

    tier = load_policy("tiny")
    before = {k: p.detach().clone() for k, p in tier.model.named_parameters()}
    run_training(parse_plan(_plan(loss_type)).arm("grpo"), tmp_path / "run", policy=tier)
    config = json.loads((tmp_path / "run" / "config.json").read_text())["run"]
    assert config["train"]["loss_type"] == loss_type
    (line,) = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
               if not json.loads(x).get("eval")]
    assert line["grad_norm"] > 0 and abs(line["loss"]) < 1e3
    moved = max(float((p.detach() - before[k]).abs().max()) for k, p in tier.model.named_parameters())
    assert moved > 1e-5  # AdamW's first step moves a coordinate by ~lr = 1e-3
