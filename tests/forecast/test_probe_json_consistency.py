"""A probe.json whose per-group lists were edited is refused before a forecast reads it.

A trial user multiplied one reward's ``per_group`` by 3 in data/study_tiny/probe/probe.json: the study's
``forecast_probe`` of mc_value moved from -1.78 to +1.39 points and nothing said so. Each entry records summaries
that are exact functions of its lists (``inner_product`` = sum(per_group), ``num_groups`` = len(per_group),
``predicted_gain_per_update`` = 100 lr sum(per_group), ``signal_proxy`` = sum(signal_proxy_per_group) / (G B));
:func:`gradprobe.forecast.probe_input.check_entry_summaries` checks them when probe.json is read for forecasting.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path

import pytest

from gradprobe.forecast import study_forecasts
from gradprobe.forecast.probe_input import pooled_entries, probe_batches_of
from gradprobe.layout import rerun_advice
from gradprobe.probe.batches import combine_batches
from gradprobe.probe.run import ProbeConfig

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "data" / "study_tiny"
SHIPPED = sorted(ROOT.glob("data/**/probe.json"))


def _saved(tmp_path: Path, raw: dict) -> Path:
    """``raw`` written as ``tmp_path/p/probe.json`` (a probe's own folder: its fix is `gradprobe probe --out`)."""
    (tmp_path / "p").mkdir(exist_ok=True)
    path = tmp_path / "p" / "probe.json"
    path.write_text(json.dumps(raw))
    return path


def _read(path: Path) -> list[dict]:
    """probe_batches_of of the file at ``path``, read as the forecast reads it (the file named)."""
    return probe_batches_of(json.loads(path.read_text()), source=path)


def _tiny() -> dict:
    return json.loads((STUDY / "probe" / "probe.json").read_text())


def _heldout_pair() -> dict:
    """Two shipped single-batch probes of the same rewards pooled by the probe's own combine_batches."""
    a, b = (json.loads((ROOT / "data" / s / "probe" / "probe.json").read_text())
            for s in ("study_tiny_heldout4k", "study_tiny_replicate_heldout4k"))
    return json.loads(json.dumps(combine_batches([a, b], ProbeConfig.from_dict(a["config"]))))


def test_every_shipped_probe_json_reads_unchanged_and_a_one_in_a_million_edit_of_it_is_refused():
    assert len(SHIPPED) >= 21  # every study's probe/probe.json and the guided arm's
    for path in SHIPPED:
        raw = json.loads(path.read_text())
        batches = probe_batches_of(raw, source=path)
        assert list(batches[0]["rewards"]) == [e["name"] for e in raw["rewards"]], path
        edited = copy.deepcopy(raw)
        per = edited["rewards"][0]["per_group"]
        j = max(range(len(per)), key=lambda i: abs(per[i]))
        per[j] += 1e-6 * math.fsum(map(abs, per))  # far above float rounding (1e-9 of it is the tolerance)
        with pytest.raises(ValueError) as info:
            probe_batches_of(edited, source=path)
        name = raw["rewards"][0]["name"]
        assert str(info.value).startswith(f"{path} field rewards[0].inner_product (reward {name!r}) is "
                                          f"{raw['rewards'][0]['inner_product']!r}, but rewards[0]'s per-group lists "
                                          f"give {math.fsum(per)!r} (inner_product = sum(per_group)"), path


def test_a_tripled_per_group_is_refused_naming_the_file_reward_both_values_and_the_fix(tmp_path):
    raw = _tiny()
    entry = raw["rewards"][1]
    assert entry["name"] == "mc_value" and entry["inner_product"] == 378.86536294943636
    entry["per_group"] = [3 * x for x in entry["per_group"]]
    path = _saved(tmp_path, raw)
    with pytest.raises(ValueError) as info:
        _read(path)
    tripled = math.fsum(entry["per_group"])
    assert tripled == pytest.approx(3 * 378.86536294943636, rel=1e-12)
    assert str(info.value) == (
        f"{path} field rewards[1].inner_product (reward 'mc_value') is 378.86536294943636, but rewards[1]'s "
        f"per-group lists give {tripled!r} (inner_product = sum(per_group), as the probe writes it): the file was "
        "edited or damaged after the probe wrote it, so a forecast from it would not be the probe's; restore the "
        f"file, or {rerun_advice(path.parent)}")
    assert f"re-run `gradprobe probe --out '{path.parent}'`" in str(info.value)


def test_a_study_whose_probe_json_was_tripled_gives_no_forecast(tmp_path):
    study = tmp_path / "study_tiny"
    shutil.copytree(STUDY, study, ignore=shutil.ignore_patterns("figures", "eval_items.jsonl.gz"))
    path = study / "probe" / "probe.json"
    raw = json.loads(path.read_text())
    raw["rewards"][1]["per_group"] = [3 * x for x in raw["rewards"][1]["per_group"]]
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError) as info:  # was: mc_value's forecast_probe +1.39 instead of -1.78, unsaid
        study_forecasts(study)
    text = str(info.value)  # the study's own file is named, with its own fix (no run folders: restore a copy)
    assert text.startswith(f"{path} field rewards[1].inner_product (reward 'mc_value') is 378.86536294943636, but "
                           "rewards[1]'s")
    assert text.endswith(f"; restore {path} from a copy of the study ({study} has no runs/: resuming the study to "
                         "write its probe again would train every run again)")  # one fix (was: "restore the file, or
    assert text.count("restore") == 1  # this is the probe of a study without run folders (...): restore ...")


def test_an_edited_signal_proxy_per_group_is_refused(tmp_path):
    raw = _tiny()
    entry = raw["rewards"][0]
    assert (entry["name"], entry["signal_proxy"], len(entry["signal_proxy_per_group"])) == (
        "outcome", 0.8647053071540607, 16)
    entry["signal_proxy_per_group"] = [2 * x for x in entry["signal_proxy_per_group"]]
    path = _saved(tmp_path, raw)
    with pytest.raises(ValueError) as info:
        _read(path)
    doubled = math.fsum(entry["signal_proxy_per_group"]) / (8 * 16)
    assert doubled == pytest.approx(2 * 0.8647053071540607, rel=1e-12)
    assert str(info.value).startswith(
        f"{path} field rewards[0].signal_proxy (reward 'outcome') is 0.8647053071540607, but rewards[0]'s per-group "
        f"lists give {doubled!r} (signal_proxy = sum(signal_proxy_per_group) / (group x groups), group = 8, as the "
        "probe writes it)")
    entry["signal_proxy_per_group"] = _tiny()["rewards"][0]["signal_proxy_per_group"][:15]  # a group cut off
    with pytest.raises(ValueError, match=r"rewards\[0\]\.signal_proxy_per_group \(reward 'outcome'\) is a list of "
                                         r"15 groups, but rewards\[0\]'s per-group lists give 16, the groups its "
                                         r"per_group holds"):
        _read(_saved(tmp_path, raw))


def test_a_num_groups_that_is_not_the_length_of_per_group_is_refused(tmp_path):
    raw = _tiny()
    raw["rewards"][2]["num_groups"] = 15
    path = _saved(tmp_path, raw)
    with pytest.raises(ValueError) as info:
        _read(path)
    assert str(info.value).startswith(
        f"{path} field rewards[2].num_groups (reward 'mc_advantage') is 15, but rewards[2]'s per-group lists give 16, "
        "the groups its per_group holds (num_groups = len(per_group), as the probe writes it)")
    raw = _tiny()
    raw["rewards"][2]["per_group"].pop()  # a group deleted: num_groups still says 16
    with pytest.raises(ValueError, match=r"rewards\[2\]\.num_groups \(reward 'mc_advantage'\) is 16, but "
                                         r"rewards\[2\]'s per-group lists give 15"):
        _read(_saved(tmp_path, raw))


def test_an_older_entry_without_inner_product_is_not_refused_for_it_but_its_gain_still_checks(tmp_path):
    raw = _tiny()
    for e in raw["rewards"]:
        del e["inner_product"]
    batches = _read(_saved(tmp_path, raw))  # not refused for the missing field
    assert batches[0]["rewards"]["mc_value"]["per_group"] == _tiny()["rewards"][1]["per_group"]
    entry = raw["rewards"][1]
    entry["per_group"] = [3 * x for x in entry["per_group"]]
    with pytest.raises(ValueError) as info:  # predicted_gain_per_update = 100 lr sum(per_group) still holds it
        _read(_saved(tmp_path, raw))
    assert "field rewards[1].predicted_gain_per_update (reward 'mc_value') is 3.788653629494364, but " in str(
        info.value)
    assert "(predicted_gain_per_update = 100 x lr x sum(per_group), lr = 0.0001, as the probe writes it)" in str(
        info.value)
    for key in ("predicted_gain_per_update", "lr", "num_groups"):  # an entry that records none of them
        del entry[key]
    assert _read(_saved(tmp_path, raw))[0]["rewards"]["mc_value"]["per_group"] == entry["per_group"]


def test_a_multi_batch_probe_checks_each_batch_at_the_probes_lr_and_its_pooled_entries(tmp_path):
    raw = _heldout_pair()
    assert [len(b["rewards"][0]["per_group"]) for b in raw["batches"]] == [16, 16]
    assert len(probe_batches_of(raw)) == 2 and list(pooled_entries(raw)) == ["outcome", "mc_value", "hybrid_0.5"]
    edited = copy.deepcopy(raw)
    entry = edited["batches"][1]["rewards"][1]
    assert "lr" not in entry and "inner_product" in entry
    del entry["inner_product"]
    entry["per_group"] = [3 * x for x in entry["per_group"]]
    with pytest.raises(ValueError, match=r"^probe\.json field batches\[1\]\.rewards\[1\]\.predicted_gain_per_update "
                                         r"\(reward 'mc_value'\) is .*lr = 0\.0001"):
        probe_batches_of(edited)
    edited = copy.deepcopy(raw)
    pooled = edited["rewards"][0]
    pooled["signal_proxy_per_group"] = [2 * x for x in pooled["signal_proxy_per_group"]]
    for read in (probe_batches_of, pooled_entries):  # the forecast's reader checks the pooled entries too
        with pytest.raises(ValueError, match=r"^probe\.json field rewards\[0\]\.signal_proxy \(reward 'outcome'\) "
                                             r"is .*the mean over its 2 batches of sum\(signal_proxy_per_group\)"):
            read(edited)

