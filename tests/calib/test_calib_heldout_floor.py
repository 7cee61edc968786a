"""The seed-noise floor on larger held-out sets (calib.noise_floor.heldout_floor) and the per-item paired
differences it reads (gradprobe.study.power.paired_item_differences), on hand-made study folders whose item
results are known exactly (study_helpers), and the benchmark line it feeds on the shipped studies."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np
import pytest

from calib.noise_floor import NO_ITEM_FILES, heldout_floor, pool_heldout_floors
from gradprobe.study.power import paired_item_differences
from gradprobe.study.reading import AnalysisError

from conftest import load_benchmark
from study_helpers import ITEMS, SEEDS, aggregate_items, item_string, make_study

REPO = Path(__file__).resolve().parents[2]

# each run's correct-item count at its final eval (study_helpers.evals), where the 1000-token budget is read
FINAL_K = {"grpo": lambda s: 16 + s % 3, "mc_value": lambda s: 14 + s % 2,
           "grpo_2xlr": lambda s: 17 + s % 3 + (s == 2)}


def hand_D(arm: str) -> np.ndarray:
    """(seeds, items) paired per-item differences from grpo, points, from the item strings themselves."""
    vec = lambda s, k: np.array([float(c) for c in item_string(s, k)])  # noqa: E731
    return 100.0 * np.stack([vec(s, FINAL_K[arm](s)) - vec(s, FINAL_K["grpo"](s)) for s in range(SEEDS)])


def slow_components(D: np.ndarray) -> tuple[float, float]:
    """(seed, interaction) variances by explicit float64 loops over the moment identities of the two-way model:
    V1 = mean over seeds of the item variance, V2 = item variance of the seed means, P = variance of the seed
    means; interaction = (V1 - V2) n / (n - 1) capped at N P, seed = P - interaction / N."""
    n, N = D.shape

    def var(xs):
        m = math.fsum(xs) / len(xs)
        return math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1)

    v1 = math.fsum(var([float(D[s, i]) for i in range(N)]) for s in range(n)) / n
    v2 = var([math.fsum(float(D[s, i]) for s in range(n)) / n for i in range(N)])
    p = var([math.fsum(float(D[s, i]) for i in range(N)) / N for s in range(n)])
    inter = min(max(0.0, (v1 - v2) * n / (n - 1)), N * p)
    return max(0.0, p - inter / N), inter


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return make_study(tmp_path_factory.mktemp("heldout") / "study")


def test_paired_item_differences_are_the_final_evals_items_minus_grpos(study):
    pairs = paired_item_differences(study)
    assert sorted(pairs) == ["grpo_2xlr", "mc_value"]
    for arm, pc in pairs.items():
        D = hand_D(arm)
        assert pc["items"] == ITEMS and pc["D"].shape == (SEEDS, ITEMS)
        np.testing.assert_array_equal(pc["D"], D)
        expected = [100.0 * (FINAL_K[arm](s) - FINAL_K["grpo"](s)) / ITEMS for s in range(SEEDS)]
        np.testing.assert_allclose(pc["diffs"], expected, rtol=0, atol=1e-12)


def test_the_same_from_the_gzipped_items_a_finished_study_keeps(tmp_path, study):
    gz = make_study(tmp_path / "gz")
    aggregate_items(gz)
    a, b = paired_item_differences(study), paired_item_differences(gz)
    for arm in a:
        np.testing.assert_array_equal(a[arm]["D"], b[arm]["D"])


def test_floors_are_the_half_normal_mean_of_the_two_way_components_in_float64(study):
    multiples = (1.0, 2.5, 4.0, math.inf)
    r = heldout_floor([study], multiples=multiples, resamples=2000)
    assert r["runs"] == 2 * SEEDS and r["skipped"] == []
    c = math.sqrt(2.0 / math.pi)
    for a in r["arms"]:
        D = hand_D(a["arm"])
        seed, inter = slow_components(D)
        assert a["seed_var"] == pytest.approx(seed, rel=1e-9, abs=1e-9)
        assert a["interaction_var"] == pytest.approx(inter, rel=1e-9)
        for m in multiples:
            assert a["floor"][m] == pytest.approx(c * math.sqrt(seed + inter / (m * ITEMS)), rel=1e-9, abs=1e-12)
        # at the study's own N the model gives back the observed spread of the seeds' gains exactly
        assert a["floor"][1.0] == pytest.approx(c * np.std(D.mean(axis=1), ddof=1), rel=1e-12)
        assert a["floor"][math.inf] == pytest.approx(c * math.sqrt(seed), rel=1e-12, abs=1e-12)
        assert a["heldout_share"] == pytest.approx(inter / ITEMS / (seed + inter / ITEMS), rel=1e-9)
        floors = [a["floor"][m] for m in multiples]
        assert floors == sorted(floors, reverse=True)  # more items never raise the floor
    # run level: the mean over runs (each arm SEEDS times) of the arms' floors; one study gives no interval
    for f in r["floors"]:
        assert f["estimate"] == pytest.approx(np.mean([a["floor"][f["multiple"]] for a in r["arms"]]), rel=1e-12)
        assert f["interval"] is None and f["reason"]


def test_items_shared_by_every_seed_are_not_seed_noise():
    """Adding the same per-item offset b_i to every seed's differences (an item effect) changes neither the seeds'
    spread nor the floor at any size; it would only move the arm's mean on this held-out set."""
    from gradprobe.study.power import variance_components

    rng = np.random.default_rng(3)
    D = rng.normal(0.0, 40.0, (6, 500)) + rng.normal(0.0, 2.0, (6, 1))
    shifted = D + rng.normal(0.0, 30.0, (1, 500))
    a, b = variance_components(D), variance_components(shifted)
    assert a["seed"] == pytest.approx(b["seed"], rel=1e-9, abs=1e-9)
    assert a["interaction"] == pytest.approx(b["interaction"], rel=1e-9)


def test_keep_and_what_is_skipped(tmp_path, study):
    # make_study records plan_sha256 "x": the study is named as calib's rows name it, FOLDER@SHA12
    r = heldout_floor([study], keep={("study@x", "mc_value")}, resamples=2000)
    assert [(a["study"], a["arm"]) for a in r["arms"]] == [("study@x", "mc_value")] and r["runs"] == SEEDS
    assert heldout_floor([study], keep={("study", "mc_value")}, resamples=2000)["arms"] == []  # the folder alone is not a key
    bare = make_study(tmp_path / "bare", items=False)
    r = heldout_floor([study, bare], resamples=2000)
    assert r["runs"] == 2 * SEEDS
    why = "no per-item results at the evals read (the study folder has no eval_items.jsonl.gz and no "
    why += "runs/ARM/seedS/eval_items.jsonl: its runs saved no per-item results; a study run again with this version "
    assert r["skipped"] == [f"bare@x/grpo_2xlr: {why}saves them)", f"bare@x/mc_value: {why}saves them)"]
    assert NO_ITEM_FILES in r["skipped"][0]
    partial = make_study(tmp_path / "partial")  # per-item files, but none for one arm: the suffix would mislead
    for path in partial.glob("runs/mc_value/seed*/eval_items.jsonl"):
        path.unlink()
    r = heldout_floor([partial], resamples=2000)
    assert r["skipped"] == ["partial@x/mc_value: no per-item results at the evals read"]
    assert [a["arm"] for a in r["arms"]] == ["grpo_2xlr"]
    one = make_study(tmp_path / "one", seeds=1)
    r = heldout_floor([one], resamples=2000)
    assert r["arms"] == [] and r["runs"] == 0 and math.isnan(r["heldout_share"])
    assert r["skipped"] == ["one@x/grpo_2xlr: fewer than 2 seeds paired with grpo",
                            "one@x/mc_value: fewer than 2 seeds paired with grpo"]
    assert all(math.isnan(f["estimate"]) and f["interval"] is None and "seed" in f["reason"] for f in r["floors"])


def test_a_folder_that_cannot_be_split_is_named_and_the_others_are_still_split(tmp_path, study):
    """Nothing is lost to one bad folder: a missing folder, one without study.json and one without a grpo arm are
    each listed with why, beside the split of the good one."""
    no_json = make_study(tmp_path / "nojson")
    (no_json / "study.json").unlink()
    r = heldout_floor([tmp_path / "nothing", no_json, study], resamples=2000)
    assert [a["study"] for a in r["arms"]] == ["study@x", "study@x"]
    assert r["skipped"][0].startswith(f"nothing: {tmp_path / 'nothing'}/study.json is missing")
    assert r["skipped"][1].startswith(f"nojson: {no_json}/study.json is missing")
    for i, damage in enumerate((b"not gzip at all", gzip.compress(b'{"arm": "grpo", "seed": 0, "upd'),
                                gzip.compress(b'{"arm": "grpo", "seed": 0}\n'))):
        broken = make_study(tmp_path / "broken")
        aggregate_items(broken)
        (broken / "eval_items.jsonl.gz").write_bytes(damage)
        r = heldout_floor([broken, study], resamples=2000)
        assert [a["study"] for a in r["arms"]] == ["study@x", "study@x"] and len(r["skipped"]) == 1
        if i < 2:  # not gzip, or a line cut: gradprobe.study.reading refuses a file it cannot read
            assert r["skipped"][0].startswith(f"broken: {broken / 'eval_items.jsonl.gz'} cannot be read (")
            assert "the per-item results were cut or damaged; restore the file from the study" in r["skipped"][0]
        else:  # read, but its lines lack fields
            assert r["skipped"][0].startswith("broken: its per-item results cannot be read (")
            assert r["skipped"][0].endswith("); restore eval_items.jsonl.gz from the study")
    with pytest.raises(AnalysisError, match=r"has no 'outcome_arm' arm \(arms: \['grpo', 'grpo_2xlr', 'mc_value'\]\)"):
        paired_item_differences(study, control="outcome_arm")
    r = heldout_floor([study], reference_arm="outcome_arm", resamples=2000)
    assert r["arms"] == [] and r["skipped"] == [f"study: {study}/runs.csv has no 'outcome_arm' arm (arms: ['grpo', "
                                                "'grpo_2xlr', 'mc_value']); pass the arm the others are paired with"]


def test_pooling_each_studys_split_equals_splitting_the_studies_together(tmp_path, study):
    """What benchmarks/unseen_study.py prints per study and then pooled: the pool of the per-study results is
    the split of all folders at once (same arms, skips, floors and intervals), with no per-item file read again."""
    other = make_study(tmp_path / "other", seeds=4)
    bare = make_study(tmp_path / "bare", items=False)
    keep = {("study@x", "mc_value"), ("study@x", "grpo_2xlr"), ("other@x", "mc_value"), ("bare@x", "mc_value")}
    dirs = [study, other, bare, tmp_path / "nothing"]
    whole = heldout_floor(dirs, keep=keep, resamples=2000)
    parts = [heldout_floor([d], keep=keep, resamples=2000) for d in dirs]
    for d in dirs:
        for f in d.glob("**/eval_items.jsonl*"):
            f.unlink()  # the pool reads no file
    pooled = pool_heldout_floors(parts, resamples=2000)
    assert pooled["arms"] == whole["arms"] and pooled["skipped"] == whole["skipped"] and len(pooled["skipped"]) == 2
    assert pooled["runs"] == whole["runs"] == 2 * SEEDS + 4
    assert pooled["heldout_share"] == pytest.approx(whole["heldout_share"], rel=1e-12)
    for p, w in zip(pooled["floors"], whole["floors"], strict=True):
        assert p["multiple"] == w["multiple"] and p["estimate"] == pytest.approx(w["estimate"], rel=1e-12)
        assert p["interval"] == pytest.approx(w["interval"], rel=1e-12)
    with pytest.raises(ValueError, match=r"the results hold no floor on 2N held-out items; compute each study's "
                                         r"heldout_floor with multiples=\[1\.0, 2\.0\]"):
        pool_heldout_floors(parts, multiples=(1.0, 2.0))
    with pytest.raises(ValueError, match=r"multiples must be held-out sizes"):
        pool_heldout_floors(parts, multiples=(0.0,))


@pytest.mark.parametrize("multiples", [(0.0,), (1.0, -2.0), (float("nan"),), ()])
def test_a_held_out_size_that_is_not_positive_is_refused(study, multiples):
    with pytest.raises(ValueError, match=r"multiples must be held-out sizes as multiples of each study's N, each > 0"):
        heldout_floor([study], multiples=multiples)


def test_the_benchmark_prints_the_figures_the_calibration_readme_quotes(capsys):
    module = load_benchmark("forecast_error_subsets")
    assert module.main([str(REPO / "data" / "calibration" / "report"), "--studies-root", str(REPO / "data")]) == 0
    out = capsys.readouterr().out
    readme = (REPO / "data" / "calibration" / "README.md").read_text()
    text = " ".join(readme.split())
    lines = [x.strip() for x in out.splitlines() if x.strip().startswith("two-way model")]
    shares = [x.strip() for x in out.splitlines() if x.strip().startswith("held-out share")]
    assert len(lines) == 2 and len(shares) == 2
    for line in lines + shares:
        assert " ".join(line.split()) in text, line


def test_the_shipped_report_records_the_split_of_its_common_runs():
    import json

    import pandas as pd

    from gradprobe.outputs import json_safe

    report = REPO / "data" / "calibration" / "report"
    metrics = json.loads((report / "metrics.json").read_text())
    rows = pd.read_csv(report / "rows.csv")
    common = rows[~rows["is_reference"] & np.isfinite(rows["target"])
                  & np.isfinite(rows[list(metrics["compared_forecasters"])]).all(axis=1)]
    assert len(common) == metrics["common_rows"] == 71
    dirs = [REPO / "data" / s.rsplit("@", 1)[0] for s in metrics["studies"]]
    expect = heldout_floor(dirs, keep=set(zip(common["study"], common["arm"])))
    got, want = metrics["heldout_floor"], json_safe(expect)  # the report's study order differs: sums in another order
    key = lambda a: (a["study"], a["arm"])  # noqa: E731
    assert sorted(got["arms"], key=key) == sorted(want["arms"], key=key)
    assert got["skipped"] == want["skipped"] and got["runs"] == want["runs"] and got["method"] == want["method"]
    assert got["heldout_share"] == pytest.approx(want["heldout_share"], rel=1e-12)
    for g, w in zip(got["floors"], want["floors"], strict=True):
        assert g["multiple"] == w["multiple"] and g["estimate"] == pytest.approx(w["estimate"], rel=1e-12)
        assert g["interval"] == pytest.approx(w["interval"], rel=1e-12)
    assert expect["runs"] == 67 and [f["multiple"] for f in expect["floors"]] == [1.0, 4.0, math.inf]
    assert expect["skipped"] == ["study_tiny_sparse@b30b502e2f0e/select_half: no per-item results at the evals read"
                                 + NO_ITEM_FILES]
    html = (report / "report.html").read_text()
    assert "How much of that floor is the held-out set (N = 1000 items" in html
    assert f"<tr><td>4N</td><td class=n>{expect['floors'][1]['estimate']:.2f}" in html
