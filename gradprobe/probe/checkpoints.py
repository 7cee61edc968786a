"""The probe along a reference run: probe batches at the initial policy and at kept checkpoints of a GRPO run
(``gradprobe probe --checkpoints RUN``), pooled into one efficiency ratio.

A probe of the initial policy measures each reward's update against grpo's at update 0 only; training
moves the policy, and a reward's efficiency relative to grpo moves with it (README, "Probing along a
reference run", has the measurements). Probing the
same batch settings at several points of a cheap reference GRPO run (the run the forecast reads its
learning curve from; keep its weights with ``[train] save_weights_at``) averages the ratio over the
trajectory the forecast extrapolates along.

:func:`run_probe_checkpoints` loads the policy once and, for the initial weights and then each checkpoint
in turn (weights loaded in place, the caller's weights restored afterwards), runs ``batches`` probe
batches on the same training-prompt slices as :func:`gradprobe.probe.batches.run_probe_batches` does, with
a reference direction computed at that policy (the held-out RLOO gradient of that policy, or the
``direction:PATH`` vector for every policy). Batches are pooled by
:func:`~gradprobe.probe.batches.combine_batches`: rho = sum over batches of <g_R, u> / sum of
<g_outcome, u> (a ratio of sums, so policies with larger alignments weigh more), and each policy is
its own reference draw, so the forecast's interval carries the reference's sampling noise
(:func:`gradprobe.forecast.proxies.probe_efficiency`'s jackknife over draws).

Checkpoint files: a ``.safetensors`` file of the policy's weights (a run's ``weights/update-UUUUUU.safetensors``,
``[train] save_weights_at``), a resume checkpoint folder (``checkpoint-UUUUUU/``, its ``model.safetensors``),
or a run folder (every file of its ``weights/``, in update order). They must come from a run of the
probe's ``--model`` (same architecture and parameter names).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..layout import WEIGHTS_DIR
from ..outputs import prepare_output_dir, removed_if_left_empty
from ..probe_settings import check_batch_seeds
from . import run as probe_run  # probe_run.run_probe is looked up per call, as in gradprobe.probe.batches
from .batches import (ReferenceDirection, _distinct_train_prompts, _sum_ledgers, _TrainSlice, combine_batches,
                      loaded_task_and_policy)
from .guided import check_guided_task
from .output import write_probe_json

__all__ = ["checkpoint_weights", "load_weights", "check_weights", "run_probe_checkpoints"]

_UPDATE = re.compile(r"(\d+)")


def checkpoint_weights(paths) -> list[tuple[str, Path]]:
    """The weight files that ``--checkpoints`` names, each with its label (``update-000010``).

    Parameters
    ----------
    paths : str, path or sequence of them
        Comma-separated in a string, or a list: weight files, resume checkpoint folders or run folders
        (module docstring).

    Returns
    -------
    list of (label, Path)
        In the order given, a run folder's files in update order; a label is the file's (or checkpoint
        folder's) name without suffix, and repeats are refused.

    Raises
    ------
    ValueError
        No path; a path that does not exist; a folder with neither ``model.safetensors`` nor weight files in
        ``weights/`` (the message says how a run keeps them); a file that is not ``.safetensors``; one file
        named twice.
    """
    items = [p.strip() for p in paths.split(",")] if isinstance(paths, str) else [str(p) for p in (paths or [])]
    items = [p for p in items if p]
    if not items:
        raise ValueError("--checkpoints names no weights; give a run folder (its weights/), a checkpoint-UUUUUU "
                         "folder or a .safetensors file, comma-separated")
    out: list[tuple[str, Path]] = []
    for item in items:
        path = Path(item).expanduser()
        if not path.exists():
            raise ValueError(f"--checkpoints: {item} does not exist; give a run folder, a checkpoint-UUUUUU folder "
                             "or a .safetensors weight file")
        if path.is_file():
            if path.suffix != ".safetensors":
                raise ValueError(f"--checkpoints: {item} is not a .safetensors weight file")
            out.append((path.stem, path))
        elif (path / "model.safetensors").is_file():
            out.append((path.name, path / "model.safetensors"))
        else:
            kept = sorted((path / WEIGHTS_DIR).glob("update-*.safetensors"), key=_update_of)
            if not kept:
                raise ValueError(f"--checkpoints: {item} has no model.safetensors and no "
                                 f"{WEIGHTS_DIR}/update-*.safetensors; train the reference run with [train] "
                                 "save_weights_at = [10, 20, 30] (updates) to keep its weights, or name a "
                                 "checkpoint-UUUUUU folder")
            out.extend((p.stem, p) for p in kept)
    seen, labels = set(), {"initial"}
    for i, (label, p) in enumerate(out):
        if p.resolve() in seen:
            raise ValueError(f"--checkpoints names {p} twice; each checkpoint is one reference draw")
        seen.add(p.resolve())
        unique, n = label, 2
        while unique in labels:  # two runs' update-000010, or a file named initial: the folder names stay distinct
            unique, n = f"{label}-{n}", n + 1
        labels.add(unique)
        out[i] = (unique, p)
    return out


def _update_of(path: Path) -> int:
    m = _UPDATE.search(path.stem)
    return int(m.group(1)) if m else -1


def load_weights(model, path: Path) -> None:
    """Load the weight file ``path`` into ``model`` in place (``safetensors.torch.load_model``, strict).

    Raises
    ------
    ValueError
        The file is not a readable safetensors file (damaged, truncated), or does not fit the model (missing or
        unexpected parameter names, other shapes): the message names the file, what is wrong (the first names)
        and says the checkpoints must come from a run of the probe's ``--model``.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_model

    try:
        load_model(model, str(path), strict=True, device=str(next(model.parameters()).device))
    except SafetensorError as e:
        raise _unreadable(path, e) from None
    except (RuntimeError, KeyError, ValueError) as e:
        raise _misfit(path, " ".join(x.strip() for x in str(e).strip().splitlines()[:3] if x.strip())
                      or type(e).__name__) from None


def check_weights(model, weights: list[tuple[str, Path]]) -> None:
    """Check every weight file against ``model`` from its header alone (names and shapes; no tensor is read,
    the model is not touched), so a damaged file or one of another model is refused before any probe batch.

    A name the file lacks is allowed when the model ties that parameter to one the file has (the same
    storage, e.g. tied input and output embeddings, which ``safetensors.torch.save_model`` writes once).

    Raises
    ------
    ValueError
        A file that is not readable safetensors, or whose names or shapes differ from the model's (the first
        few named), as :func:`load_weights` would raise.
    """
    from safetensors import SafetensorError, safe_open

    state = model.state_dict()
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    storage: dict[int, set] = {}
    for k, v in state.items():
        storage.setdefault(v.data_ptr(), set()).add(k)
    for _, path in weights:
        try:
            with safe_open(str(path), framework="pt") as f:
                found = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
        except SafetensorError as e:
            raise _unreadable(path, e) from None
        unexpected = sorted(set(found) - set(shapes))
        wrong = sorted(f"{k} {found[k]} vs {shapes[k]}" for k in set(found) & set(shapes) if found[k] != shapes[k])
        missing = sorted(k for k in set(shapes) - set(found) if not storage[state[k].data_ptr()] & set(found))
        problems = [f"{what}: {', '.join(names[:3])}{' ...' if len(names) > 3 else ''}" for what, names in
                    (("missing", missing), ("unexpected", unexpected), ("other shapes", wrong)) if names]
        if problems:
            raise _misfit(path, "; ".join(problems))


def _unreadable(path: Path, e: Exception) -> ValueError:
    return ValueError(f"--checkpoints (checkpoints=): {path} is not a readable safetensors file ({e}); it is damaged "
                      "or not a weight file: name a run's weights/update-UUUUUU.safetensors or a checkpoint folder")


def _misfit(path: Path, detail: str) -> ValueError:
    return ValueError(f"--checkpoints (checkpoints=): {path} does not fit the probe's model ({detail[:400]}); the "
                      "checkpoints must come from a run of the same --model")


def run_probe_checkpoints(config, checkpoints, *, batches: int = 1, out=None, policy=None, task=None,
                          extra_rewards: dict | None = None, sampler=None) -> dict:
    """Probe the initial policy and each checkpoint, ``batches`` batches each, and pool them (module docstring).

    Parameters
    ----------
    config : gradprobe.probe.run.ProbeConfig
        Every batch's configuration (``prompts`` x ``group`` per batch); ``model`` is the initial policy.
    checkpoints : str, path or sequence
        As :func:`checkpoint_weights`.
    batches : int
        Batches per policy (>= 1), on disjoint training prompts; the same slices at every policy, so the
        policies are compared on the same prompts.
    out : path, optional
        Output folder: the pooled ``probe.json`` and each batch's files in ``batch_K/`` (K counts over the
        policies in order, the initial policy's batches first; ``probe.json``'s ``batches[K].checkpoint`` names
        its policy), as :func:`~gradprobe.probe.batches.run_probe_batches` lays them out.
    policy, task, extra_rewards, sampler
        As :func:`gradprobe.probe.run.run_probe` (loaded once when not given). A given policy's weights
        are restored before returning, also after an error; the call holds one copy of the initial weights on
        the model's device meanwhile (one model's parameters of memory).

    Returns
    -------
    dict
        :func:`~gradprobe.probe.batches.combine_batches`'s result over (1 + checkpoints) x ``batches``
        batches; ``config`` gains ``checkpoints`` (the files, in order), ``batches_per_policy`` and
        ``probe_batches`` (the total); each batch
        of ``batches`` gains ``checkpoint`` (its policy's label, ``initial`` first), which is its reference
        draw; ``reference`` lists the ``draws`` and its ``ledger`` sums every policy's held-out reference.

    Raises
    ------
    ValueError
        Everything :func:`checkpoint_weights` and :func:`load_weights` raise (before any compute: a missing
        path before the policy loads, a damaged file or one of another model right after), ``batches < 1``,
        and everything ``run_probe`` raises.
    OSError
        ``out`` cannot be written (checked before any compute).
    """
    if not isinstance(batches, int) or batches < 1:
        raise ValueError(f"batches (--probe-batches) must be an integer >= 1, got {batches!r}")
    check_batch_seeds(config.batch.seed, batches, config.batch.prompts)  # seeds and batches x prompts: checked first
    weights = checkpoint_weights(checkpoints)
    check_guided_task(config, task)
    with removed_if_left_empty(out):
        if out is not None:
            prepare_output_dir(Path(out))
        task, policy = loaded_task_and_policy(config, task, policy)
        check_weights(policy.model, weights)  # a file that does not fit fails before any compute
        policies = [("initial", None), *weights]
        results = _probe_each_policy(config, policies, batches, out, policy, task, extra_rewards, sampler)
        combined = _pooled(results, config, policies, batches)
        if out is not None:
            write_probe_json(out, combined)  # named in a probe's record first (claim_probe_file)
        return combined


def _probe_each_policy(config, policies, batches: int, out, policy, task, extra_rewards, sampler) -> list[dict]:
    """``batches`` probe batches at each of ``policies`` ((label, weight file) in order; ``("initial", None)``: the
    weights ``policy`` holds), on the same training-prompt slices at every policy; each batch's result (``run_probe``,
    written to ``out/batch_K`` when ``out`` is given) gains ``reference["draw"]`` (its policy's label) and
    ``prompt_ids``. Returns the (policies x batches) results in order. ``policy``'s weights are restored afterwards,
    also after an error (one copy of them is held on the model's device meanwhile); raises what :func:`load_weights`
    and ``run_probe`` raise."""
    model = policy.model
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    b = config.batch.prompts
    pool = _distinct_train_prompts(task, batches * b, config.batch.seed)
    results = []
    try:
        for label, path in policies:
            if path is not None:
                load_weights(model, path)
            holder = ReferenceDirection()  # u at this policy
            for k in range(batches):
                sub = None if out is None else Path(out) / f"batch_{len(results)}"
                res = probe_run.run_probe(config.with_settings(seed=config.batch.seed + k), out=sub, policy=policy,
                                          task=_TrainSlice(task, pool[k * b:(k + 1) * b]), extra_rewards=extra_rewards,
                                          sampler=sampler, reference_direction=holder)
                res["reference"]["draw"] = label
                res["prompt_ids"] = [p.id for p in pool[k * b:(k + 1) * b]]
                results.append(res)
    finally:
        model.load_state_dict(initial)
    return results


def _pooled(results: list[dict], config, policies, batches: int) -> dict:
    """:func:`~gradprobe.probe.batches.combine_batches` of ``results`` (:func:`_probe_each_policy`'s) with what
    :func:`run_probe_checkpoints` adds: ``config``'s ``checkpoints`` and ``batches_per_policy``, one ``reference``
    per policy (``draws``, ``reused_by_batches``, the summed ``ledger``) and each batch's ``checkpoint`` label."""
    combined = combine_batches(results, config)
    combined["config"].update(checkpoints=[str(p) for _, p in policies[1:]], batches_per_policy=batches)
    # one reference per policy: the pre-screen's tokens count each one's held-out rollouts (batches that
    # reused their policy's reference spent none)
    first = {k: v for k, v in results[0]["reference"].items() if k != "draw"}  # each batch has its own draw
    combined["reference"] = dict(first, draws=[label for label, _ in policies], reused_by_batches=batches - 1,
                                 ledger=_sum_ledgers([r["reference"].get("ledger") or {} for r in results]))
    for entry, res in zip(combined["batches"], results):
        entry["checkpoint"] = res["reference"]["draw"]
    return combined
