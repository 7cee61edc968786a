"""Building a model tier: the ``tiny`` policy, warm-started by supervised fine-tuning (DESIGN.md, "Tiers").

Where a built tier lives, its config and hash: :mod:`gradprobe.tiers` (imported here; it never
imports this module). ``gradprobe warmstart --tier NAME`` runs :func:`build_tier`.

Why a warm start: GRPO learns only from groups whose rewards differ, so a randomly initialised
model (success 0) gives no signal and a perfect one gives none either. The tiny tier is a
~1M-parameter ``Qwen2ForCausalLM`` (hidden 128, 4 layers) with the character tokenizer of
:mod:`gradprobe.char_tokenizer`, trained for a few minutes with teacher forcing on reasoning-gym
``chain_sum`` problems (:data:`gradprobe.tiers.TINY_TASK`: 2-4 terms of 1-2 digits) until its mean success on
the training pool lies between 0.2 and 0.6, with 1-digit prompts mostly solved and 2-digit ones
mostly failed, so that prompts spread across the whole range of success rates.

Prompt: the tier's tokenizer carries the compact chat template of
:mod:`gradprobe.char_tokenizer` (``<s>2 + 3 - 1 =\\n``, ~10-20 tokens instead of the ~250-290 of
the full instruction prompt, which would otherwise dominate the cost of every rollout, eval and
update); the model learns the output format from the SFT targets, not from an instruction.
Prompts are still built by :func:`gradprobe.tasks.prompts.encode_prompt` from the saved
tokenizer, so SFT, GRPO and evals see the same ids.

Schedule (measured, 128-prompt greedy accuracy of this shape, batch 16, lr 3e-3): ~0.05 at
500 steps, ~0.2 at 1,000-1,250, then a jump to 0.35-0.4 between 1,500 and 2,500 steps as the
1-digit prompts are learned (1-digit ~0.6-0.75, 2-digit ~0.05). The default build (seed 0)
measured greedy 0.422, sampled 0.382, 43% of the 256 pool prompts with 0 < success < 1 (97 at
0, 48 at 1), final SFT loss 0.130. Cost: one SFT step (16 examples of ~47 ids) is ~0.13
CPU-seconds on one thread, so the 2,500 steps are ~5.5 CPU-minutes of useful work; on a shared,
loaded 2-core machine (load average 4-10) the whole build took 23 minutes of wall time and 16.5
CPU-minutes with 2 threads, so expect ~4-6 minutes only on 2 otherwise idle cores.

Targets (:func:`gradprobe.tasks.chain_sum.chain_sum_target`) write one step per line and the
answer after ``####``, the format the prompt asks for (:data:`gradprobe.tasks.prompts.INSTRUCTION`)::

    12 + 7 = 19
    19 - 3 = 16
    #### 16

The build is deterministic for a seed and thread count (``threads``, 2 by default, is part of
the config: the thread count changes floating-point reductions), cached under
``$GRADPROBE_CACHE/tiers/tiny-<hash>`` (default
``~/.cache/gradprobe/tiers``; the hash covers the whole :class:`TinyTierConfig`, seed included),
and written atomically: built into a hidden temporary folder, then renamed. The folder holds
``save_pretrained`` weights (safetensors), the tokenizer and ``warmstart.json`` (config, seed,
versions, final SFT loss, measured greedy and sampled accuracy, seconds).

SFT data come from the train split with seed ``SFT_DATA_SEED + seed``, a different sample from
the default training pool (``task.problems("train", n, seed=0)``) that GRPO draws from and on
which the accuracy is measured.
"""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import re
import shutil
import time
import uuid
from pathlib import Path

import torch

from .outputs import give_umask_mode, versions
from .tasks.chain_sum import chain_sum_target
from .tiers import FORMAT_VERSION, TinyTierConfig, cache_root, check_seed, config_hash, shipped_root, tier_config
from .tasks.prompts import encode_prompt
from .config import SamplingConfig
from .rollout import HFSampler, collect_rollouts
from .char_tokenizer import char_tokenizer
from .models import RECORD_FIELDS  # noqa: F401 - re-exported: it moved to gradprobe.models
from .models import TIER_MARKER, WEIGHTS_FILE, TierDamagedError, load_policy, other_weights_hint, read_tier_files
from .models import tier_model_config, tier_model_damage, tier_record_damage, tier_vocab_size
from .tasks import load_task


log = logging.getLogger(__name__)

__all__ = ["build_tier", "build_or_reuse_tier", "measure_accuracy", "tier_record", "TierBuildBusyError"]

SFT_DATA_SEED = 10_000


# ----------------------------------------------------------------------------- data

def _examples(tokenizer, problems) -> list[tuple[list[int], int]]:
    """(ids, prompt length) per problem: prompt ids, then target ids and EOS."""
    out = []
    for p in problems:
        prompt = encode_prompt(tokenizer, p.question)
        target = tokenizer.encode(chain_sum_target(p), add_special_tokens=False) + [tokenizer.eos_token_id]
        out.append((prompt + target, len(prompt)))
    return out


def _bare_rows(tokenizer, problems, n_rows: int, width: int) -> list[tuple[list[int], int]]:
    """``n_rows`` rows of ``width`` ids: targets without prompts, packed as ``<s>target</s><s>...``.

    They teach the line arithmetic and the copies inside a completion at a fraction of the cost
    of full examples (a prompt is ~250 characters, a target ~35); labels from the second id on.
    """
    stream: list[int] = []
    need = n_rows * width
    for p in problems:
        if len(stream) >= need:
            break
        stream += [tokenizer.bos_token_id] + tokenizer.encode(chain_sum_target(p), add_special_tokens=False) \
            + [tokenizer.eos_token_id]
    if len(stream) < need:
        raise ValueError(f"{len(problems)} problems fill only {len(stream)} of {need} bare-target ids")
    return [(stream[r * width: (r + 1) * width], 1) for r in range(n_rows)]


def _micro_batch(examples, pad_id: int):
    """Right-padded ids (n, L), labels (n, L) with -100 before each label start, logits_to_keep."""
    width = max(len(ids) for ids, _ in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    for r, (x, p) in enumerate(examples):
        ids[r, : len(x)] = torch.tensor(x)
        labels[r, p: len(x)] = torch.tensor(x[p:])
    keep = width - min(p for _, p in examples) + 1  # logits from the last prompt token on
    return ids, labels, keep


# ----------------------------------------------------------------------------- training

def _lr_at(step: int, config: TinyTierConfig) -> float:
    """Linear warm-up over ``warmup_steps``, then cosine from ``lr`` to ``lr * min_lr_ratio``."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    frac = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.lr * (config.min_lr_ratio + (1 - config.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac)))


def _sft(model, examples, bare, config: TinyTierConfig, pad_id: int, progress: bool) -> list[float]:
    """Teacher forcing (token mean per step); returns the loss per step.

    ``examples`` (``batch_size`` per step) and ``bare`` rows (``bare_rows`` per step) are
    (ids, label_start) pairs, used in order. Right padding needs no
    attention mask: causal attention never lets a real token see the pads after it, and the pads
    carry no labels.
    """
    from tqdm.auto import tqdm

    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=config.lr, betas=(0.9, 0.95))
    losses = []
    model.train()
    bar = tqdm(range(config.steps), desc="warmstart sft", disable=not progress, leave=False)
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = _lr_at(step, config)
        batch = examples[step * config.batch_size: (step + 1) * config.batch_size]
        rows = bare[step * config.bare_rows: (step + 1) * config.bare_rows]
        n_tokens = sum(len(x) - p for x, p in batch + rows)
        micro = [batch[lo: lo + config.micro_batch_size] for lo in range(0, len(batch), config.micro_batch_size)]
        total = 0.0
        for chunk in micro + ([rows] if rows else []):
            ids, labels, keep = _micro_batch(chunk, pad_id)
            logits = model(input_ids=ids, use_cache=False, logits_to_keep=keep).logits  # (n, keep, V)
            target = labels[:, -keep + 1:] if keep > 1 else labels[:, :0]
            loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                                                     target.reshape(-1), ignore_index=-100, reduction="sum")
            (loss / n_tokens).backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(total / n_tokens)
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    model.eval()
    return losses


def measure_accuracy(policy, task, problems, *, samples: int, max_new_tokens: int, seed: int = 0,
                     progress: bool = False) -> dict:
    """Greedy and temperature-1 success of ``policy`` on ``problems``.

    Returns
    -------
    dict
        ``greedy_accuracy``, ``sampled_accuracy`` (mean over prompts x ``samples``),
        ``spread_fraction`` (prompts whose per-prompt sampled success is strictly between 0 and 1),
        ``per_prompt`` (sampled success per prompt, length B), ``format_rate`` (sampled),
        ``prompts``, ``samples``.
    """
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=max_new_tokens, batch_size=64)
    sampler = HFSampler(policy, seed=seed, progress=progress)
    greedy_sampler = _GreedySampler(sampler)
    greedy = collect_rollouts(policy, task, problems, group_size=1, sampler=greedy_sampler, sampling=sampling,
                              category="eval", desc="eval greedy")
    sampled = collect_rollouts(policy, task, problems, group_size=samples, sampler=sampler, sampling=sampling,
                               category="eval", desc="eval sampled")
    per_prompt = sampled.scores.nan_to_num(0.0).view(len(problems), samples).mean(1)  # (B,)
    formats = [task.format_rate(c) for c in sampled.completions]
    return {
        "greedy_accuracy": float(greedy.scores.nan_to_num(0.0).mean()),
        "sampled_accuracy": float(per_prompt.mean()),
        "spread_fraction": float(((per_prompt > 0) & (per_prompt < 1)).float().mean()),
        "format_rate": sum(formats) / max(1, len(formats)),
        "per_prompt": [round(float(v), 4) for v in per_prompt],
        "prompts": len(problems), "samples": samples,
    }


class _GreedySampler:
    """Adapter: a sampler whose ``sample`` decodes greedily (for ``collect_rollouts``)."""

    def __init__(self, inner):
        self.inner = inner

    def sample(self, prompts, **kwargs):
        return self.inner.sample(prompts, greedy=True, **kwargs)


def _build_into(folder: Path, config: TinyTierConfig, seed: int, progress: bool, name: str = "tiny") -> dict:
    from transformers import AutoModelForCausalLM

    start, cpu_start = time.perf_counter(), time.process_time()
    tokenizer = char_tokenizer("compact")
    model_config = tier_model_config(config, len(tokenizer))
    task = load_task(config.task, **config.task_config)
    n_real = config.steps * config.batch_size
    n_rows = config.steps * config.bare_rows
    n_bare = n_rows * config.bare_width // 16 + 1  # a bare target is >= 16 ids
    problems = task.problems("train", n_real + (n_bare if n_rows else 0), seed=SFT_DATA_SEED + seed)
    bare = _bare_rows(tokenizer, problems[n_real:], n_rows, config.bare_width)
    examples = _examples(tokenizer, problems[:n_real])
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(model_config, dtype=torch.float32, attn_implementation="sdpa")
    losses = _sft(model, examples, bare, config, tokenizer.pad_token_id, progress)
    train_seconds = time.perf_counter() - start
    if not all(math.isfinite(v) for v in losses):
        raise RuntimeError(f"SFT loss is not finite (last {losses[-1]}); lower the learning rate")
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    (folder / TIER_MARKER).write_text(json.dumps({"tier": name, "tokenizer_class": "PreTrainedTokenizerFast"}))

    policy = load_policy(str(folder), dtype="float32")
    probe = encode_prompt(tokenizer, problems[0].question) + tokenizer.encode(chain_sum_target(problems[0]))
    if encode_prompt(policy.tokenizer, problems[0].question) + policy.tokenizer.encode(
            chain_sum_target(problems[0])) != probe:
        raise RuntimeError(f"the tokenizer saved in {folder} does not load back as built "
                           f"(AutoTokenizer gave {type(policy.tokenizer).__name__})")
    pool = task.problems("train", config.eval_prompts, seed=0)
    metrics = measure_accuracy(policy, task, pool, samples=config.eval_samples,
                               max_new_tokens=config.eval_max_new_tokens, seed=seed, progress=progress)
    n_params = sum(p.numel() for p in model.parameters())
    tail = losses[-10:]
    return {
        "tier": name, "seed": seed, "config": config.to_dict(), "config_hash": config_hash(config, seed),
        "format_version": FORMAT_VERSION, "versions": versions(), "parameters": n_params,
        "sft_data": {"task": config.task, "split": "train", "seed": SFT_DATA_SEED + seed, "examples": n_real,
                     "bare_rows": len(bare)},
        "final_sft_loss": sum(tail) / len(tail), "sft_losses": [round(v, 5) for v in losses],
        "eval": {"pool": {"split": "train", "seed": 0, "n": config.eval_prompts}, **metrics},
        "train_seconds": train_seconds, "seconds": time.perf_counter() - start,
        "cpu_seconds": time.process_time() - cpu_start,
    }


def build_tier(name: str = "tiny", *, seed: int = 0, config: TinyTierConfig | None = None,
               out: str | Path | None = None, force: bool = False, progress: bool = True) -> Path:
    """Build a tier (or return the cached one) and return its folder.

    Parameters
    ----------
    name : str
        ``"tiny"``.
    seed : int
        Initialisation and SFT-data seed, in [0, 2**63 - 1].
    config : TinyTierConfig, optional
    out : path, optional
        Target folder; default ``cache_root() / f"{name}-{hash}"``.
    force : bool
        Rebuild even when the folder holds a finished build, another build or a damaged one.
    progress : bool
        Progress bars.

    Returns
    -------
    Path
        The folder (``warmstart.json`` present). A finished build is reused only when its ``warmstart.json``
        (:func:`tier_record`) names this config and seed and its model files read
        (:func:`gradprobe.models.tier_damage`); a damaged build in the default cache is rebuilt (logged as a
        warning), a folder holding the marker and build files but no ``warmstart.json`` included. An interrupted
        (KeyboardInterrupt, or SIGTERM under ``gradprobe warmstart``, which turns it into an exception) or failed
        build leaves no folder: it is written to ``.<name>.tmp-*`` beside the
        target and renamed when complete; an earlier build there is kept until then. Such ``.<name>.tmp-<pid>-*``
        folders left by a build that was killed (SIGKILL: no cleanup ran) are removed by the next build into the
        target, or the next run that reuses it, once their process no longer runs (logged as a warning, so on
        stderr). A build holds the lock file
        ``.<name>.lock`` beside the target (``fcntl.flock``: the kernel releases it when the process dies, so the
        lock of a killed build never blocks); the files get the mode ``open()`` gives under the umask.

    Raises
    ------
    ValueError
        Unknown tier name, a seed outside [0, 2**63 - 1], or a build into the builds shipped with the package
        (:func:`gradprobe.tiers.shipped_root` or a folder inside it, by ``out`` or ``$GRADPROBE_CACHE``; reusing one
        there is allowed).
    TypeError
        ``config`` is not a :class:`TinyTierConfig`.
    gradprobe.models.TierDamagedError
        Without ``force``, ``out`` holds a damaged build (a file missing or unreadable, a ``config.json`` that is
        not the recipe's model: another ``model_type``, shape, tying of the embeddings, biases, head size or
        activation, a ``model.safetensors`` whose tensors are not the recipe's model's: one missing, extra or of
        another shape (:func:`gradprobe.models.tier_model_damage`), or one without ``warmstart.json``; a ValueError;
        the message names the file and ``--force``, and when the weights were re-saved as shards or
        ``pytorch_model.bin``, that ``--force`` deletes them and how to keep them).
    TierBuildBusyError
        Another live process is building into the same folder (a RuntimeError; the message names its pid, the
        lock file and the fix: wait for it, or another ``--out``).
    RuntimeError
        Without ``force``, the folder holds another build (tier, seed or config; the message names it); or a
        non-finite SFT loss.
    OSError
        The folder cannot be written: ``out`` (or a folder above it, or ``$GRADPROBE_CACHE``) is a file, or a
        folder cannot be created there (the message names ``--out`` or ``GRADPROBE_CACHE`` and the fix); or it
        exists, has no ``warmstart.json`` and is not a tier build (no marker, or files a build does not write: a
        FileExistsError, ``force`` or not; the message lists its files).
    """
    return build_or_reuse_tier(name, seed=seed, config=config, out=out, force=force, progress=progress)[0]


def build_or_reuse_tier(name: str = "tiny", *, seed: int = 0, config: TinyTierConfig | None = None,
                        out: str | Path | None = None, force: bool = False, progress: bool = True) -> tuple[Path, bool]:
    """:func:`build_tier`, also saying whether the folder was reused (True: a finished build of this config and seed
    was there; its ``warmstart.json`` ``seconds`` is the earlier build's time) or built now (False). Parameters and
    errors: :func:`build_tier`."""
    if config is not None and not isinstance(config, TinyTierConfig):
        hint = " (TinyTierConfig(**config) builds one from a dict)" if isinstance(config, dict) else ""
        raise TypeError(f"config must be a TinyTierConfig, got {type(config).__name__}{hint}")
    seed = check_seed(seed)
    config = tier_config(name, config)
    target = Path(out).expanduser() if out is not None else cache_root() / f"{name}-{config_hash(config, seed)}"
    what, fix = _naming(out, target)
    _refuse_files_in_the_way(target, what, fix)
    finished = (target / "warmstart.json").is_file()
    if not force and _reusable(target, name, config, seed, explicit=out is not None):
        return _reuse(target, name, "")
    _refuse_shipped(target, what)
    if not finished:
        _refuse_unfinished(target, force=force, explicit=out is not None)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OSError(f"{what} cannot be created ({e.strerror or e}, in {target.parent}); {fix}") from None
    lock = _BuildLock(target, what, fix, explicit=out is not None)
    try:
        if not force and not finished and _reusable(target, name, config, seed, explicit=out is not None):
            return _reuse(target, name, " (built by another process meanwhile)")
        _remove_dead_leftovers(target)
        _build(target, config, seed, progress, name, what, fix)
    finally:
        lock.release()
    return target, False


def _refuse_shipped(target: Path, what: str) -> None:
    """Refuse to build into the folder of the builds shipped with the package (:func:`gradprobe.tiers.shipped_root`):
    they are the weights the shipped studies, reference curves and calibration were measured on, and a rebuild there
    (``--force``, ``--out`` under it, or ``GRADPROBE_CACHE`` pointing at ``gradprobe/data``) would replace them
    unnoticed, since nothing would differ from the cache build to warn of (``RebuiltTierWarning``). Reusing a
    shipped build there stays allowed.

    Raises
    ------
    ValueError
        ``target`` is ``shipped_root()`` or inside it; the message names it and the fix.
    """
    shipped = shipped_root().resolve()
    resolved = target.resolve()
    if resolved != shipped and shipped not in resolved.parents:
        return
    raise ValueError(f"{what} is inside {shipped}, the tier builds shipped with gradprobe (the weights its shipped "
                     "studies, reference curves and calibration were measured on), which gradprobe warmstart never "
                     "rebuilds; build into the cache instead (no --out, and GRADPROBE_CACHE not pointing into the "
                     "package) or into another --out folder")


def _reuse(target: Path, name: str, how: str) -> tuple[Path, bool]:
    """(``target``, True), logged; the leftovers of killed builds beside it are removed first, as before a build
    (:func:`_remove_dead_leftovers`: a ``--force`` rebuild killed by SIGKILL leaves its temporary folder beside the
    build it was replacing, which the next plain run reuses)."""
    _remove_dead_leftovers(target)
    log.info("tier %s: reusing %s%s", name, target, how)
    return target, True


#: What a tier build writes into its folder, by suffix (``save_pretrained``'s config, weights, tokenizer and chat
#: template, the marker, ``warmstart.json``): a folder holding anything else is not a (damaged) tier build.
_BUILD_SUFFIXES = (".json", ".jinja", ".safetensors")


def _refuse_unfinished(target: Path, *, force: bool, explicit: bool) -> None:
    """Check a ``target`` without ``warmstart.json`` before building into it. Empty or absent: nothing to do. A
    damaged build (it holds :data:`TIER_MARKER` and only files of the kinds a build writes, :data:`_BUILD_SUFFIXES`,
    e.g. a build whose ``warmstart.json`` was deleted): replaced under ``force``; without it, rebuilt in the default
    cache (logged as a warning) and refused under an explicit ``out`` (:class:`TierDamagedError`, naming ``--force``).
    Anything else: :class:`FileExistsError`, even under ``force`` (never delete a folder that is not a build)."""
    if not target.is_dir() or not any(target.iterdir()):
        return
    entries = sorted(target.iterdir())
    if (target / TIER_MARKER).is_file() and all(p.is_file() and not p.is_symlink() and p.suffix in _BUILD_SUFFIXES
                                                 for p in entries):
        damage = f"{target / 'warmstart.json'} is missing"
        if not (target / WEIGHTS_FILE).exists():
            damage += other_weights_hint(target, f"{target / WEIGHTS_FILE} is missing", force_deletes=True)
        if force:
            return
        if explicit:
            raise TierDamagedError(f"{damage}: {target} holds a damaged tier build; rebuild it with --force "
                                   "(force=True), delete the folder, or choose another folder for --out")
        log.warning("%s; rebuilding the cached tier build in %s", damage, target)
        return
    if (target / TIER_MARKER).is_file() and (target / "warmstart.json").is_dir():
        raise TierDamagedError(f"{target / 'warmstart.json'} is a folder, not the build's record file: {target} holds "
                               "a damaged tier build; remove that folder, then rebuild with --force (force=True)")
    names = ", ".join(p.name for p in entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
    raise FileExistsError(f"{target} exists and is not a tier build (it holds {names}, no warmstart.json); " + (
        "choose another folder for --out" if explicit else
        "move it away (it was not written by gradprobe warmstart), or set GRADPROBE_CACHE to another folder"))


def _build(target: Path, config: TinyTierConfig, seed: int, progress: bool, name: str, what: str, fix: str) -> None:
    """Build into a hidden ``.<name>.tmp-<pid>-<hex>`` folder beside ``target``, then rename it to ``target``; the
    temporary folder is removed on any exception (Ctrl-C and SIGTERM's included)."""
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    threads = torch.get_num_threads()
    try:
        try:
            tmp.mkdir()
        except OSError as e:
            raise OSError(f"{what} cannot be created ({e.strerror or e}, in {target.parent}); {fix}") from None
        torch.set_num_threads(config.threads)
        with torch.random.fork_rng(devices=[]):
            record = _build_into(tmp, config, seed, progress, name)
        (tmp / "warmstart.json").write_text(json.dumps(record, indent=1))
        for path in tmp.rglob("*"):  # safetensors writes model.safetensors 0600
            if path.is_file() and not path.is_symlink():
                give_umask_mode(path)
        _install(tmp, target)
    except BaseException:  # KeyboardInterrupt and gradprobe warmstart's SIGTERM exception too
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        torch.set_num_threads(threads)


class TierBuildBusyError(RuntimeError):
    """Another live process is building a tier into the same folder (it holds the folder's ``.<name>.lock``)."""


class _BuildLock:
    """Exclusive, non-blocking ``fcntl.flock`` on ``.<name>.lock`` beside ``target`` (as
    :class:`gradprobe.study.folder.FolderLock` does for a run folder: the kernel releases it when the holder dies,
    so a killed build's lock never blocks). The file holds ``pid <PID>`` while held; :meth:`release` removes it.

    Raises
    ------
    TierBuildBusyError
        Another process holds it: names ``what`` (:func:`_naming`), the holder's pid, the lock file and the fix.
    """

    def __init__(self, target: Path, what: str, fix: str, *, explicit: bool):
        self.path = target.parent / f".{target.name}.lock"
        while True:
            try:
                f = self._open()
            except OSError as e:  # an unwritable parent folder
                raise OSError(f"{what} cannot be created ({e.strerror or e}, in {target.parent}; the lock file "
                              f"{self.path}: delete it if no build runs); {fix}") from None
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.seek(0)
                holder = f.read().strip() or "pid not yet recorded"
                f.close()
                other = ("choose another folder for --out" if explicit else
                         "build into a folder of your own with --out DIR")
                raise TierBuildBusyError(f"{what} is being built by another process ({holder}, holding the lock "
                                         f"{self.path}); wait for it to finish, then run this command again (it "
                                         f"reuses that build), or {other}") from None
            try:
                same = os.stat(self.path).st_ino == os.fstat(f.fileno()).st_ino
            except FileNotFoundError:  # its holder removed it between our open and flock: take the new one
                same = False
            if same:
                break
            f.close()
        if f.writable():  # another user's lock file (a shared cache) is locked read-only, its pid not recorded
            f.seek(0)
            f.truncate()
            f.write(f"pid {os.getpid()}")
            f.flush()
        self.f = f

    def _open(self):
        """The lock file, created readable and writable by every user (a cache shared between users: the mode is set
        past the umask), else opened read-only when another user's file cannot be written (``flock`` needs no write
        access)."""
        for attempt in range(3):  # the file removed by its releasing holder between the two opens: create it again
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
                os.fchmod(fd, 0o666)
                return os.fdopen(fd, "r+")
            except FileExistsError:
                try:
                    return os.fdopen(os.open(self.path, os.O_RDWR), "r+")
                except PermissionError:
                    return os.fdopen(os.open(self.path, os.O_RDONLY), "r")
                except FileNotFoundError:
                    if attempt == 2:
                        raise
        raise FileNotFoundError(self.path)  # not reached

    def release(self) -> None:
        """Remove the lock file (while still locked), unlock and close it; idempotent."""
        if not self.f.closed:
            try:
                self.path.unlink()
            except OSError:
                pass
            fcntl.flock(self.f.fileno(), fcntl.LOCK_UN)
            self.f.close()


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (``os.kill(pid, 0)``; PermissionError: it exists, owned by another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OverflowError, OSError):  # PermissionError: alive; or not a pid this can check: keep its folder
        return True
    return True


def _remove_dead_leftovers(target: Path) -> list[Path]:
    """Remove the ``.<name>.tmp-<pid>-<hex>`` folders beside ``target`` whose process no longer runs (a build
    killed by SIGKILL leaves one: no cleanup ran), and the ``.<name>.old-<pid>-<hex>`` ones (an earlier build that
    :func:`_install` was replacing when it was killed); logs one warning per folder removed and returns them. A
    folder whose process is alive (another build, or one this process is running) is never touched."""
    pattern = re.compile(rf"\.{re.escape(target.name)}\.(tmp|old)-([0-9]{{1,10}})-[0-9a-f]+")
    removed = []
    for path in sorted(target.parent.iterdir()):
        match = pattern.fullmatch(path.name)
        if match is None or not path.is_dir() or path.is_symlink():
            continue
        pid = int(match.group(2))
        if pid <= 0 or pid == os.getpid() or _alive(pid):
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path)
            log.warning("removed %s: %s left by process %d, which no longer runs (it was killed mid-build)", path,
                        "an unfinished tier build" if match.group(1) == "tmp" else "an earlier build it was replacing",
                        pid)
    return removed


def _install(tmp: Path, target: Path) -> None:
    """Rename the finished build ``tmp`` to ``target``; an earlier build there is put back if that fails."""
    if not target.exists():
        os.rename(tmp, target)
        return
    old = target.parent / f".{target.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"  # a kill leaves it: removed
    os.rename(target, old)
    try:
        os.rename(tmp, target)
    except BaseException:
        os.rename(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _naming(out, target: Path) -> tuple[str, str]:
    """How a message names the target folder (by ``out (--out)`` or ``GRADPROBE_CACHE``) and the fix."""
    if out is not None:
        return f"out (--out) {target}", "choose another folder for --out"
    base = os.environ.get("GRADPROBE_CACHE")
    return (f"the tier folder {target}" + (f" (GRADPROBE_CACHE={base})" if base else ""),
            "set GRADPROBE_CACHE to a writable folder")


def _refuse_files_in_the_way(target: Path, what: str, fix: str) -> None:
    """Raise NotADirectoryError if ``target`` or a folder above it is a file (``what``, ``fix``: :func:`_naming`)."""
    for path in (target, *target.parents):
        if path.is_file():
            raise NotADirectoryError(f"{what} is a file, not a folder; {fix}" if path == target else
                                     f"{what} cannot be created: {path} is a file, not a folder; {fix}")
        if path.is_dir():
            return


def _reusable(target: Path, name: str, config: TinyTierConfig, seed: int, *, explicit: bool) -> bool:
    """Whether ``target`` holds this very build, intact (reuse it); False: build (nothing there, or a damaged
    build in the default cache, logged). Refuses another build, and under an explicit ``out`` a damaged one."""
    if not (target / "warmstart.json").is_file():
        return False
    record, damage = tier_record_damage(target)
    if record is not None:
        want = config_hash(config, seed)
        if record["config_hash"] != want:
            raise RuntimeError(f"{target} holds another build ({_described(record, config)}) than tier {name!r} "
                               f"seed {seed} (config_hash {want}); " + ("pass --force (force=True) to replace it, "
                               "or choose another folder for --out" if explicit else "remove it or pass --force "
                               "(force=True) to replace it"))
        damage, files = read_tier_files(target)  # each file read once, handed on to the model check
        damage = damage or tier_model_damage(target, config, tier_vocab_size(), files=files)
        if damage is None:
            return True
        damage += other_weights_hint(target, damage, force_deletes=True)
    if explicit:
        raise TierDamagedError(f"{damage}: {target} holds a damaged tier build; rebuild it with --force "
                               "(force=True), or choose another folder for --out")
    log.warning("%s; rebuilding the cached tier build in %s", damage, target)
    return False


def _described(record: dict, config: TinyTierConfig) -> str:
    """What a build's record holds, in words: tier, seed, config_hash and the config fields that differ."""
    other = record.get("config")
    differ = sorted(k for k, v in config.to_dict().items() if other.get(k) != v) if isinstance(other, dict) else []
    return (f"tier {record.get('tier')!r} seed {record.get('seed')}, config_hash {record['config_hash']}"
            + (f", differing in {', '.join(differ)}" if differ else ""))


def tier_record(folder: str | Path) -> dict:
    """The record (``warmstart.json``) of the built tier in ``folder``, checked for the fields that
    ``gradprobe warmstart`` prints (:data:`gradprobe.models.RECORD_FIELDS`).

    Raises
    ------
    gradprobe.models.TierDamagedError
        ``warmstart.json`` cannot be read, is not a JSON object or lacks a field (the message names the file, what
        is wrong and ``--force``). A ValueError.
    """
    record, damage = tier_record_damage(Path(folder))
    if damage is not None:
        raise TierDamagedError(f"{damage}; rebuild the tier with --force (force=True)")
    return record
