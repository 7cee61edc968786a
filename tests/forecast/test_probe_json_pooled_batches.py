"""A multi-batch probe.json's pooled entries are checked against its batches, so an edit of either is refused.

A breaker scaled one reward's ``per_group`` by 3 in every batch of a ``--probe-batches 2`` probe.json, with each
batch's ``inner_product`` and gain: each batch stayed self-consistent and the pooled entry was never compared with
them, so the forecast (which reads the batches) moved that reward's raw rho from -2.10 to -6.28 without a word.
:func:`gradprobe.forecast.probe_input.check_pooled_entries` holds the pooled entry to what
:func:`gradprobe.probe.batches.combine_batches` makes of the batches (per_group their concatenation / N,
inner_product and signal_proxy their means, num_groups their sum, tokens_per_update their rounded mean, ...).
"""

from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path

import pytest

from gradprobe.forecast.probe_input import pooled_entries, probe_batches_of
from gradprobe.forecast.section import forecast_section
from gradprobe.forecast.study import merge_guided_entries
from gradprobe.layout import rerun_advice, restore_advice
from gradprobe.probe.batches import combine_batches
from gradprobe.probe.run import ProbeConfig

ROOT = Path(__file__).resolve().parents[2]
#: how every refusal of a pooled entry ends, before the fix
TAIL = ("as gradprobe.probe.batches.combine_batches pools them): the pooled entry or a batch's entry was edited or "
        "damaged after the probe wrote the file (the forecast reads the batches, the probe's table and report the "
        "pooled entry), so a forecast from it would not be the probe's; restore the file, or ")


def _pooled() -> dict:
    """Two shipped single-batch probes of the same rewards on different batches (study_tiny_heldout4k and
    study_tiny_hard_heldout4k) pooled by the probe's own combine_batches at a 600 s time budget, as JSON."""
    a, b = (json.loads((ROOT / "data" / s / "probe" / "probe.json").read_text())
            for s in ("study_tiny_heldout4k", "study_tiny_hard_heldout4k"))
    config = ProbeConfig.from_dict(dict(a["config"], budget_seconds=600.0))
    return json.loads(json.dumps(combine_batches([a, b], config)))


def _saved(tmp_path: Path, raw: dict) -> Path:
    """``raw`` written as ``tmp_path/p/probe.json`` (a probe's own folder: its fix is `gradprobe probe --out`)."""
    (tmp_path / "p").mkdir(exist_ok=True)
    path = tmp_path / "p" / "probe.json"
    path.write_text(json.dumps(raw))
    return path


def _refusal(raw: dict, source=None) -> str:
    """The message with which the forecast's reader (probe_batches_of) refuses ``raw``."""
    with pytest.raises(ValueError) as info:
        probe_batches_of(raw, source=source)
    return str(info.value)


def test_every_batch_tripled_with_its_sums_is_refused_naming_the_pooled_inner_product(tmp_path):
    raw = _pooled()
    assert [len(b["rewards"][1]["per_group"]) for b in raw["batches"]] == [16, 16]
    assert [b["rewards"][1]["inner_product"] for b in raw["batches"]] == [378.8653162406224, 552.3067917331707]
    assert raw["rewards"][1]["inner_product"] == 465.58605398689656  # their mean
    assert len(probe_batches_of(raw)) == 2 and list(pooled_entries(raw)) == ["outcome", "mc_value", "hybrid_0.5"]
    for batch in raw["batches"]:  # the breaker's edit: each batch stays self-consistent
        entry = batch["rewards"][1]
        entry["per_group"] = [3 * x for x in entry["per_group"]]
        entry["inner_product"] *= 3
        entry["predicted_gain_per_update"] *= 3
    path = _saved(tmp_path, raw)
    raw = json.loads(path.read_text())
    tripled = math.fsum(b["rewards"][1]["inner_product"] for b in raw["batches"]) / 2
    assert tripled == pytest.approx(3 * 465.58605398689656, rel=1e-12)
    text = _refusal(raw, path)
    assert text == (f"{path} field rewards[1].inner_product (reward 'mc_value') is 465.58605398689656, but its "
                    f"batches give {tripled!r} (inner_product = the mean of its batches' batches[k].rewards[1]."
                    f"inner_product, {TAIL}{rerun_advice(path.parent)}")
    with pytest.raises(ValueError) as info:  # the pooled entries' reader refuses it too, naming the file
        pooled_entries(raw, path)
    assert str(info.value) == text


def test_a_pooled_entry_edited_alone_is_refused_whichever_field():
    def swapped(e):  # two groups swapped: its sums still hold, its batches do not
        e["per_group"][0], e["per_group"][1] = e["per_group"][1], e["per_group"][0]

    def tripled(e):
        e["per_group"] = [3 * x for x in e["per_group"]]
        for key in ("inner_product", "predicted_gain_per_update", "predicted_gain_at_budget",
                    "predicted_gain_at_time_budget"):
            e[key] *= 3

    cases = [
        (swapped, "per_group[0] (reward 'mc_value') is -0.4750467780084941, but its batches give -27.505178190550026 "
                  "(per_group = its batches' batches[k].rewards[1].per_group one after another, each value divided "
                  "by N = 2: here batches[0].rewards[1].per_group[0] / 2, "),
        (tripled, f"inner_product (reward 'mc_value') is {3 * 465.58605398689656!r}, but its batches give "
                  "465.58605398689656 (inner_product = the mean of its batches' batches[k].rewards[1].inner_product, "),
        (lambda e: e.update(tokens_per_update=8000),
         "tokens_per_update (reward 'mc_value') is 8000, but its batches give 26375.0 (tokens_per_update = the mean "
         "of its batches' batches[k].rewards[1].tokens_per_update, rounded to a token, "),
        (lambda e: e.update(predicted_gain_at_budget=2 * e["predicted_gain_at_budget"]),
         f"predicted_gain_at_budget (reward 'mc_value') is {2 * 44.131379524824325!r}, but its batches give "),
        (lambda e: e.update(predicted_gain_at_time_budget=2 * e["predicted_gain_at_time_budget"]),
         f"predicted_gain_at_time_budget (reward 'mc_value') is {2 * 164.34789793588823!r}, but its batches give "),
        (lambda e: e.update(seconds_per_update=1.0),
         "seconds_per_update (reward 'mc_value') is 1.0, but its batches give "),
        (lambda e: e.update(probe_batches=3), "probe_batches (reward 'mc_value') is 3, but its batches give 2 "
                                              "(probe_batches = N, the batches it pools, "),
    ]
    for edit, expected in cases:
        raw = _pooled()
        assert raw["rewards"][1]["per_group"][:2] == [-27.505178190550026, -0.4750467780084941]
        edit(raw["rewards"][1])
        text = _refusal(json.loads(json.dumps(raw)))
        assert text.startswith(f"probe.json field rewards[1].{expected}"), (expected, text)
        assert TAIL in text


def test_an_edited_batch_field_the_forecast_reads_is_refused():
    def proxy_doubled(b):  # the batch's signal proxy and its list doubled together: self-consistent
        e = b["rewards"][0]
        e["signal_proxy_per_group"] = [2 * x for x in e["signal_proxy_per_group"]]
        e["signal_proxy"] *= 2

    def proxy_swapped(b):
        spg = b["rewards"][0]["signal_proxy_per_group"]
        j = max(range(len(spg)), key=lambda i: spg[i])
        spg[0], spg[j] = spg[j], spg[0]

    cases = [  # batches[1] edited; the pooled field named
        (lambda b: b["rewards"][1].update(tokens_per_update=9000),
         "rewards[1].tokens_per_update (reward 'mc_value') is 26375, but its batches give 17260.0 "),
        (proxy_doubled, "rewards[0].signal_proxy (reward 'outcome') is 0.7665523272323406, but its batches give "
                        f"{(0.8647053071540607 + 2 * 0.6683993473106205) / 2!r} (signal_proxy = the mean of its "
                        "batches' batches[k].rewards[0].signal_proxy, "),
        (proxy_swapped, "rewards[0].signal_proxy_per_group[16] (reward 'outcome') is "),
        (lambda b: b["rewards"][2].update(seconds_per_update=100.0),
         f"rewards[2].seconds_per_update (reward 'hybrid_0.5') is 16.918047818497143, but its batches give "
         f"{(21.13835930499772 + 100.0) / 2!r} (seconds_per_update = the mean of its batches' "),
    ]
    for edit, expected in cases:
        raw = _pooled()
        probe_batches_of(raw)
        edit(raw["batches"][1])
        text = _refusal(json.loads(json.dumps(raw)))
        assert text.startswith(f"probe.json field {expected}"), (expected, text)


def test_a_batch_removed_a_group_cut_or_a_reward_missing_from_a_batch_is_refused():
    raw = _pooled()
    raw["batches"].pop()
    assert _refusal(raw).startswith("probe.json field config.probe_batches is 2, but the file holds 1 batch(es) "
                                    "(its batches list; gradprobe.probe.batches.combine_batches records "
                                    "probe_batches = the batches it pools)")
    del raw["config"]["probe_batches"]  # the entries still say how many batches they pool
    assert _refusal(raw).startswith("probe.json field rewards[0].probe_batches (reward 'outcome') is 2, but its "
                                    "batches give 1 ")
    raw = _pooled()
    entry = raw["batches"][0]["rewards"][1]  # a group cut from a batch, its sums made to agree
    for key in ("per_group", "signal_proxy_per_group"):
        entry[key] = entry[key][:-1]
    entry["inner_product"] = math.fsum(entry["per_group"])
    entry["predicted_gain_per_update"] = 100 * 1e-4 * entry["inner_product"]
    entry["signal_proxy"] = math.fsum(entry["signal_proxy_per_group"]) / (8 * 15)
    assert _refusal(raw).startswith("probe.json field rewards[1].num_groups (reward 'mc_value') is 32, but its "
                                    "batches give 31 (num_groups = the sum of its batches' len(batches[k].rewards[1]"
                                    ".per_group), ")
    raw = _pooled()
    del raw["batches"][1]["rewards"][2]
    assert _refusal(raw).startswith("probe.json field rewards[2] is the pooled entry of reward 'hybrid_0.5', but "
                                    "batches[1] has no entry of it")


def test_a_guided_probe_whose_batches_were_edited_is_named_by_its_file(tmp_path):
    shared, guided = _pooled(), _pooled()
    for batch in guided["batches"]:
        entry = batch["rewards"][0]
        entry["per_group"] = [3 * x for x in entry["per_group"]]
        entry["inner_product"] *= 3
        entry["predicted_gain_per_update"] *= 3
    path = tmp_path / "probe" / "guided" / "g" / "probe.json"
    with pytest.raises(ValueError) as info:  # the study then reads the unguided entry, with this as the why
        merge_guided_entries(shared, guided, "outcome", "guided/g", source=path)
    assert str(info.value).startswith(f"{path} field rewards[0].inner_product (reward 'outcome') is "
                                      "125.07623875676023, but its batches give ")
    merged, key = merge_guided_entries(shared, _pooled(), "outcome", "guided/g", source=path)
    assert key == "outcome~guided/g" and len(probe_batches_of(merged)) == 2  # an intact guided probe still merges
    assert pooled_entries(copy.deepcopy(merged))[key]["inner_product"] == 125.07623875676023


def _ints_as_floats(value):
    """``value`` with every integer written as a float (``2`` -> ``2.0``): what a tool that reads every JSON number
    as a double (JavaScript, a float-only re-save) writes back."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, list):
        return [_ints_as_floats(v) for v in value]
    if isinstance(value, dict):
        return {k: _ints_as_floats(v) for k, v in value.items()}
    return value


def test_a_file_whose_integers_were_resaved_as_floats_reads_as_written(tmp_path):
    raw = _pooled()
    floats = json.loads(json.dumps(_ints_as_floats(raw)))
    assert floats["config"]["probe_batches"] == 2.0 and isinstance(floats["config"]["probe_batches"], float)
    assert floats["rewards"][0]["probe_batches"] == 2.0 and floats["config"]["group"] == 8.0
    path = _saved(tmp_path, floats)
    # was: refused at config.probe_batches ("is 2.0, but the file holds 2 batch(es) ... a batch was added or removed")
    batches = probe_batches_of(floats, source=path)
    assert [b["rewards"]["mc_value"]["per_group"] for b in batches] == \
        [b["rewards"][1]["per_group"] for b in raw["batches"]]
    assert list(pooled_entries(floats, path)) == ["outcome", "mc_value", "hybrid_0.5"]
    # entries' probe_batches = 2.0 alone: the pooled signal_proxy is still checked as the mean of its 2 batches (was:
    # read as one batch, refused with signal_proxy "given" as half its true value)
    alone = _pooled()
    for entry in alone["rewards"]:
        entry["probe_batches"] = 2.0
    probe_batches_of(json.loads(json.dumps(alone)))
    alone["rewards"][0]["signal_proxy"] *= 1.1  # an edit is still refused, with the 2-batch formula
    assert _refusal(alone).startswith(f"probe.json field rewards[0].signal_proxy (reward 'outcome') is "
                                      f"{alone['rewards'][0]['signal_proxy']!r}, but rewards[0]'s per-group lists "
                                      "give 0.7665523272323407 (signal_proxy = the mean over its 2 batches of "
                                      "sum(signal_proxy_per_group) / (group x groups), group = 8, ")
    for bad in (2.5, 3.0, True):  # a fraction, another count, a boolean: refused as before
        edited = _pooled()
        edited["config"]["probe_batches"] = bad
        assert _refusal(edited).startswith(f"probe.json field config.probe_batches is {json.dumps(bad)}, but the "
                                           "file holds 2 batch(es)"), bad


def test_a_batch_that_is_no_object_is_named_not_a_traceback(tmp_path):
    raw = _pooled()
    raw["batches"][1] = 5  # was: AttributeError: 'int' object has no attribute 'get'
    path = _saved(tmp_path, raw)
    assert _refusal(raw, path) == (f"{path} field batches[1] is 5, not an object: each batch of a multi-batch "
                                   "probe.json is an object holding its reward entries ('rewards', as gradprobe.probe."
                                   "batches.run_probe_batches writes it); the file was edited or damaged after the "
                                   f"probe wrote it; restore the file, or {rerun_advice(path.parent)}")
    raw["batches"][1] = {"config": {}}
    assert _refusal(raw).startswith("probe.json field batches[1] has no 'rewards': each batch of a multi-batch ")


def test_forecast_section_names_the_file_it_was_given():
    raw = _pooled()
    raw["rewards"][1]["inner_product"] *= 3
    source = Path("study") / "probe" / "probe.json"
    with pytest.raises(ValueError) as info:  # was: named "probe.json" whatever the file
        forecast_section(raw, source=source)
    assert str(info.value).startswith(f"{source} field rewards[1].inner_product (reward 'mc_value') is "
                                      f"{3 * 465.58605398689656!r}, but ")
    assert str(info.value).endswith(rerun_advice(source.parent))


def test_a_studys_edited_probe_is_refused_by_load_probe_and_load_study_once_with_the_studys_fix(tmp_path):
    import gradprobe

    study = Path(shutil.copytree(ROOT / "data" / "study_tiny", tmp_path / "st"))
    file = study / "probe" / "probe.json"
    raw = json.loads(file.read_text())
    raw["rewards"][1]["inner_product"] *= 3
    file.write_text(json.dumps(raw))
    advice = restore_advice(file.parent)
    assert advice.startswith(f"restore {file} from a copy of the study")
    with pytest.raises(ValueError) as info:  # was: read, its table showing the edited inner_product
        gradprobe.load_probe(file.parent)
    text = str(info.value)
    assert text.startswith(f"{file} field rewards[1].inner_product (reward 'mc_value') is ") and text.endswith(advice)
    # the study's fix said once: "restore FILE from a copy of the study", not "restore the file, or ...: restore FILE"
    assert text.count("restore") == 1 and rerun_advice(file.parent) not in text
    with pytest.raises(ValueError) as info:
        gradprobe.load_study(study)
    assert str(info.value) == text  # load_study passes load_probe's message on as it is
