"""A calibration's domain: resolved task identities (issue 14) and check_domain's warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calib.dataset import build_rows_many
from calib.domain import check_domain, resolve_model, resolve_task, task_key
from calib.model import fit_calibration, load_calibration
from calib_helpers import TASK_CONFIG, TOKENS, single_thread_blas, synthetic_forecasts, write_study  # noqa: F401

INLINE = "chain_sum:min_terms=3,max_terms=4,min_digits=1,max_digits=1"


def test_inline_and_plan_forms_of_a_task_resolve_to_the_same_key():
    inline = resolve_task(INLINE)
    plan = resolve_task("chain_sum", dict(TASK_CONFIG))
    assert inline == plan and inline["resolved"]
    assert inline["key"] == "chain_sum:allow_negation=false,max_digits=1,max_terms=4,min_digits=1,min_terms=3"
    # reasoning-gym's defaults are filled in: the bare name is chain_sum's default distribution, another task
    assert resolve_task("chain_sum")["config"] == {"allow_negation": False, "max_digits": 4, "max_terms": 6,
                                                   "min_digits": 1, "min_terms": 2}
    assert resolve_task("chain_sum:min_terms=2")["key"] == resolve_task("chain_sum")["key"]  # 2 is the default
    assert resolve_task("chain_sum", {"train_size": 512})["key"] == resolve_task("chain_sum")["key"]  # pool size
    # the key is load_task's inline syntax: it resolves to itself
    assert resolve_task(inline["key"]) == inline
    assert task_key({"name": "gsm8k", "config": {}}) == "gsm8k"


def test_unresolvable_task_is_compared_as_written(caplog):
    with caplog.at_level("WARNING"):
        t = resolve_task("no_such_task:a=1,b=x")
    assert t == {"name": "no_such_task", "config": {"a": 1, "b": "x"}, "resolved": False,
                 "key": "no_such_task:a=1,b=\"x\""}
    assert "could not be resolved here" in caplog.text


def test_model_identity(tmp_path):
    assert resolve_model("tiny")["key"] == "tiny"
    (tmp_path / "m").mkdir()
    assert resolve_model(str(tmp_path / "m"))["key"] == str(tmp_path / "m")


@pytest.fixture()
def calibration(tmp_path):
    rows = build_rows_many([write_study(tmp_path / "a", seed=1), write_study(tmp_path / "b", seed=2)],
                           forecast_fn=synthetic_forecasts)
    return fit_calibration(rows)


def _probe(model="tiny", task=INLINE, budget_tokens=TOKENS, budget_seconds=None):
    return {"config": {"model": model, "task": task, "budget_tokens": budget_tokens, "budget_seconds": budget_seconds},
            "rewards": []}


def test_domain_is_recorded(calibration):
    d = calibration.domain
    assert [s["name"] for s in d.studies] == ["a", "b"] and all(len(s["plan_sha256"]) == 64 for s in d.studies)
    assert [m["key"] for m in d.models] == ["tiny"] and d.budget_kind == "tokens" and d.budget_range == [TOKENS, TOKENS]
    assert [t["key"] for t in d.tasks] == [resolve_task(INLINE)["key"]] and d.tasks[0]["config"]["max_terms"] == 4
    assert d.arms == ["hybrid_0.5", "mc_min", "mc_value"] and d.forecaster == "forecast_probe"


def test_check_domain_inside_and_outside(calibration):
    # the study's own task written inline is inside (issue 14: the note fired here)
    assert check_domain(calibration, _probe()) == []
    w = check_domain(calibration, _probe(model="smollm2-135m"))
    assert len(w) == 1 and w[0].field == "model" and w[0].outside
    assert "model 'smollm2-135m' is outside the calibration's domain (models ['tiny'])" in w[0]
    w = check_domain(calibration, _probe(task="chain_sum"))  # the default distribution: 2-6 terms, up to 4 digits
    assert len(w) == 1 and w[0].field == "task" and "max_terms=6" in w[0]
    assert "compared by resolved configuration" in w[0]
    w = check_domain(calibration, _probe(budget_tokens=None, budget_seconds=60.0))
    assert [x.field for x in w] == ["budget_kind"] and "fitted at a tokens budget and the probe has none" in w[0]
    w = check_domain(calibration, _probe(budget_tokens=5 * TOKENS))
    assert [x.field for x in w] == ["budget_value"] and "extrapolation" in w[0]
    w = check_domain(calibration, _probe(budget_tokens=1.9 * TOKENS))  # within half to twice the range: a note
    assert [(x.field, x.outside) for x in w] == [("budget_value", False)] and "within the 0.5x-2x tolerance" in w[0]
    w = check_domain(calibration, _probe(model="other", task="basic_arithmetic"))
    assert [x.field for x in w] == ["model", "task"]


def test_check_domain_of_a_version_1_file_compares_task_names():
    legacy = load_calibration(Path(__file__).resolve().parent / "data" / "calibration_v1.json")  # format version 1
    assert legacy.legacy
    w = check_domain(legacy, _probe(budget_tokens=250_000))
    assert len(w) == 1 and not w[0].outside and "compared by name" in w[0]
    w = check_domain(legacy, _probe(task="basic_arithmetic", budget_tokens=250_000))
    assert w[0].outside and "task 'basic_arithmetic:" in w[0]
    assert json.loads(json.dumps(w)) == list(w)  # plain strings for JSON
