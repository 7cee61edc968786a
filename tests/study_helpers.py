"""Hand-made study folders for the analysis and power tests (no training): a plan, runs.csv and
per-item eval results consistent with each other (every accuracy is the mean of its item string).

Three arms, 8 seeds, 40 held-out items. Per update mc_value is best; at equal tokens it is worst.

grpo       updates 0/2/5/10,  tokens 0/200/500/1010+s, seconds 0/2/5/10+s, flops 0/2e9/5e9/1.01e10+1e7 s
           correct items 8 / 11 / 12 + s%2 / 16 + s%3
mc_value   updates 0/1/2,     tokens 0/500/1020,       seconds 0/8/16,      flops 0/5e9/1.02e10
           correct items 8 / 11 / 14 + s%2
grpo_2xlr  as grpo, correct items 8 / 11 / 13 + s%2 / 17 + s%3 + (s == 2)

Item i of seed s is correct at an eval with k correct items iff its rank in
``default_rng(100 + s).permutation(40)`` is < k (nested sets: a run's later evals keep its items).
"""

from __future__ import annotations

import csv
import gzip
import json
import shutil
from pathlib import Path

import numpy as np

ITEMS = 40
SEEDS = 8


def plan_head(name: str, seeds="SEEDS", *, train: str = "") -> str:
    """The head every hand-made plan shares: ``name``, ``seeds`` (a list, or the placeholder ``SEEDS`` that
    :func:`make_study` fills), the random tiny-qwen2 on chain sums (a pool of 16 prompts) and 2 prompts x 4
    completions per update; ``train``: more ``[train]`` lines. The caller adds ``[budget]``, ``[eval]``, arms."""
    return (f'\nname = "{name}"\nseeds = {seeds}\n[model]\nname = "tiny-qwen2"\n[task]\nname = "chain_sum"\n'
            f"pool = 16\n[train]\nprompts_per_update = 2\ngroup = 4\n{train}")


PLAN = plan_head("handmade") + """[budget]
generated_tokens = 1000
flops = 1e10
[eval]
every_tokens = 500
at_updates = [2, 5]
[arms.grpo]
reward = "outcome"
[arms.mc_value]
reward = "mc_value"
[arms.grpo_2xlr]
reward = "outcome"
lr_scale = 2.0

[[hypotheses]]
name = "grpo_learns"
statement = "GRPO gains at least 4 points over the initial policy"
test = "sign_flip"
arms = ["grpo", "initial"]
min_effect = 4.0

[[hypotheses]]
name = "dense_not_worth_tokens"
statement = "GRPO beats mc_value at equal tokens"
test = "paired_bootstrap"
arms = ["grpo", "mc_value"]

[[hypotheses]]
name = "dense_better"
statement = "mc_value beats GRPO at equal tokens (false here)"
test = "sign_flip"
arms = ["mc_value", "grpo"]

[[hypotheses]]
name = "double_lr"
statement = "2x lr differs from GRPO"
test = "sign_flip"
arms = ["grpo_2xlr", "grpo"]
alternative = "two-sided"

[[hypotheses]]
name = "per_update"
statement = "per update, mc_value beats GRPO"
test = "sign_flip"
arms = ["mc_value", "grpo"]
at = "updates"
budget = 2

[[hypotheses]]
name = "at_flops"
statement = "GRPO beats mc_value at equal FLOPs"
test = "sign_flip"
arms = ["grpo", "mc_value"]
at = "flops"
"""


def evals(arm: str, s: int) -> list[dict]:
    """The eval points of one run: update, generated_tokens, device_seconds, flops, correct-item count."""
    if arm == "mc_value":
        pts = [(0, 0, 0.0, 0.0, 8), (1, 500, 8.0, 5e9, 11), (2, 1020, 16.0, 1.02e10, 14 + s % 2)]
    else:
        extra = 1 if arm == "grpo_2xlr" else 0
        pts = [(0, 0, 0.0, 0.0, 8), (2, 200, 2.0, 2e9, 11), (5, 500, 5.0, 5e9, 12 + s % 2 + extra),
               (10, 1010 + s, 10.0 + s, 1.01e10 + 1e7 * s, 16 + s % 3 + extra + (1 if extra and s == 2 else 0))]
    return [dict(zip(("update", "generated_tokens", "device_seconds", "flops", "k"), p)) for p in pts]


def item_string(s: int, k: int) -> str:
    rank = np.empty(ITEMS, dtype=int)
    rank[np.random.default_rng(100 + s).permutation(ITEMS)] = np.arange(ITEMS)
    return "".join("1" if r < k else "0" for r in rank)


def make_study(root: Path, *, seeds: int = SEEDS, items: bool = True, side_effects: bool = True,
               flops: bool = True, finished: bool = True, plan: str | None = None) -> Path:
    """Write plan.toml, runs.csv, study.json and (``items``) runs/ARM/seedS/eval_items.jsonl."""
    root.mkdir(parents=True, exist_ok=True)
    text = (plan or PLAN).replace("seeds = SEEDS", f"seeds = {list(range(seeds))}")
    (root / "plan.toml").write_text(text)
    cols = ["arm", "seed", "update", "generated_tokens", "device_seconds", "accuracy", "accuracy_sampled", "reward",
            "lr_scale"] + (["flops"] if flops else []) + (["response_length", "format_rate", "kl_init"]
                                                          if side_effects else [])
    runs = []
    with open(root / "runs.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for arm, reward, lr in (("grpo", "outcome", 1.0), ("mc_value", "mc_value", 1.0), ("grpo_2xlr", "outcome", 2.0)):
            for s in range(seeds):
                lines = []
                for e in evals(arm, s):
                    row = {"arm": arm, "seed": s, "update": e["update"], "generated_tokens": e["generated_tokens"],
                           "device_seconds": e["device_seconds"], "accuracy": e["k"] / ITEMS, "accuracy_sampled": "",
                           "reward": reward, "lr_scale": lr, "flops": e["flops"],
                           "response_length": 10.0 + e["update"], "format_rate": 1.0 - 0.01 * e["update"],
                           "kl_init": "" if e["update"] == 0 else 0.01 * e["update"]}
                    w.writerow([row[c] for c in cols])
                    lines.append({k: e[k] for k in ("update", "generated_tokens", "flops", "device_seconds")}
                                 | {"greedy": item_string(s, e["k"]), "sampled": []})
                runs.append({"arm": arm, "seed": s, "dir": f"runs/{arm}/seed{s}", "status": "done", "seconds": 60.0})
                if items:
                    d = root / "runs" / arm / f"seed{s}"
                    d.mkdir(parents=True, exist_ok=True)
                    (d / "eval_items.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (root / "study.json").write_text(json.dumps({"plan_sha256": "x", "runs": runs,
                                                 "finished": "2026-12-01T00:00:00+00:00" if finished else None}))
    return root


def aggregate_items(root: Path) -> None:
    """Write STUDY/eval_items.jsonl.gz from the run folders (as the runner does) and remove them."""
    lines = []
    for path in sorted(root.glob("runs/*/seed*/eval_items.jsonl")):
        arm, seed = path.parent.parent.name, int(path.parent.name[4:])
        lines += [json.dumps({"arm": arm, "seed": seed, **json.loads(x)}) for x in path.read_text().splitlines()]
        path.unlink()
    (root / "eval_items.jsonl.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))


# ----------------------------------------------------------------------------- toy plans that really train

def toy_plan(name: str = "toy", *, seeds=(0, 1, 2), generated_tokens: int = 700, every_tokens: int = 250,
             checkpoint_every: int | None = 2, arms: str = '[arms.grpo]\nreward = "outcome"\n') -> str:
    """A plan of runs that really train: the random tiny-qwen2 on 4-term chain sums, 2 prompts x 4
    completions per update, 16 new tokens, a few hundred generated tokens (seconds per run on one
    thread). ``arms`` is the TOML of the ``[arms.*]`` tables."""
    ckpt = f"checkpoint_every = {checkpoint_every}\n" if checkpoint_every is not None else ""
    return (f'name = "{name}"\nseeds = {list(seeds)}\n[model]\nname = "tiny-qwen2"\n[task]\nname = "chain_sum"\n'
            f"pool = 16\n[heldout]\nprompts = 4\n[sampling]\nmax_new_tokens = 16\n[train]\nprompts_per_update = 2\n"
            f"group = 4\nlr = 1e-3\nmicro_batch_size = 8\n{ckpt}[budget]\ngenerated_tokens = {generated_tokens}\n"
            f"[eval]\nevery_tokens = {every_tokens}\nsampled = false\n{arms}")


def write_plan(tmp_path: Path, text: str, name: str = "plan.toml") -> Path:
    """``text`` written to ``tmp_path/name``; returns the path."""
    p = Path(tmp_path) / name
    p.write_text(text)
    return p


def shipped_copy(name: str, dest: Path) -> Path:
    """A copy of the shipped study ``data/NAME`` at ``dest`` without its figures and per-item results (the tables,
    analysis, plan and probe a damage test edits); returns ``dest``."""
    src = Path(__file__).resolve().parents[1] / "data" / name
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("figures", "eval_items.jsonl.gz"))
    return dest


def set_runs_cells(study: Path, cells: dict) -> None:
    """Set cells of ``study/runs.csv`` in place, the file's other bytes kept (a hand edit, not a pandas re-save):
    ``cells`` maps (arm, seed, update, column) to the new text of that eval's cell (``""``: a blank cell).

    Raises AssertionError naming the keys that match no line of runs.csv, or more than one, and ValueError for a
    column its header lacks (the file unchanged either way)."""
    path = study / "runs.csv"
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    found = dict.fromkeys(cells, 0)
    for n, line in enumerate(lines[1:], 1):
        f = line.split(",")
        for (arm, seed, update, col), text in cells.items():
            if f[:3] == [arm, str(seed), str(update)]:
                f[header.index(col)] = text
                found[arm, seed, update, col] += 1
        lines[n] = ",".join(f)
    wrong = {key: count for key, count in found.items() if count != 1}
    assert not wrong, f"runs.csv lines matched per cell (one expected): {wrong}"
    path.write_text("\n".join(lines) + "\n")


def stopped_before_any_run(plan: Path, out: Path) -> None:
    """Start the study of ``plan`` in ``out`` and stop it (KeyboardInterrupt) once it is frozen, before any run or
    probe starts (``gradprobe.study.orchestrator._run`` raises), as a Ctrl-C there would."""
    import pytest

    import gradprobe.study.orchestrator as orchestrator
    from gradprobe.study.runner import run_study

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as m:
        m.setattr(orchestrator, "_run", stopped)
        with pytest.raises(KeyboardInterrupt):
            run_study(plan, out, executor="inline", probe=False, analyze=False)
