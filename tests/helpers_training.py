"""A short training run of the shipped tiny tier, shared by the tests that train or parse a plan.

:data:`TINY_PLAN` is the base plan (as a TOML table); :func:`tiny_plan` renders it with a test's
changes, :func:`train_tiny` runs one arm of it with :func:`gradprobe.training.run.run_training`,
and :func:`metric_lines` reads the run's ``metrics.jsonl`` back.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import tomlkit

#: The shipped tiny tier (``[model] name = "tiny"``) on its frontier task, chain_sum with 3-4 one-digit
#: terms from a pool of 8 problems: one update of B x G = 2 prompts x 4 completions of at most 40 tokens
#: (lr 1e-4, one micro-batch of 8 rows), 4 held-out prompts, arm ``grpo`` with the outcome reward.
TINY_PLAN: dict = {
    "seeds": [0],
    "model": {"name": "tiny"},
    "task": {"name": "chain_sum", "pool": 8,
             "config": {"min_terms": 3, "max_terms": 4, "min_digits": 1, "max_digits": 1}},
    "heldout": {"prompts": 4},
    "sampling": {"max_new_tokens": 40},
    "train": {"prompts_per_update": 2, "group": 4, "lr": 1e-4, "micro_batch_size": 8},
    "budget": {"updates": 1},
}


def _merge(base: dict, change: dict, where: str) -> None:
    """Merge ``change`` into ``base`` in place: tables merge key by key, a ``None`` value drops the key,
    any other value replaces. Raises TypeError when a table is given for a scalar key or the reverse."""
    for key, value in change.items():
        if value is None:
            base.pop(key, None)
        elif isinstance(value, dict):
            if not isinstance(base.setdefault(key, {}), dict):
                raise TypeError(f"{where}{key} is a value in TINY_PLAN, not a table; pass a value, not {value!r}")
            _merge(base[key], value, f"{where}{key}.")
        elif isinstance(base.get(key), dict):
            raise TypeError(f"{where}{key} is a table in TINY_PLAN; pass a dict of its keys, not {value!r}")
        else:
            base[key] = value


def tiny_plan(*, arm: str = "grpo", reward: str = "outcome", budget: dict | None = None, arms: dict | None = None,
              **changes) -> str:
    """TOML text of :data:`TINY_PLAN` with one arm, ``[arms.<arm>] reward = "<reward>"``.

    ``arms`` (when given) replaces that one arm with these ``[arms]`` tables whole
    (``{"grpo": {"reward": "outcome"}, "guided": {"reward": "outcome", "guidance": {...}}}``);
    ``arm`` and ``reward`` are then unused.

    ``budget`` replaces the ``[budget]`` table whole (its kinds are alternatives; default
    ``{"updates": 1}``). Every other keyword is a top-level key of the plan (``name="x"``) or a table
    merged into TINY_PLAN's (``train={"lr": 1e-3, "checkpoint_every": 2}``, ``eval={"at_updates": [2]}``):
    nested tables merge key by key and a ``None`` value drops the key (``train={"lr": None}``: the
    plan's default lr). The text is not validated here; :func:`gradprobe.training.plan.parse_plan` does
    that (PlanError naming the field). Raises TypeError when a table is given for a value or the reverse.
    """
    plan = copy.deepcopy(TINY_PLAN)
    _merge(plan, changes, "")
    if budget is not None:
        plan["budget"] = dict(budget)
    plan["arms"] = copy.deepcopy(arms) if arms is not None else {arm: {"reward": reward}}
    return tomlkit.dumps(plan)


def train_tiny(out: Path, *, arm: str = "grpo", policy=None, **plan_changes) -> dict:
    """Run arm ``arm`` (seed 0) of ``tiny_plan(arm=arm, **plan_changes)`` into the folder ``out`` with
    :func:`gradprobe.training.run.run_training` and return its summary (``summary.json``'s content).
    ``policy``: an already loaded policy of the tiny tier to train in place (None: loaded from the plan).
    Raises what ``parse_plan`` (PlanError) and ``run_training`` raise."""
    from gradprobe.training.plan import parse_plan
    from gradprobe.training.run import run_training

    run = parse_plan(tiny_plan(arm=arm, **plan_changes)).arm(arm)
    return run_training(run, out, policy=policy)


def metric_lines(run: Path) -> list[dict]:
    """The JSON lines of ``run/metrics.jsonl`` in order: one per update and one per evaluation
    (``"eval"`` set). Raises FileNotFoundError when the run folder has no metrics.jsonl."""
    return [json.loads(x) for x in (Path(run) / "metrics.jsonl").read_text().splitlines()]


class Killed(Exception):
    """Stands for a SIGKILL after the checkpoint of update 1 (:func:`killed_run`)."""


def killed_run(out: Path, reward: str = "outcome", task: dict | None = None, *, model: str | None = None):
    """Arm ``grpo`` of the tiny plan (2 updates, a checkpoint after each) with ``reward`` (and ``[task]`` ``task``,
    ``[model] name = model``, when given), trained into ``out`` and stopped after update 1's checkpoint (a kill,
    :class:`Killed`); returns the run's config, to resume it."""
    import pytest

    from gradprobe.training.plan import parse_plan
    from gradprobe.training.run import run_training

    given = {"task": task} if task is not None else {}
    if model is not None:
        given["model"] = {"name": model}
    run = parse_plan(tiny_plan(reward=reward, budget={"updates": 2}, train={"checkpoint_every": 1},
                               eval={"sampled": False}, **given)).arm("grpo")

    def kill(update):
        if update == 1:
            raise Killed

    with pytest.raises(Killed):
        run_training(run, out, after_update=kill)
    assert json.loads((out / "checkpoint.json").read_text())["update"] == 1
    return run


def refused_before_loading(run, out: Path, error) -> str:
    """The message of the ``error`` that ``run_training(run, out)`` raises, checked to come before the policy is
    loaded (``gradprobe.training.run._open_session`` fails the test if it is reached)."""
    import pytest

    from gradprobe.training import run as run_module

    with pytest.MonkeyPatch.context() as m:
        m.setattr(run_module, "_open_session", lambda *a, **k: pytest.fail("the policy was loaded before the refusal"))
        with pytest.raises(error) as e:
            run_module.run_training(run, out)
    return str(e.value)


def folder_files(out: Path) -> dict[str, bytes]:
    """The files directly in ``out``, name -> bytes (to check that a refusal wrote nothing)."""
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
