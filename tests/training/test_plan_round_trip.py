"""Every arm of every shipped plan round-trips (issue 15): the resolved run config written as config.json
(``RunConfig.to_dict`` through JSON) reads back equal, so a resumed run, a reused run and ``calib`` see
exactly the config that trained."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradprobe.training.plan import RunConfig, load_plan, run_config_from_dict

PLANS = sorted((Path(__file__).resolve().parents[2] / "plans").glob("*.toml"))


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.stem)
def test_every_arm_round_trips_through_config_json(path):
    plan = load_plan(path, check_schedule=False)
    assert plan.arms, path
    for name in plan.arms:
        for seed in plan.seeds[:2]:
            run = plan.arm(name, seed=seed)
            text = json.dumps(run.to_dict(), allow_nan=False)  # what config.json holds
            back = run_config_from_dict(json.loads(text))
            assert isinstance(back, RunConfig) and back == run, (path.name, name, seed)
            assert back.seed == seed and back.plan_sha256 == plan.sha256


def test_the_shipped_plans_are_all_here():
    assert {p.stem for p in PLANS} >= {"tiny", "paper", "tiny_greso", "tiny_losses", "reward_granularity"}
