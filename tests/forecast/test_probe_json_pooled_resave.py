"""A probe.json re-saved with its floats rounded to 6, 7 or 8 significant digits still reads; a real edit does not.

A breaker re-saved a probe.json after ``float(f"{x:.8g}")`` of every float: the 1e-9 tolerance of the summary
checks refused it as edited. The tolerance now follows the digits the file's numbers hold
(:func:`gradprobe.forecast.probe_input._tolerance`): 1e-9 of the terms' magnitudes in a file as the probe writes
it, 5 x 10^(1-d) in one rounded to d >= 6 digits (rounding moves a sum of terms by at most 0.5 x 10^(1-d) of their
magnitudes, and each other number of a formula by as much of itself); one per_group value doubled, or a sum moved by
a tenth of its terms' magnitudes, is refused at any of these precisions.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from gradprobe.forecast.probe_input import pooled_entries, probe_batches_of

from helpers_probe_json import map_floats, pooled_shipped as _pooled, refusal as _refusal

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(ROOT.glob("data/**/probe.json"))
TINY = ROOT / "data" / "study_tiny" / "probe" / "probe.json"


def _rounded(value, digits: int):
    """``value`` with every float rounded to ``digits`` significant digits (what a re-save at that precision does)."""
    return map_floats(value, lambda x: float(f"{x:.{digits}g}"))


def _resaved(raw: dict, digits: int) -> dict:
    return json.loads(json.dumps(_rounded(raw, digits)))


def test_every_shipped_probe_json_and_a_pooled_one_read_after_a_resave_at_6_7_and_8_digits():
    assert len(SHIPPED) >= 21
    files = [(path, json.loads(path.read_text())) for path in SHIPPED] + [(Path("pooled/probe.json"), _pooled())]
    for path, raw in files:
        for digits in (8, 7, 6):
            resaved = _resaved(raw, digits)
            batches = probe_batches_of(resaved, source=path)  # was: refused as edited (inner_product 111.62001 ...)
            first = (resaved.get("batches") or [resaved])[0]["rewards"][0]
            assert batches[0]["rewards"][first["name"]]["per_group"] == first["per_group"], (path, digits)
            assert list(pooled_entries(resaved, path)) == ([e["name"] for e in raw["rewards"]] if "batches" in raw
                                                            else [])
    tiny = _resaved(json.loads(TINY.read_text()), 6)
    assert tiny["rewards"][0]["inner_product"] == 111.62 != math.fsum(tiny["rewards"][0]["per_group"])


def test_in_a_resaved_file_a_doubled_per_group_value_or_a_sum_moved_by_a_tenth_is_refused():
    for digits in (8, 7, 6):
        raw = _resaved(json.loads(TINY.read_text()), digits)
        entry = raw["rewards"][1]
        per = list(entry["per_group"])
        j = max(range(len(per)), key=lambda i: abs(per[i]))
        entry["per_group"][j] *= 2
        text = _refusal(raw, TINY)
        assert text.startswith(f"{TINY} field rewards[1].inner_product (reward 'mc_value') is "
                               f"{entry['inner_product']!r}, but rewards[1]'s per-group lists give "
                               f"{math.fsum(entry['per_group'])!r} (inner_product = sum(per_group)"), (digits, text)
        entry["per_group"] = per
        moved = float(f"{entry['inner_product'] + 0.1 * math.fsum(map(abs, per)):.{digits}g}")
        entry["inner_product"] = moved
        assert _refusal(raw, TINY).startswith(f"{TINY} field rewards[1].inner_product (reward 'mc_value') is "
                                              f"{moved!r}, but rewards[1]'s per-group lists give "), digits
        pooled = _resaved(_pooled(), digits)  # a pooled file: a batch's edit, sums included, is refused too
        batch = pooled["batches"][1]["rewards"][1]
        batch["per_group"][0] *= 2
        batch["inner_product"] = float(f"{math.fsum(batch['per_group']):.{digits}g}")
        batch["predicted_gain_per_update"] = float(f"{1e-2 * batch['inner_product']:.{digits}g}")
        assert _refusal(pooled).startswith(f"probe.json field rewards[1].inner_product (reward 'mc_value') is "
                                           f"{pooled['rewards'][1]['inner_product']!r}, but its batches give "), digits


def test_the_tolerance_follows_the_digits_the_file_holds():
    raw = json.loads(TINY.read_text())
    magnitude = math.fsum(map(abs, raw["rewards"][1]["per_group"]))

    def moved(source: dict, fraction: float, digits: int | None) -> dict:
        out = json.loads(json.dumps(source))
        value = out["rewards"][1]["inner_product"] + fraction * magnitude
        out["rewards"][1]["inner_product"] = value if digits is None else float(f"{value:.{digits}g}")
        return out

    assert "rewards[1].inner_product" in _refusal(moved(raw, 1e-6, None))  # as written: 1e-9 of the magnitudes
    at8, at6 = _resaved(raw, 8), _resaved(raw, 6)
    probe_batches_of(moved(at8, 1e-7, 8))  # below 5e-7 at 8 digits: unseen
    assert "rewards[1].inner_product" in _refusal(moved(at8, 1e-5, 8))
    probe_batches_of(moved(at6, 1e-5, 6))  # below 5e-5 at 6 digits: unseen
    assert "rewards[1].inner_product" in _refusal(moved(at6, 1e-4, 6))
    # a value written at full precision into a rounded file is held to the file-as-written tolerance
    assert "rewards[1].inner_product" in _refusal(moved(at6, 1e-5, None))
