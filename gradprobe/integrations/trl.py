"""gradprobe inside a researcher's own TRL ``GRPOTrainer``: a compute ledger and a periodic probe.

>>> trainer = GRPOTrainer(model=model, reward_funcs=[correct], args=GRPOConfig(...), train_dataset=ds)  # doctest: +SKIP
>>> cb = GradprobeCallback(task="gsm8k", probe_every=50, out="runs/my-grpo/gradprobe").attach(trainer)  # doctest: +SKIP
>>> trainer.train()                                                                                # doctest: +SKIP
>>> cb.ledger.generated_tokens                                                                     # doctest: +SKIP
{'rollout': 1843200, 'continuation': 0, 'selection': 0, 'eval': 0}

What it records (DESIGN.md, "The compute ledger"), in :attr:`GradprobeCallback.ledger` and, with
``out``, ``ledger.jsonl`` (one line per logged window) and ``ledger.json`` (totals):

- ``rollout``: the completion tokens the trainer generated, read from the trainer's own logs
  (``on_log``): ``completions/mean_length`` (TRL: the mean over the window's generation batches of
  each batch's mean completion length, padding and tool tokens excluded) times the completions of
  the window, ``generation_batch_size`` x generation batches. A generation batch is drawn on
  micro-step m when m % (``steps_per_generation`` x ``num_iterations``) == 0 (TRL 1.16,
  ``GRPOTrainer._prepare_inputs``), so the window of optimizer steps (s0, s1] holds
  ceil(s1 GA / k) - ceil(s0 GA / k) of them (GA gradient-accumulation steps, k that period). Exact
  while a batch's completion tokens stay below 2^24 (TRL averages in float32). The prompt tokens,
  ``state.num_input_tokens_seen`` (prompt + completion) minus these, are recorded beside them.
  Evaluation logs (``eval_`` keys) are not read.
- what reward functions generate themselves (MC continuations, a judge model's tokens), by the
  *generated-tokens protocol*: a reward function (function or callable object) may expose
  ``generated_tokens``, an attribute or a zero-argument method, holding its **cumulative** count
  since it was created: an ``int`` (charged to ``continuation``) or a mapping
  ``{ledger category: int}`` (categories :data:`gradprobe.ledger.CATEGORIES`). The callback reads it
  after every optimizer step and charges the increase. Cumulative counts make reading idempotent
  and need no reset::

      class JudgeReward:
          def __init__(self):
              self.generated_tokens = {"continuation": 0}
          def __call__(self, prompts, completions, **kwargs):
              ...                                   # sample n judge tokens
              self.generated_tokens["continuation"] += n
              return scores

Every ``probe_every`` optimizer steps it runs the probe (:func:`gradprobe.probe.run.run_probe`) on
the trainer's current model: a fresh batch of ``prompts`` x ``num_generations`` rollouts of the
gradprobe task ``task`` (whose verifier also scores the held-out reference), the registered
rewards ``rewards`` and, with ``trainer_rewards=True``, the trainer's own reward functions wrapped
by :func:`gradprobe.rewards.sequence.sequence_reward` (TRL signature; they receive the columns of
:func:`gradprobe.rewards.sequence.trl_columns`); what they generate during the probe (their
``generated_tokens``) counts in the probe's tokens per update, not in the run's ledger. The update
it predicts is the trainer's: its loss type (:data:`gradprobe.integrations.trl_config.LOSS_TYPES`),
G, ``max_completion_length``,
temperature, top_p and the scheduler's current learning rate. The probe's figures are logged through
``trainer.log`` and so reach every ``report_to`` backend: the callback asks for a log at the probe
step (``control.should_log``), so TRL's own metrics of that step are written first, and logs the
figures at the next step's start (or at the end of training), when TRL's metric buffer is empty
(``GRPOTrainer.log`` merges and clears that buffer on every call). Keys: ``gradprobe/<reward>/``
``inner_product``, ``gain_per_update`` (accuracy points), ``tokens_per_update``, ``snr`` (a reward without a
gradient on the batch: ``no_signal`` 1 and ``tokens_per_update`` only);
``gradprobe/heldout_accuracy``; ``gradprobe/tokens/<category>`` (ledger totals).

Every probe step draws the same prompts (the task's ``prompts`` training and ``heldout_prompts`` held-out ones, by
the trainer's ``seed``); that each fits the model's context with ``max_completion_length`` is checked at the first
probe step, before its rollouts, and again only when what that check reads changes
(:class:`gradprobe.probe.run.PromptCheck`).

The probe leaves training untouched: it restores the model's train/eval mode, its attention
implementation, the tokenizer's padding side and every random generator (torch CPU and CUDA,
``random``, numpy), and runs after the optimizer step, when gradients are already cleared. With
``beta`` != 0, the predicted update omits TRL's KL gradient, which is zero only at the reference
(initial) policy (:mod:`gradprobe.integrations.trl_config`); the probe's record says so.

The token counting lives in :mod:`gradprobe.integrations.trl_tokens` (:func:`reward_generated_tokens`
and :func:`generations_between`, re-exported here), what keeps the probe from touching training in
:mod:`gradprobe.integrations.trl_isolation`; this module wires them into the trainer's events.
"""

from __future__ import annotations

import math
import numbers
import time
import warnings
from pathlib import Path

import torch
from transformers import TrainerCallback

from ..attention import register as register_attention
from ..config import SamplingConfig
from ..ledger import CATEGORIES, Ledger
from ..models import Policy, _prepare_tokenizer, use_attention
from ..outputs import json_safe, write_json_atomic
from ..probe.guided import check_guided_task
from ..probe.run import ProbeConfig, PromptCheck, rewards_to_probe, run_probe
from ..rewards.sequence import sequence_reward
from ..rollout import check_backend
from ..tasks import load_task
from .trl_config import LOSS_TYPES
from .trl_isolation import rng_state, set_rng_state, without_checkpointing
from .trl_tokens import append_jsonl_line, counting, generations_between, reward_generated_tokens

__all__ = ["GradprobeCallback", "reward_generated_tokens", "generations_between"]

#: Stand-ins, at construction, for settings the trainer gives the probe (read from it at :meth:`attach`): the
#: device is the trainer's model's, unknown before, so a ``dtype`` option is not refused for the CPU default then.
_TRAINER_STAND_INS = {"device": "cuda"}
#: What a trainer needs for :meth:`GradprobeCallback.attach` (those of a ``trl.GRPOTrainer`` the callback reads first).
_TRAINER_ATTRIBUTES = ("add_callback", "callback_handler", "reward_funcs", "args", "model", "accelerator")


def _refusal(e: Exception, where: str) -> Exception:
    """``e`` with its message opened by ``where`` (the argument refused), of the same class where that class takes
    one message (a caller's ``except UnknownRewardError`` still matches), else a ValueError."""
    try:
        return type(e)(f"{where}: {e}")
    except Exception:  # noqa: BLE001 - a class that takes other arguments
        return ValueError(f"{where}: {e}")


class GradprobeCallback(TrainerCallback):
    """A ``transformers.TrainerCallback`` for TRL's ``GRPOTrainer``: ledger + probe every N steps.

    Parameters
    ----------
    task : str or gradprobe.tasks.Task, optional
        The probe's prompts and verifier (:func:`gradprobe.tasks.load_task` spec, e.g. ``"gsm8k"``
        or ``"jsonl:data.jsonl"``). Required when ``probe_every`` > 0.
    probe_every : int
        Probe after every ``probe_every``-th optimizer step (0: ledger only).
    rewards : tuple[str, ...] or str
        Registered gradprobe rewards to probe (:data:`gradprobe.rewards.REWARDS`), or one string of names joined by
        commas as ``--rewards`` takes them (``"outcome,mc_value"``).
    trainer_rewards : bool
        Also probe the trainer's own (callable, not model) reward functions, each under its TRL name.
    prompts : int
        B of the probe batch; G is the trainer's ``num_generations``.
    heldout_prompts, heldout_group : int
        The held-out reference (RLOO gradient of the task's accuracy).
    precondition : {"adam", "none"}
        As :class:`gradprobe.probe.run.ProbeConfig` (Adam: second moment estimated on the probe batch).
    out : path, optional
        Folder for ``ledger.jsonl``, ``ledger.json`` and ``probe_step_<k>/`` (each probe's files).
    on_error : {"raise", "warn"}
        What a failing probe does: stop training, or warn and record the error (training goes on).
    **probe_options
        Other flat :class:`~gradprobe.probe.run.ProbeConfig` settings (``n_bootstrap``, ``micro_batch_size``...;
        :meth:`~gradprobe.probe.run.ProbeConfig.from_dict`).

    Attributes
    ----------
    ledger : gradprobe.ledger.Ledger
        Generated tokens of the run by category (tokens), probe device-seconds under ``probe``.
    windows : list[dict]
        Per logged window: ``step``, ``steps`` (optimizer steps it covers), ``generations``,
        ``completions``, ``rollout_tokens``, ``prompt_tokens``, ``reward_tokens`` ({category: tokens}).
    probes : list[dict]
        Per probe: ``step``, ``logged`` (the figures sent to ``trainer.log``) and ``result`` (the
        probe's ``probe.json`` content) or ``error``.

    Raises
    ------
    ValueError
        (constructor) ``probe_every`` < 0, ``probe_every`` > 0 without a ``task``, an unknown
        ``on_error``; with ``probe_every`` > 0, what the probe itself refuses before any compute and
        needs no model for, each message opened by ``GradprobeCallback(ARGUMENT)``: an unknown task
        or task option (:func:`gradprobe.tasks.load_task`, ``TaskNotFoundError`` /
        ``TaskConfigError``), an unknown reward (``UnknownRewardError``; a plug-in's file is imported
        now) or one named twice, no reward at all, an unknown probe option or a bad value
        (:meth:`ProbeConfig.from_dict`), guidance with a task without reference solutions;
        (:meth:`attach`, ``on_train_begin``) the trainer's settings the probe cannot take (its
        ``loss_type``, ``num_generations`` < 2...); (during training) a reward's ``generated_tokens``
        that breaks the protocol, or a count that went down.
    TypeError
        (constructor) ``task`` neither a spec string nor a task object; (:meth:`attach`) ``trainer`` is
        not a trainer (e.g. None).
    FileNotFoundError
        (constructor) a task spec naming a missing file (``gsm8k:PATH``).
    ImportError
        (constructor) ``backend="vllm"`` where vLLM is not installed (``VLLMUnavailableError``).
    RuntimeError
        (during training) the callback was not attached (:meth:`attach`).
    """

    def __init__(self, *, task=None, probe_every: int = 0, rewards: tuple[str, ...] = ("outcome",),
                 trainer_rewards: bool = False, prompts: int = 8, heldout_prompts: int = 8, heldout_group: int = 8,
                 precondition: str = "adam", out: str | Path | None = None, on_error: str = "raise",
                 **probe_options):
        if isinstance(probe_every, bool) or not isinstance(probe_every, numbers.Integral) or probe_every < 0:
            raise ValueError(f"probe_every must be an int >= 0 (0 = ledger only), got {probe_every!r}")
        probe_every = int(probe_every)  # numpy's integers too
        if isinstance(rewards, str):  # as --rewards takes them; tuple("outcome") would be its letters
            rewards = tuple(r.strip() for r in rewards.split(","))
        if probe_every and task is None:
            raise ValueError("probe_every > 0 needs task=: the probe's prompts and verifier, e.g. task='gsm8k'")
        if on_error not in ("raise", "warn"):
            raise ValueError(f"on_error must be 'raise' or 'warn', got {on_error!r}")
        self.task, self.probe_every, self.rewards = task, probe_every, tuple(rewards)
        self.trainer_rewards, self.prompts = trainer_rewards, prompts
        self.heldout_prompts, self.heldout_group, self.precondition = heldout_prompts, heldout_group, precondition
        self.out = Path(out) if out is not None else None
        self.on_error, self.probe_options = on_error, dict(probe_options)
        self.trainer = None
        self.ledger = Ledger()
        self.windows: list[dict] = []
        self.probes: list[dict] = []
        self._last_logged_step = 0
        self._last_tokens_seen = 0
        self._reward_seen: dict[int, dict[str, int]] = {}
        self._pending_reward_tokens = {c: 0 for c in CATEGORIES}
        self._pending_logs: dict | None = None
        self._task_obj = self._checked_task() if probe_every else None
        # every probe step draws the same prompts (the task, counts and the trainer's seed): their lengths are
        # checked at the first and again only when what the check reads changed (run_probe's prompt_check)
        self._prompt_check = PromptCheck()

    # ---- checks before training ----------------------------------------------------------------
    def _task_name(self) -> str:
        return self.task if isinstance(self.task, str) else (getattr(self.task, "name", None) or "task")

    def _checked_task(self):
        """The probe's task, loaded, after the checks :func:`gradprobe.probe.run.run_probe` makes before any compute
        that need no model (the settings, the rewards, the backend, guidance's task): a bad argument is refused at
        construction, naming it, not at the first probe step after ``probe_every`` steps of training."""
        settings = dict(_TRAINER_STAND_INS, task=self._task_name(), rewards=self.rewards, prompts=self.prompts,
                        heldout_prompts=self.heldout_prompts, heldout_group=self.heldout_group,
                        precondition=self.precondition, **self.probe_options)
        try:
            config = ProbeConfig.from_dict(settings)
            check_backend(config.sampling.backend)  # vllm where it is not installed
        except (ValueError, TypeError, ImportError) as e:
            raise _refusal(e, "GradprobeCallback(probe settings)") from e
        try:
            if self.rewards or not self.trainer_rewards:  # the trainer's own are checked at attach
                rewards_to_probe(config, None)
        except (ValueError, TypeError) as e:
            raise _refusal(e, f"GradprobeCallback(rewards={self.rewards!r})") from e
        task = self.task
        if not isinstance(task, str) and not callable(getattr(task, "problems", None)):
            raise TypeError(f"GradprobeCallback(task={task!r}): task must be a task spec (a str, e.g. 'gsm8k' or "
                            f"'jsonl:data.jsonl') or a gradprobe.tasks.Task, got {type(task).__name__}")
        try:
            if isinstance(task, str):  # the data is read when the probe draws prompts, not now
                task = load_task(task, **({"skip_malformed": True} if config.task.skip_malformed else {}))
            check_guided_task(config, task)
        except (ValueError, TypeError, OSError) as e:
            raise _refusal(e, f"GradprobeCallback(task={self.task!r})") from e
        return task

    def _check_trainer(self, trainer, where: str) -> None:
        """The probe's settings with the trainer's (:meth:`_probe_config`) and its own rewards, checked before
        training: a loss type without a probe equivalent, a group below 2... Raises ValueError naming them, opened
        by ``where`` (the call that checks)."""
        if not self.probe_every:
            return
        try:
            config, _ = self._probe_config(trainer.args, trainer)
            if self.trainer_rewards:
                rewards_to_probe(config, self._trainer_rewards(trainer, trainer.args))
        except (ValueError, TypeError) as e:
            raise _refusal(e, f"{where}: the trainer's settings") from e

    # ---- wiring -------------------------------------------------------------------------------
    def attach(self, trainer) -> "GradprobeCallback":
        """Bind to ``trainer`` (a ``trl.GRPOTrainer``) and add this callback to it; returns self.

        Raises
        ------
        TypeError
            ``trainer`` is no trainer (None, a config...): ``GradprobeCallback.attach(trainer): trainer must be
            a trl GRPOTrainer ...``.
        ValueError
            With ``probe_every`` > 0, trainer settings the probe cannot take (its ``loss_type``...), named.
        """
        if trainer is None or not all(hasattr(trainer, a) for a in _TRAINER_ATTRIBUTES):
            raise TypeError(f"GradprobeCallback.attach(trainer): trainer must be a trl GRPOTrainer (the trainer whose "
                            f"run is probed), got {'None' if trainer is None else type(trainer).__name__}; build the "
                            "trainer first, then callback.attach(trainer)")
        self._check_trainer(trainer, "GradprobeCallback.attach(trainer)")
        self.trainer = trainer
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        return self

    def _need_trainer(self):
        if self.trainer is None:
            raise RuntimeError("GradprobeCallback needs its trainer: call callback.attach(trainer) before train()")
        return self.trainer

    # ---- ledger ---------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, **kwargs):
        self._check_trainer(self._need_trainer(), "GradprobeCallback at train begin")  # args changed since attach
        self._last_logged_step = state.global_step
        self._last_tokens_seen = int(state.num_input_tokens_seen)
        for i, fn in enumerate(self.trainer.reward_funcs):  # counts from before training are not this run's
            self._reward_seen[i] = reward_generated_tokens(fn)

    def _read_reward_tokens(self) -> None:
        for i, fn in enumerate(self._need_trainer().reward_funcs):
            now = reward_generated_tokens(fn)
            before = self._reward_seen.get(i, {})
            for category, n in now.items():
                delta = n - before.get(category, 0)
                if delta < 0:
                    raise ValueError(f"reward {getattr(fn, '__name__', type(fn).__name__)!r}: generated_tokens"
                                     f"[{category!r}] went down ({before.get(category, 0)} -> {n}); it must be "
                                     "cumulative")
                self.ledger.add_generated(category, delta)
                self._pending_reward_tokens[category] += delta
            self._reward_seen[i] = now

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or logs.get("completions/mean_length") is None:  # eval logs, our own figures
            return
        trainer = self._need_trainer()
        gens = generations_between(self._last_logged_step, state.global_step,
                                   gradient_accumulation_steps=args.gradient_accumulation_steps,
                                   steps_per_generation=args.steps_per_generation,
                                   num_iterations=trainer.num_iterations)
        completions = gens * args.generation_batch_size
        tokens = int(round(float(logs["completions/mean_length"]) * completions))
        seen = int(state.num_input_tokens_seen)
        self.ledger.add_generated("rollout", tokens)
        window = {"step": state.global_step, "steps": state.global_step - self._last_logged_step,
                  "generations": gens, "completions": completions, "rollout_tokens": tokens,
                  "prompt_tokens": seen - self._last_tokens_seen - tokens,
                  "reward_tokens": {c: n for c, n in self._pending_reward_tokens.items() if n}}
        self.windows.append(window)
        self._pending_reward_tokens = {c: 0 for c in CATEGORIES}
        self._last_logged_step, self._last_tokens_seen = state.global_step, seen
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
            append_jsonl_line(self.out / "ledger.jsonl", window)  # one whole line per window, flushed
            write_json_atomic(self.out / "ledger.json", json_safe(self.ledger.to_dict()))

    # ---- probe ----------------------------------------------------------------------------------
    def on_step_end(self, args, state, control, **kwargs):
        self._read_reward_tokens()
        if self.probe_every and state.global_step % self.probe_every == 0:
            self._probe(args, state)
            control.should_log = True  # TRL's metrics of this step are written before our figures
        return control

    def on_step_begin(self, args, state, control, **kwargs):
        self._flush_logs()

    def on_train_end(self, args, state, control, **kwargs):
        self._read_reward_tokens()
        self._flush_logs()
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.out / "ledger.json", json_safe(self.ledger.to_dict()))

    def _flush_logs(self) -> None:
        if self._pending_logs:
            logs, self._pending_logs = self._pending_logs, None
            for category, n in self.ledger.generated_tokens.items():  # totals including the probe step's log
                logs[f"gradprobe/tokens/{category}"] = float(n)
            self._need_trainer().log(logs)

    def _probe_config(self, args, trainer):
        loss_type = LOSS_TYPES.get(args.loss_type)
        if loss_type is None:
            raise ValueError(f"the trainer's loss_type {args.loss_type!r} has no probe equivalent "
                             f"(supported: {', '.join(LOSS_TYPES)})")
        lr = args.learning_rate
        if trainer.lr_scheduler is not None and trainer.lr_scheduler.get_last_lr():
            lr = float(trainer.lr_scheduler.get_last_lr()[0]) or args.learning_rate  # 0 during warm-up's first step
        model = trainer.accelerator.unwrap_model(trainer.model)
        dtype = {torch.float64: "float64", torch.bfloat16: "bfloat16", torch.float16: "float16"}.get(
            next(model.parameters()).dtype, "float32")
        options = dict(model=f"trainer:{getattr(model, 'name_or_path', '') or type(model).__name__}",
                       task=self._task_name(),
                       rewards=self.rewards, prompts=self.prompts, group=args.num_generations,
                       heldout_prompts=self.heldout_prompts, heldout_group=self.heldout_group,
                       precondition=self.precondition, lr=lr, loss_type=loss_type,
                       sampling=SamplingConfig(temperature=args.temperature, top_p=args.top_p,
                                               max_new_tokens=args.max_completion_length),
                       seed=args.seed, device=str(next(model.parameters()).device), dtype=dtype, progress=False)
        options.update(self.probe_options)
        return ProbeConfig.from_dict(options), model

    @staticmethod
    def _trainer_rewards(trainer, args) -> dict:
        """The trainer's own (callable, not model) reward functions, wrapped for the probe under their TRL names."""
        extra = {}
        for fn, name in zip(trainer.reward_funcs, trainer.reward_func_names):
            if isinstance(fn, torch.nn.Module):
                continue  # reward models score texts with their own tokenizer; not wrapped
            extra[name] = counting(sequence_reward(fn, name=name, scale=args.scale_rewards), fn)
        return extra

    def _probe(self, args, state) -> None:
        trainer = self._need_trainer()
        step = state.global_step
        t0 = time.perf_counter()
        record: dict = {"step": step}
        try:
            config, model = self._probe_config(args, trainer)
            extra = self._trainer_rewards(trainer, args) if self.trainer_rewards else {}
            tokenizer = trainer.processing_class
            tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor's tokenizer
            padding_side, was_training = tokenizer.padding_side, model.training
            rng = rng_state()
            try:
                eos = _prepare_tokenizer(tokenizer, model)
                policy = Policy(model=model, tokenizer=tokenizer, name=config.model, eos_token_ids=eos)
                model.eval()
                with without_checkpointing(model, args.gradient_checkpointing_kwargs), \
                        use_attention(model, register_attention()):
                    out = None if self.out is None else self.out / f"probe_step_{step}"
                    result = run_probe(config, out=out, policy=policy, task=self._task_obj, extra_rewards=extra,
                                       prompt_check=self._prompt_check)
            finally:
                model.train(was_training)
                tokenizer.padding_side = padding_side
                set_rng_state(rng)
                # what the trainer's rewards generated for the probe is the probe's cost (in its own
                # ledger, via _counting), not the training run's
                self._reward_seen = {i: reward_generated_tokens(fn) for i, fn in enumerate(trainer.reward_funcs)}
            if args.beta:
                result.setdefault("warnings", []).append(
                    f"beta {args.beta:g}: the predicted update omits TRL's KL gradient, exact only at the reference "
                    "(initial) policy")
            record["result"] = json_safe(result)
            record["logged"] = self._figures(result)  # ledger totals are added when logged (_flush_logs)
            self._pending_logs = dict(record["logged"])
        except Exception as e:  # noqa: BLE001 - on_error="warn" must keep training going whatever failed
            if self.on_error == "raise":
                raise
            record["error"] = f"{type(e).__name__}: {e}"
            warnings.warn(f"gradprobe probe at step {step} failed (training goes on): {record['error']}")
        finally:
            self.ledger.add_seconds("probe", time.perf_counter() - t0)
        self.probes.append(record)

    def _figures(self, result: dict) -> dict[str, float]:
        """The scalars sent to ``trainer.log`` (finite numbers only: some backends reject NaN/None). A reward that
        gives no gradient on the batch (``no_signal``: equal rewards in every group, or None/NaN for every
        completion) logs ``no_signal`` 1 and its tokens per update, not an inner product, gain and SNR of 0, which
        a dashboard would show as a measured zero."""
        logs = {}
        for r in result["rewards"]:
            keys = (("inner_product", "inner_product"), ("predicted_gain_per_update", "gain_per_update"),
                    ("tokens_per_update", "tokens_per_update"), ("snr", "snr"))
            if r.get("no_signal"):
                keys = (("tokens_per_update", "tokens_per_update"),)
                logs[f"gradprobe/{r['name']}/no_signal"] = 1.0
            for key, name in keys:
                value = r.get(key)
                if isinstance(value, (int, float)) and math.isfinite(value):
                    logs[f"gradprobe/{r['name']}/{name}"] = float(value)
        acc = result.get("reference", {}).get("heldout_accuracy")
        if isinstance(acc, float) and math.isfinite(acc):
            logs["gradprobe/heldout_accuracy"] = acc
        return logs
