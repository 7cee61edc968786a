"""A probe is read and checked once per forecast (``probe_batches_of``), not again by the callee.

Before, ``forecast_section`` checked a probe.json's batches with its file named and then ``forecast_rewards`` read
them again; ``study_forecasts`` read the study's probe when it read the file, again in ``_check_probed``, again in
``merge_guided_entries`` and again in ``forecast_rewards``, and a guided arm's probe once when it checked it and
again in ``merge_guided_entries``. Each check named the same file with the same outcome, so the repeats only cost
time (``probe_batches_of`` checks every entry's summaries against its per-group lists). The counters wrap
``probe_batches_of`` in each module namespace where it is looked up.

The batches read once are handed on through internal keywords (``_batches``, ``_probe_batches``,
``_guided_batches``): public keywords let a caller pass another probe's batches and get that probe's forecast under
this one's name (and ``batches=[]`` an IndexError), so the public signatures are those before the change.
"""

from __future__ import annotations

import inspect
import json
from collections import Counter
from pathlib import Path

import pytest

import gradprobe.forecast.budget_forecast as budget_forecast
import gradprobe.forecast.section as section
import gradprobe.forecast.study as study
from gradprobe.forecast import (default_curve_path, forecast_rewards, forecast_section, load_reference_curve,
                                study_forecasts)
from gradprobe.forecast.probe_input import probe_batches_of

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "data" / "study_tiny"
GUIDED = ROOT / "data" / "study_tiny_guided"


@pytest.fixture
def calls(monkeypatch) -> list[tuple[object, object]]:
    """(probe object, source) of every ``probe_batches_of`` call made by the forecast modules."""
    seen: list[tuple[object, object]] = []
    original = budget_forecast.probe_batches_of

    def counted(probe, source=None, *args, **kwargs):
        seen.append((probe, source))
        return original(probe, source, *args, **kwargs)

    for module in (budget_forecast, section, study):
        monkeypatch.setattr(module, "probe_batches_of", counted)
    return seen


def test_forecast_section_reads_the_probe_once_with_its_file_named(calls):
    path = STUDY / "probe" / "probe.json"
    result = json.loads(path.read_text(encoding="utf-8-sig"))
    d = forecast_section(result, source=path)
    assert [(probe is result, source) for probe, source in calls] == [(True, path)]  # was 2: the second unnamed
    rows = {r["arm"]: r for r in d["rows"]}
    assert rows["outcome"]["forecast_gain"] == 0.0 and rows["outcome"]["tokens_per_update"] > 0
    assert len(rows) == len(result["rewards"])


def test_study_forecasts_reads_the_study_probe_once(calls):
    t = study_forecasts(STUDY, n_draws=200)
    assert [source for _, source in calls] == [STUDY / "probe" / "probe.json"]  # was 3: then twice without the file
    assert list(t["arm"])[0] == "grpo" and t.set_index("arm").loc["grpo", "forecast_probe"] == 0.0


def test_study_forecasts_reads_each_probe_of_a_guided_study_once(calls):
    """The shared probe (was 3 reads), the guided arm's probe (was 2) and the merged probe the forecast reads."""
    t = study_forecasts(GUIDED, n_draws=200).set_index("arm")
    per_object = Counter(id(probe) for probe, _ in calls)
    assert sorted(per_object.values()) == [1, 1, 1]
    shared, guided = GUIDED / "probe" / "probe.json", GUIDED / "probe" / "guided" / "guided" / "probe.json"
    assert [source for _, source in calls] == [shared, guided, None]  # the merged probe: read by forecast_rewards
    assert t.loc["guided", "probe_entry"] == "outcome~guided/guided"  # the guided probe's entry was merged and read
    assert "guided arm: its entry is its guided probe's" in t.loc["guided", "note"]


def test_a_guided_probe_of_two_arms_of_different_rewards_is_read_once(calls):
    """Two guided arms of one guided probe folder and different rewards: its probe.json is read, checked and batched
    once (was once per reward); the arm whose reward it lacks reads the unguided entry, the status says why."""
    shared = json.loads((GUIDED / "probe" / "probe.json").read_text())
    arms_map = json.loads((GUIDED / "probe" / "arms.json").read_text())
    arms_map["guided2"] = dict(arms_map["guided"], reward="format", probe_entry="format")
    arms = {a: {"reward": s["probe_entry"], "lr_scale": 1.0} for a, s in arms_map.items()}
    labels = {a: {"probe_entry": s["probe_entry"]} for a, s in arms_map.items()}
    out = study._guided_entries(GUIDED, shared, arms, labels, arms_map)
    guided_path = GUIDED / "probe" / "guided" / "guided" / "probe.json"
    assert [source for _, source in calls].count(guided_path) == 1  # was 4: twice per reward
    merged, status, batches = out
    assert status["guided"] == {"key": "outcome~guided/guided", "folder": "guided/guided"}
    assert status["guided2"] == {"why": "its guided probe guided/guided has no entry 'format' (probed: ['outcome'])"}
    assert batches is None and [r["name"] for r in merged["rewards"]] == ["outcome", "outcome~guided/guided"]


def _public(fn) -> list[str]:
    return [name for name in inspect.signature(fn).parameters if not name.startswith("_")]


def test_the_batches_a_caller_read_are_internal_keywords(calls, checks):
    """The public parameters are those of before the reuse (1b24a0d); the public ``batches=`` (and ``names=``) that
    let a caller forecast probe A with probe B's batches (B's gains printed as A's) is refused, ``_batches`` and
    ``_names`` of A itself give A's forecast bit for bit, and are used: neither read nor checked again (a
    ``forecast_rewards`` that dropped them and read the probe again would read it here)."""
    assert _public(forecast_rewards) == ["curve", "probe", "budget_tokens", "budget_flops", "method", "arms",
                                         "lr_curve", "reference_reward", "n_draws", "seed", "level"]
    assert _public(study.merge_guided_entries) == ["probe", "guided", "entry", "folder", "source"]
    curve = load_reference_curve(default_curve_path())
    a = json.loads((STUDY / "probe" / "probe.json").read_text())
    b = json.loads((ROOT / "data" / "study_tiny_hard_rewards" / "probe" / "probe.json").read_text())
    for keyword in ("batches", "names"):
        with pytest.raises(TypeError, match=f"'{keyword}'"):
            forecast_rewards(curve, a, **{keyword: probe_batches_of(b)}, n_draws=200)
    shared = json.loads((GUIDED / "probe" / "probe.json").read_text())
    guided = json.loads((GUIDED / "probe" / "guided" / "guided" / "probe.json").read_text())
    for keyword in ("probe_batches", "guided_batches"):
        with pytest.raises(TypeError, match=f"'{keyword}'"):
            study.merge_guided_entries(shared, guided, "outcome", "guided/guided", **{keyword: probe_batches_of(a)})
    batches = probe_batches_of(a)
    names = list(batches[0]["rewards"])
    calls.clear()
    own = forecast_rewards(curve, a, n_draws=200, _batches=batches, _names=names).table
    assert calls == [] and checks == []  # the caller's batches and names: not read or checked again
    read = forecast_rewards(curve, a, n_draws=200).table
    assert [probe is a for probe, _ in calls] == [True] and len(checks) == 1  # without: read and checked here
    assert own.map(repr).equals(read.map(repr)) and read.set_index("arm").loc["mc_value", "forecast_gain"] < 0
    assert list(read["arm"]) == names == ["outcome", "mc_value", "mc_advantage", "hybrid_0.5"]


@pytest.fixture
def checks(monkeypatch) -> list[object]:
    """The batches of every ``check_batches`` call made by the forecast modules."""
    seen: list[object] = []
    original = budget_forecast.check_batches

    def counted(batches, *args, **kwargs):
        seen.append(batches)
        return original(batches, *args, **kwargs)

    for module in (budget_forecast, section):
        monkeypatch.setattr(module, "check_batches", counted)
    return seen


@pytest.mark.parametrize("study_dir", ["study_tiny", "study_tiny_hard_heldout4k"])
def test_forecast_section_checks_the_batches_once(calls, checks, study_dir):
    """``check_batches`` (every batch probes the same rewards, the reference among them, each entry with
    ``tokens_per_update`` and ``per_group``) ran in forecast_section with the file named, then again unnamed in
    forecast_rewards on the same batches (2 calls; now 1)."""
    path = ROOT / "data" / study_dir / "probe" / "probe.json"
    result = json.loads(path.read_text(encoding="utf-8-sig"))
    d = forecast_section(result, source=path)
    assert len(checks) == 1 and len(calls) == 1  # was 2 checks of the batches its one read gave
    assert d["available"] and d["rows"][0]["arm"] == "outcome"
    assert [r["arm"] for r in d["rows"]] == [r["name"] for r in result["rewards"]]


def test_checks_that_pass_derive_no_fix(monkeypatch):
    """The fix a refusal names is derived from the folder (gradprobe.layout: resolved paths, several stat calls,
    ~0.15 ms each); the checks of an intact probe.json make none (before: 16 per load_probe, about a third of it)."""
    import gradprobe.layout as layout
    from gradprobe.forecast.probe_input import check_entry_inputs
    from gradprobe.outputs import read_probe_json

    def no_fix(*args, **kwargs):
        raise AssertionError("a fix was derived for a check that passed")

    for path in (STUDY / "probe" / "probe.json", GUIDED / "probe" / "guided" / "guided" / "probe.json"):
        raw = read_probe_json(path, "")
        monkeypatch.setattr(layout, "probe_study", no_fix)
        check_entry_inputs(raw, source=path)
        probe_batches_of(raw, source=path)
        monkeypatch.undo()
