"""Reference updates v and the optimizer preconditioner P (DESIGN.md, "The probe").

A reference update is a vector in parameter space, ``dict[str, Tensor]`` keyed by
``model.named_parameters()`` names (trainable ones), with the parameters' shapes and dtypes.

* ``heldout`` (default): :func:`heldout_reference`, an unbiased estimate of grad(accuracy)
  from held-out rollouts with the leave-one-out (RLOO) baseline. Then <g_R, v> predicts how much
  a step along g_R raises held-out accuracy.
* ``direction``: a supplied update such as theta_T - theta_0 of a finished run
  (:func:`direction_between`, :func:`save_direction`, :func:`load_direction`; ``.safetensors``).
* Preconditioning: with Adam the update is lr * P g_R with P = diag(1 / (sqrt(s) + eps))
  (Kingma & Ba 2015, Alg. 1; s the bias-corrected second moment), so the predicted change of
  accuracy is lr <P g_R, v> = lr <g_R, P v>: the probe runs its one jvp along u = P v
  (:func:`apply_preconditioner`) and stays linear in every reward's advantages. s comes from the
  run's optimizer (:func:`second_moment_from_optimizer`) or, before training, from the mean
  squared minibatch GRPO gradient of the probe batch (:func:`second_moment_from_minibatches`),
  shared by all rewards.
"""

from __future__ import annotations

import os
from typing import Callable

import torch
from torch import Tensor

from ..logprobs import token_logprobs
from ..outputs import give_umask_mode
from .alignment import DirectionMismatchError, check_direction, gradient_buffer, trainable_parameters
from .references import reward_gradient


__all__ = [
    "heldout_reference", "rloo_coefficients", "load_direction", "save_direction", "direction_between",
    "adam_preconditioner", "second_moment_from_minibatches", "second_moment_from_optimizer",
    "apply_preconditioner",
]


def rloo_coefficients(scores: Tensor, group_size: int) -> Tensor:
    """Per-completion coefficients c_ij of the RLOO estimate v = sum_ij c_ij grad log pi(y_ij | x_i).

    c_ij = (r_ij - mean_{k != j} r_ik) / (B' G'_i) over the valid (finite) scores of group i, where
    G'_i is the number of valid scores of group i and B' the number of groups with G'_i >= 2
    (Kool et al. 2019, "Buy 4 REINFORCE samples, get a baseline for free!"; Ahmadian et al. 2024,
    eq. 5). Without missing scores this is (r_ij - mean_{k != j} r_ik) / (B G).

    Missing scores (NaN): the completion gets c = 0 and is left out of its group-mates'
    baselines, so each usable group still gives an unbiased estimate of grad E[r | x_i] from its
    valid members; groups with fewer than two valid scores have no leave-one-out baseline, get
    c = 0 and are left out of B' (the estimate averages over the usable prompts). A group whose
    valid scores are all equal has c = 0 and IS counted in B' (a prompt on which the gradient
    estimate is zero).

    Parameters
    ----------
    scores : Tensor, shape (N,) = (B * G,)
        r_ij, prompt-major; NaN where missing.
    group_size : int
        G >= 2.

    Returns
    -------
    Tensor (float64), shape (N,)

    Raises
    ------
    ValueError
        ``group_size < 2`` (no leave-one-out baseline) or N not a multiple of G.
    """
    if group_size < 2:
        raise ValueError(
            f"the held-out reference needs group_size >= 2 for the leave-one-out (RLOO) baseline, got {group_size}; "
            "sample several completions per held-out prompt (default 16)")
    r = scores.detach().to(torch.float64).cpu()
    if r.dim() != 1 or r.numel() % group_size:
        raise ValueError(f"scores must have shape (B * G,) with G = {group_size}, got {tuple(r.shape)}")
    r = r.view(-1, group_size)  # (B, G)
    valid = torch.isfinite(r)
    n_valid = valid.sum(-1, keepdim=True)  # (B, 1)
    r0 = torch.where(valid, r, torch.zeros_like(r))
    total = r0.sum(-1, keepdim=True)
    usable = n_valid >= 2
    loo_mean = (total - r0) / (n_valid - 1).clamp(min=1)  # mean of the other valid members
    coef = torch.where(valid & usable, r0 - loo_mean, torch.zeros_like(r))
    # exact zero for groups whose valid scores are all equal (no rounding residue)
    rmax = torch.where(valid, r, torch.full_like(r, -torch.inf)).amax(-1, keepdim=True)
    rmin = torch.where(valid, r, torch.full_like(r, torch.inf)).amin(-1, keepdim=True)
    coef = torch.where(rmax == rmin, torch.zeros_like(coef), coef)
    b_usable = int(usable.sum())
    coef = coef / (n_valid.clamp(min=1) * max(b_usable, 1))
    return coef.reshape(-1)


def heldout_reference(model, batch, *, micro_batch_size: int = 8) -> dict[str, Tensor]:
    """v: unbiased estimate of grad(accuracy) from held-out rollouts, with the RLOO baseline.

    v = (1 / (B G)) sum_ij (r_ij - mean_{k != j} r_ik) sum_t grad l_ijt  (see :func:`rloo_coefficients`
    for missing scores). The log-probabilities are those of the sampler (``batch.temperature``).

    Parameters
    ----------
    model : transformers causal LM
    batch : gradprobe.types.RolloutBatch
        Held-out rollouts with verifier ``scores`` (N,); G = ``batch.group_size`` >= 2 (16 by default
        in the design).
    micro_batch_size : int
        Rows per backward; gradients are accumulated (the result does not depend on it).

    Returns
    -------
    dict[str, Tensor]
        Keyed like ``model.named_parameters()`` (trainable ones), the parameters' dtype. Units:
        accuracy (a fraction) per unit parameter change.

    Raises
    ------
    ValueError
        ``batch.group_size < 2``.
    """
    coef = rloo_coefficients(batch.scores, batch.group_size)  # (N,)
    params = trainable_parameters(model)
    device = next(iter(params.values())).device
    mask = batch.completion_mask.bool()
    active = (coef != 0).nonzero().flatten()  # rows with zero coefficient need no backward
    with torch.enable_grad(), gradient_buffer(params) as total:  # one gradient copy (memory), same sums
        for start in range(0, active.numel(), micro_batch_size):
            rows = active[start:start + micro_batch_size]
            logp = token_logprobs(model, batch.input_ids[rows].to(device), batch.attention_mask[rows].to(device),
                                  batch.prompt_length, temperature=batch.temperature)  # (n, T)
            weight = mask[rows].to(device, logp.dtype) * coef[rows].to(device, logp.dtype)[:, None]
            torch.autograd.backward((weight * logp).sum(), inputs=list(params.values()))
    return total


def save_direction(direction: dict[str, Tensor], path: str | os.PathLike, *,
                   metadata: dict[str, str] | None = None) -> None:
    """Write a parameter-space vector to a ``.safetensors`` file (CPU copies).

    Parameters
    ----------
    direction : dict[str, Tensor]
    path : str or PathLike
    metadata : dict[str, str], optional
        Stored in the file header (e.g. how the direction was made).
    """
    from safetensors.torch import save_file

    tensors = {k: v.detach().to("cpu", copy=True).contiguous() for k, v in direction.items()}
    save_file(tensors, os.fspath(path), metadata={"format": "gradprobe-direction", **(metadata or {})})
    give_umask_mode(path)  # safetensors wrote it 0600


def load_direction(path: str | os.PathLike, model) -> dict[str, Tensor]:
    """Read a parameter-space vector (e.g. theta_T - theta_0) saved by :func:`save_direction`.

    Returns
    -------
    dict[str, Tensor]
        On the model's device and in its parameters' dtypes.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        The file is not a readable safetensors file.
    DirectionMismatchError
        Keys or shapes differ from the model's trainable parameters (the message names the first
        bad key and the fix).
    """
    from safetensors.torch import load_file

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"direction file {path!r} does not exist")
    try:
        tensors = load_file(path)
    except Exception as e:  # safetensors raises its own SafetensorError on a damaged header
        raise ValueError(f"direction file {path!r} is not a readable safetensors file ({e}); write it with "
                         f"gradprobe.probe.save_direction") from None
    return check_direction(model, tensors, name=f"direction file {path!r}")


def direction_between(model_final, model_initial) -> dict[str, Tensor]:
    """theta_T - theta_0 over the trainable parameters of ``model_final``.

    Returns
    -------
    dict[str, Tensor]
        On ``model_final``'s device, in its dtypes.

    Raises
    ------
    DirectionMismatchError
        The two models' trainable parameters differ in names or shapes.
    """
    final = trainable_parameters(model_final)
    initial = trainable_parameters(model_initial)
    for key in initial:
        if key not in final:
            raise DirectionMismatchError(
                f"direction_between: parameter {key!r} of the initial model is not a trainable parameter of the "
                "final model; both must be the same architecture with the same parameters trainable")
    out = {}
    for key, p in final.items():
        if key not in initial or initial[key].shape != p.shape:
            raise DirectionMismatchError(
                f"direction_between: parameter {key!r} of the final model has no counterpart of shape "
                f"{tuple(p.shape)} in the initial model; both must be the same architecture")
        out[key] = (p.detach() - initial[key].detach().to(p.device, p.dtype)).clone()
    return out


def adam_preconditioner(second_moment: dict[str, Tensor], *, eps: float = 1e-8) -> dict[str, Tensor]:
    """P = 1 / (sqrt(s) + eps), elementwise (Kingma & Ba 2015, Alg. 1, with s = v_hat).

    Parameters
    ----------
    second_moment : dict[str, Tensor]
        s >= 0, bias-corrected.
    eps : float
        Adam's epsilon (use the optimizer's).

    Notes
    -----
    Coordinates with s = 0 (parameters no minibatch gradient touched, e.g. embedding rows of
    tokens absent from an untied model's batch) get P = 1 / eps. They change no inner product
    <g, P v> with a gradient that is zero there (nor Adam's step, whose momentum is zero there),
    but they can dominate ||P v||, so a cosine along P v should be read with care.
    """
    return {k: 1.0 / (s.clamp(min=0).sqrt() + eps) for k, s in second_moment.items()}


def apply_preconditioner(direction: dict[str, Tensor], p: dict[str, Tensor]) -> dict[str, Tensor]:
    """P v, elementwise; ``direction`` and ``p`` must have the same keys and shapes.

    Raises
    ------
    DirectionMismatchError
        Different keys or shapes.
    """
    if direction.keys() != p.keys():
        bad = sorted(set(direction) ^ set(p))[0]
        raise DirectionMismatchError(
            f"apply_preconditioner: key {bad!r} is in only one of the direction and the preconditioner")
    out = {}
    for k, v in direction.items():
        if v.shape != p[k].shape:
            raise DirectionMismatchError(
                f"apply_preconditioner: {k!r} has shape {tuple(v.shape)} in the direction and {tuple(p[k].shape)} "
                "in the preconditioner")
        out[k] = v * p[k].to(v.device, v.dtype)
    return out


def second_moment_from_minibatches(model, batch, advantages: Tensor, weights_fn: Callable[[Tensor], Tensor], *,
                                   num_minibatches: int = 4, micro_batch_size: int = 8) -> dict[str, Tensor]:
    """s = (1/K) sum_k g_k ** 2, g_k the GRPO gradient of minibatch k of the probe batch.

    The batch's groups are split into K = ``num_minibatches`` contiguous minibatches of near-equal
    size (whole groups, as a trainer would draw them); g_k = sum_nt w^k_nt A_nt grad l_nt with
    w^k = ``weights_fn(completion_mask of minibatch k)``. The result stands in for Adam's second
    moment before any training and is shared by all rewards (use the outcome advantages).

    Parameters
    ----------
    advantages : Tensor, shape (N, T)
        Usually the outcome (GRPO) advantages.
    weights_fn : callable, completion_mask (n, T) -> weights (n, T)
        E.g. ``functools.partial(gradprobe.grpo.losses.token_weights, loss_type="grpo")``.
    num_minibatches : int
        K, between 1 and B.

    Raises
    ------
    ValueError
        ``num_minibatches`` not in [1, B].
    """
    b = batch.num_prompts
    if not 1 <= num_minibatches <= b:
        raise ValueError(f"num_minibatches must be between 1 and the number of prompts {b}, got {num_minibatches}")
    g = batch.group_size
    total: dict[str, Tensor] = {}
    for groups in torch.arange(b).tensor_split(num_minibatches):
        sub = batch.select_groups(groups)
        rows = (groups[:, None] * g + torch.arange(g)).reshape(-1)
        grad = reward_gradient(model, sub, advantages[rows], weights_fn(sub.completion_mask),
                               micro_batch_size=micro_batch_size)
        for k in list(grad):  # in place, one gradient copy at a time (memory); the same values
            sq = grad.pop(k).square_()
            total[k] = total[k].add_(sq) if k in total else sq
    return {k: v.div_(num_minibatches) for k, v in total.items()}


def second_moment_from_optimizer(optimizer, model) -> dict[str, Tensor]:
    """Bias-corrected second moment v_hat = exp_avg_sq / (1 - beta2 ** step) of Adam/AdamW.

    Parameters
    ----------
    optimizer : torch.optim.Adam or torch.optim.AdamW
        After at least one step.
    model : torch.nn.Module
        Whose trainable parameters the optimizer updates.

    Returns
    -------
    dict[str, Tensor]
        Keyed like ``model.named_parameters()``; combine with :func:`adam_preconditioner` using the
        optimizer's ``eps`` (``optimizer.param_groups[0]["eps"]``).

    Raises
    ------
    ValueError
        A parameter has no Adam state (not in the optimizer, or no step taken yet), or the
        optimizer uses ``amsgrad`` (whose denominator is max_exp_avg_sq).
    """
    group_of = {id(p): group for group in optimizer.param_groups for p in group["params"]}
    out = {}
    for key, p in trainable_parameters(model).items():
        state = optimizer.state.get(p, {})
        if id(p) not in group_of or "exp_avg_sq" not in state:
            raise ValueError(
                f"the optimizer has no Adam state for parameter {key!r}: pass the Adam/AdamW optimizer that trains "
                "this model, after at least one step (or use second_moment_from_minibatches)")
        group = group_of[id(p)]
        if group.get("amsgrad", False):
            raise ValueError("second_moment_from_optimizer does not support amsgrad=True")
        beta2 = group["betas"][1]
        step = float(state["step"])
        out[key] = state["exp_avg_sq"].detach() / (1.0 - beta2 ** step)
    return out
