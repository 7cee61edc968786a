"""A notebook user of ``ProbeResult``: a reward without signal is marked in :attr:`ProbeResult.table` (its zeros are
exact, not a measurement, with or without a forecast), a forecast row that gives no verdict says why in the table, a
mistyped reward name (case, spaces) is pointed at the probed one, names in messages show bidirectional controls
escaped, and the repr of a result held in memory never raises."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import gradprobe
from gradprobe.api.probe_result import ProbeFileError, ProbeResult
from gradprobe.forecast import forecast_section

from forecast_helpers import probe_result, synthetic_curve

ROOT = Path(__file__).resolve().parents[2]
EQUAL = "every group's rewards are equal on this batch, so every advantage is 0"
BIDI = "r\u202egnp.py"  # reads as "ryp.png" and reverses what follows when shown raw


def _entry(name: str, reason: str | None) -> dict:
    """A reward entry as the probe writes it now (``no_signal_reason`` recorded in every entry)."""
    flat = reason is not None
    return {"name": name, "inner_product": 0.0 if flat else 0.5, "interval": [0.0, 0.0] if flat else [0.25, 0.75],
            "snr": 0.0 if flat else 2.0, "per_group": [0.0, 0.0] if flat else [0.25, 0.25],
            "predicted_gain_per_update": 0.0 if flat else 0.005, "tokens_per_update": 300,
            "predicted_gain_at_budget": 0.0 if flat else 4.0, "no_signal_reason": reason, "no_signal": flat}


def test_the_table_marks_a_reward_without_signal_as_recorded_without_a_forecast():
    raw = {"config": {"model": "smollm2-135m"}, "rewards": [_entry("outcome", None), _entry("flat", EQUAL)],
           "forecast": {"available": False, "note": "no reference curve"}}
    table = ProbeResult(raw).table
    assert table["no_signal"].tolist() == [False, True]  # was: no column, the zeros read as measured
    assert table.loc["flat", "snr"] == 0.0 and "verdict" not in table.columns  # nothing else says so


def test_the_table_marks_a_reward_without_signal_in_an_older_probe_json():
    g = np.random.default_rng(0).normal(2.0, 1.0, size=16)
    raw = probe_result({"outcome": g, "const": np.zeros(16)}, {"outcome": 4000, "const": 4000},
                       signal={"outcome": g ** 2, "const": np.zeros(16)})
    for r in raw["rewards"]:
        r["predicted_gain_at_budget"] = r["predicted_gain_per_update"] * 250_000 / r["tokens_per_update"]
    assert all("no_signal_reason" not in r for r in raw["rewards"])  # written before entries recorded it
    table = ProbeResult(raw).table
    assert table["no_signal"].tolist() == [False, True]
    assert table.columns.get_loc("no_signal") == table.columns.get_loc("gain_at_budget") + 1


def test_a_shipped_study_probe_has_signal_in_every_reward():
    table = gradprobe.load_probe(ROOT / "data" / "study_tiny" / "probe").table
    assert table.index.tolist() == ["outcome", "mc_value", "mc_advantage", "hybrid_0.5"]
    assert table["no_signal"].tolist() == [False] * 4


def _forecast_raw(budget_tokens: int) -> dict:
    rng = np.random.default_rng(0)
    g, noisy = rng.normal(2.0, 1.0, size=16), rng.normal(0.3, 5.0, size=16)
    raw = probe_result({"outcome": g, "noisy": noisy}, {"outcome": 4000, "noisy": 4000},
                       signal={"outcome": g ** 2, "noisy": noisy ** 2}, budget_tokens=budget_tokens)
    for r in raw["rewards"]:
        r.update(interval=[r["inner_product"] - 1.0, r["inner_product"] + 1.0], snr=0.5, predicted_gain_at_budget=1.0)
    raw["forecast"] = forecast_section(raw, curve=synthetic_curve(seeds=3, noise=0.3), curve_spec="c.json",
                                       method="probe")
    return raw


def test_the_table_says_why_a_forecast_row_gives_no_verdict():
    raw = _forecast_raw(50_000_000)  # grpo's updates lie far past the curve's last eval: no verdict
    why = raw["forecast"]["no_verdict_reason"]
    assert why.startswith("grpo's 12,500 effective updates lie 78.1x past the curve's last eval")
    row = ProbeResult(raw).table.loc["noisy"]
    assert row["no_verdict_reason"] == why and np.isfinite(row["forecast_gain"])  # a number, but no forecast to act on
    assert row["verdict"].startswith("no verdict at 50M: ")
    table = ProbeResult(_forecast_raw(250_000)).table
    assert table["no_verdict_reason"].isna().all() and table["verdict"].notna().all()


def _folder(path, names):
    """A probe folder with ``names`` probed: N = 2 completions of T = 2 tokens."""
    import torch
    from safetensors.torch import save_file

    path.mkdir()
    entries = [{"name": n, "inner_product": 0.5, "per_group": [0.25, 0.25], "predicted_gain_per_update": 0.005,
                "tokens_per_update": 300, "predicted_gain_at_budget": 4.0} for n in names]
    (path / "probe.json").write_text(json.dumps({"rewards": entries, "config": {"model": "m"}}))
    save_file({"alignment": torch.ones(2, 2), "completion_mask": torch.ones(2, 2, dtype=torch.bool),
               **{f"advantages.{n}": torch.full((2, 2), float(i), dtype=torch.float64) for i, n in enumerate(names)}},
              str(path / "alignment.safetensors"))
    return gradprobe.load_probe(path)


@pytest.mark.parametrize("typed", ["Outcome", "outcome ", " OUTCOME\t"])
def test_a_name_that_differs_by_case_or_spaces_is_pointed_at_the_probed_one(tmp_path, typed):
    result = _folder(tmp_path / "p", ["outcome", "mc_value"])
    assert result.advantages("mc_value")[0, 0].item() == 1.0
    with pytest.raises(KeyError) as e:
        result.advantages(typed)
    assert e.value.args[0] == (f"reward {typed!r} was not probed; probed: outcome, mc_value; did you mean 'outcome'? "
                               "(names match exactly: case and spaces count)")
    with pytest.raises(KeyError) as e:  # no near name: no guess
        result.advantages("hybrid_0.5")
    assert e.value.args[0] == "reward 'hybrid_0.5' was not probed; probed: outcome, mc_value"


def test_names_in_the_messages_show_bidi_controls_escaped(tmp_path):
    result = _folder(tmp_path / "p", ["outcome", BIDI])
    assert result.advantages(BIDI)[0, 0].item() == 1.0
    with pytest.raises(TypeError) as e:
        result.advantages(1)
    assert str(e.value) == ("advantages(reward): reward must be a probed reward's name, one of outcome, "
                            "r\\u202egnp.py; got 1")
    with pytest.raises(KeyError) as e:
        result.advantages("nope")
    assert "\u202e" not in e.value.args[0] and e.value.args[0].endswith("probed: outcome, r\\u202egnp.py")


@pytest.mark.parametrize("raw, shown", [
    ({"rewards": [{}, {"name": "x"}]}, "rewards=[None, 'x']"),
    ({"rewards": {"outcome": {}}, "config": ["not", "an", "object"]}, "rewards={'outcome': {}}")])
def test_the_repr_of_a_result_held_in_memory_never_raises(raw, shown):
    text = repr(ProbeResult(raw))  # was KeyError / TypeError: a notebook cell showing the result raised
    assert re.fullmatch(rf"ProbeResult\(model=None, task=None, {re.escape(shown)}, batch=NonexNone, folder=None\)",
                        text)


def test_the_repr_says_how_many_probe_batches_the_table_pools():
    raw = {"config": {"model": "tiny", "task": "chain_sum", "prompts": 4, "group": 2, "probe_batches": 3},
           "rewards": [{"name": "outcome"}]}
    assert repr(ProbeResult(raw)) == ("ProbeResult(model='tiny', task='chain_sum', rewards=['outcome'], batch=4x2, "
                                      "batches=3, folder=None)")  # was batch=4x2 alone: read as 4 prompts in all
    raw["config"]["probe_batches"] = 1
    assert repr(ProbeResult(raw)).endswith("batch=4x2, folder=None)")


def test_changing_a_tensor_read_from_the_result_leaves_the_result_unchanged(tmp_path):
    result = _folder(tmp_path / "p", ["outcome", "mc_value"])
    a, mask, adv = result.alignment, result.completion_mask, result.advantages("mc_value")
    a[~mask] = float("nan")
    a *= 0.0  # a notebook cell edits its copy in place
    mask[:] = False
    adv += 5.0
    assert result.alignment.tolist() == [[1.0, 1.0], [1.0, 1.0]]  # was [[0.0, 0.0], ...]: the cached tensor itself
    assert result.completion_mask.all().item() and result.advantages("mc_value").tolist() == [[1.0, 1.0]] * 2


def test_a_missing_path_under_a_tilde_names_the_home_folder_it_was_looked_for_in(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)  # no folder named "~" here, and none is looked for
    with pytest.raises(ProbeFileError) as e:
        gradprobe.load_probe("~/runs/p")
    assert str(e.value) == (f"{tmp_path / 'home' / 'runs' / 'p'} not found; pass a `gradprobe probe --out` folder "
                            "(it holds probe.json)")


def test_a_batch_is_read_by_a_numpy_integer(tmp_path):
    result = _folder(tmp_path / "p", ["outcome"])
    for k, name in enumerate(("outcome", "mc_value")):
        _folder(tmp_path / "p" / f"batch_{k}", [name])
    assert [result.batch(k).rewards for k in np.arange(2)] == [["outcome"], ["mc_value"]]  # was TypeError
    with pytest.raises(TypeError, match=re.escape("k must be an integer batch number (0, 1, ...), got np.True_")):
        result.batch(np.bool_(True))
