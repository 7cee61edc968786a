"""The executor does not change a study's results (issue 15): the same plan run serially in this process
(``inline``) and in a process pool (``local``) gives the same runs.csv and per-item eval results, every
column but the measured device-seconds."""

from __future__ import annotations

import csv
import gzip
import json

import pytest

from gradprobe.study.runner import run_study

from helpers_rollout import one_thread
from study_helpers import toy_plan, write_plan

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # inline runs: one torch thread

# the shipped tiny tier on its frontier chain sums: groups with mixed rewards, so the runs really update
PLAN = (toy_plan("executors", seeds=(0, 1), generated_tokens=600, every_tokens=300, checkpoint_every=None,
                 arms='[arms.grpo]\nreward = "outcome"\n[arms.grpo_2xlr]\nreward = "outcome"\nlr_scale = 2.0\n')
        .replace('name = "tiny-qwen2"', 'name = "tiny"').replace("max_new_tokens = 16", "max_new_tokens = 48")
        .replace("pool = 16\n", "pool = 16\n[task.config]\nmin_terms = 3\nmax_terms = 4\nmax_digits = 1\n"))


def _rows(out) -> list[dict]:
    with open(out / "runs.csv") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r.pop("device_seconds")
    return sorted(rows, key=lambda r: (r["arm"], int(r["seed"]), int(r["update"])))


def _items(out) -> list[dict]:
    lines = [json.loads(x) for x in gzip.decompress((out / "eval_items.jsonl.gz").read_bytes()).decode().splitlines()]
    for d in lines:
        for k in [k for k in d if k.endswith("seconds")]:
            d.pop(k)
    return sorted(lines, key=lambda d: (d["arm"], d["seed"], d.get("update", 0)))


def test_inline_and_local_pool_give_the_same_runs(tmp_path, monkeypatch):
    plan = write_plan(tmp_path, PLAN)
    inline = run_study(plan, tmp_path / "inline", executor="inline", probe=False, analyze=False, check=False)
    # two workers of one torch thread each, as the inline runs have (one_thread), whatever this machine's core count
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    local = run_study(plan, tmp_path / "local", executor="local", workers=2, probe=False, analyze=False, check=False)
    assert inline.ok and local.ok, (inline.summary(), local.summary())
    a, b = _rows(tmp_path / "inline"), _rows(tmp_path / "local")
    assert len(a) == 2 * 2 * 3  # 2 arms x 2 seeds x evals at 0, 300 and 600+ tokens
    assert a == b
    assert _items(tmp_path / "inline") == _items(tmp_path / "local")
    assert {r["arm"] for r in a} == {"grpo", "grpo_2xlr"}
    # the runs really trained, and differently per arm and seed, so the equality above is not vacuous
    last = {(r["arm"], r["seed"]): r["kl_init"] for r in a if int(r["update"]) > 0}
    assert len(set(last.values())) == len(last) and all(float(v) > 0 for v in last.values())
