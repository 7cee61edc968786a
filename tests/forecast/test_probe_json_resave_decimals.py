"""A probe.json re-saved with its floats rounded to D >= 4 decimal places still reads; a real edit does not.

A tester re-saved a ``--probe-batches 2`` probe.json with ``pd.Series(json.load(f)).to_json(path)`` (pandas rounds to
10 decimal places, not significant digits) and with ``round(x, n)``: the summary checks, whose tolerance followed
only the significant digits the file holds, refused it (``signal_proxy_per_group[4] is 0.0307710953, but its
batches give 0.03077109525``). The tolerance now adds the file's decimal resolution
(:func:`gradprobe.forecast.probe_input._tolerance`): 0.5 x 10^-D per rounded number, D the most decimals any of the
compared numbers holds, so a full-precision file is held as tightly as before and a doubled value or a sum moved by
a tenth of its terms' magnitudes is refused at every rounding that keeps 4 or more decimals.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from pandas.io.json import ujson_dumps

from gradprobe.forecast.probe_input import pooled_entries, probe_batches_of

from helpers_probe_json import map_floats, pooled_shipped as _pooled, refusal as _refusal

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(ROOT.glob("data/**/probe.json"))
TINY = ROOT / "data" / "study_tiny" / "probe" / "probe.json"


def _rounded(value, places: int):
    """``value`` with every finite float rounded to ``places`` decimal places (``round(x, places)``)."""
    return map_floats(value, lambda x: round(x, places) if math.isfinite(x) else x)


def _resaved(raw: dict, places: int) -> dict:
    return json.loads(json.dumps(_rounded(raw, places)))


def test_pandas_to_json_of_a_pooled_probe_reads():
    raw = _pooled()
    for text in (pd.Series(raw).to_json(), ujson_dumps(raw)):  # pandas' default: 10 decimal places
        resaved = json.loads(text)
        per = resaved["rewards"][1]["per_group"]
        assert per[:2] == [-27.5051781906, -0.475046778] != raw["rewards"][1]["per_group"][:2]
        batches = probe_batches_of(resaved, source=Path("p/probe.json"))  # was: refused as edited
        assert batches[1]["rewards"]["mc_value"]["per_group"] == resaved["batches"][1]["rewards"][1]["per_group"]
        assert list(pooled_entries(resaved)) == ["outcome", "mc_value", "hybrid_0.5"]


def test_every_shipped_probe_json_and_a_pooled_one_read_after_rounding_to_4_to_10_decimals():
    assert len(SHIPPED) >= 21
    files = [(path, json.loads(path.read_text())) for path in SHIPPED] + [(Path("pooled/probe.json"), _pooled())]
    refused_before = 0
    for path, raw in files:
        for places in range(4, 11):
            resaved = _resaved(raw, places)
            first = (resaved.get("batches") or [resaved])[0]["rewards"][0]
            batches = probe_batches_of(resaved, source=path)
            assert batches[0]["rewards"][first["name"]]["per_group"] == first["per_group"], (path, places)
            refused_before += math.fsum(first["per_group"]) != first["inner_product"]
    assert refused_before > 0  # the sums the file holds are not its rounded terms' sums: rounding moved them


@pytest.mark.parametrize("places", [4, 5, 6, 8, 10])
def test_in_a_file_rounded_to_decimals_a_doubled_value_or_a_sum_moved_by_a_tenth_is_refused(places):
    raw = _resaved(json.loads(TINY.read_text()), places)
    entry = raw["rewards"][1]
    per = list(entry["per_group"])
    j = max(range(len(per)), key=lambda i: abs(per[i]))
    entry["per_group"][j] *= 2
    assert _refusal(raw, TINY).startswith(f"{TINY} field rewards[1].inner_product (reward 'mc_value') is "
                                          f"{entry['inner_product']!r}, but rewards[1]'s per-group lists give "
                                          f"{math.fsum(entry['per_group'])!r} (inner_product = sum(per_group)")
    entry["per_group"] = per
    entry["inner_product"] = round(entry["inner_product"] + 0.1 * math.fsum(map(abs, per)), places)
    assert _refusal(raw, TINY).startswith(f"{TINY} field rewards[1].inner_product (reward 'mc_value') is "
                                          f"{entry['inner_product']!r}, but ")
    pooled = _resaved(_pooled(), places)  # a batch's edit, its sums made to agree, is refused at the pooled entry
    batch = pooled["batches"][1]["rewards"][1]
    batch["per_group"][0] *= 2
    batch["inner_product"] = round(math.fsum(batch["per_group"]), places)
    batch["predicted_gain_per_update"] = round(1e-2 * batch["inner_product"], places)
    assert _refusal(pooled).startswith(f"probe.json field rewards[1].inner_product (reward 'mc_value') is "
                                       f"{pooled['rewards'][1]['inner_product']!r}, but its batches give ")
    pooled = _resaved(_pooled(), places)  # one pooled list value doubled alone
    spg = pooled["rewards"][0]["signal_proxy_per_group"]
    k = max(range(len(spg)), key=lambda i: spg[i])
    spg[k] *= 2
    assert _refusal(pooled).startswith("probe.json field rewards[0].signal_proxy")


def test_the_decimal_tolerance_is_the_files_resolution():
    raw = json.loads(TINY.read_text())
    magnitude = math.fsum(map(abs, raw["rewards"][1]["per_group"]))

    def moved(source: dict, by: float) -> dict:
        out = json.loads(json.dumps(source))
        out["rewards"][1]["inner_product"] += by
        return out

    # as written (14 or more decimals): one-millionth of the magnitudes is refused, as before
    assert "rewards[1].inner_product" in _refusal(moved(raw, 1e-6 * magnitude))
    at10, at4 = _resaved(raw, 10), _resaved(raw, 4)
    assert "rewards[1].inner_product" in _refusal(moved(at10, 1e-6 * magnitude))  # 10 places: still refused
    assert len(raw["rewards"][1]["per_group"]) == 16  # a sum of 16 rounded terms: (16 + 1) x 0.5e-4 = 8.5e-4 at 4
    probe_batches_of(moved(at4, 5e-4))  # below the 4-place bound: unseen
    assert "rewards[1].inner_product" in _refusal(moved(at4, 2e-3))
    assert 2e-3 < 1e-5 * magnitude  # what goes unseen at 4 places is far below a tenth of the magnitudes
