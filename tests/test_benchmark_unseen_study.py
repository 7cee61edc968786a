"""``benchmarks/unseen_study.py``: one held-out study's errors from a `calib report` folder, checked against a
direct computation on the shipped report, and its refusals (no report, a prefix naming no or several studies)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
REPORT = REPO / "data" / "calibration" / "report"


def test_the_held_out_studys_errors_are_those_of_its_rows(unseen, capsys):
    assert unseen.main([str(REPORT), "--study", "study_tiny@", "--studies-root", str(REPO / "data")]) == 0
    out = capsys.readouterr().out
    d = pd.read_csv(REPORT / "cv_predictions.csv")
    d = d[(d["cv"] == "study") & d["study"].str.startswith("study_tiny@") & (d["arm"] != "grpo_2xlr")]
    for f in ("forecast_cost_only", "forecast_probe"):
        x = d[(d["forecaster"] == f) & (d["method"] == "none")]
        c = d[(d["forecaster"] == f) & (d["method"] == "linear")]
        assert len(x) == len(c) == 12
        mae, cal = np.abs(x["cv_pred"] - x["target"]).mean(), np.abs(c["cv_pred"] - c["target"]).mean()
        line = next(s for s in out.splitlines() if s.strip().startswith(f))
        assert f"as forecast {mae:.2f} [" in line and f"calibrated on the other studies {cal:.2f} [" in line
    assert out.startswith("study_tiny@b6b755233a8f held out: 12 runs of 3 arms;")  # grpo_2xlr: no probe forecast
    assert "two-way split on N = 1000 held-out items: N " in out


def test_the_interval_resamples_seeds_within_arms(unseen):
    errors = pd.Series([1.0, 1.0, 1.0, 5.0, 5.0, 5.0])
    arms = pd.Series(["a", "a", "a", "b", "b", "b"])
    m, (lo, hi) = unseen.seed_resampled_mean(errors, arms)
    assert m == 3.0 and lo == hi == 3.0  # each arm's seeds agree: resampling them changes nothing
    m, (lo, hi) = unseen.seed_resampled_mean(pd.Series([0.0, 2.0, 3.0, 3.0]), pd.Series(["a", "a", "b", "b"]))
    assert m == 2.0 and 1.5 - 1e-12 <= lo < m < hi <= 2.5 + 1e-12  # only arm a's two seeds vary: [1.5, 2.5]


def test_arm_mean_errors_and_their_paired_resamples(unseen):
    rows = pd.DataFrame({"forecaster": ["a"] * 4 + ["b"] * 4, "group": ["x", "x", "y", "y"] * 2,
                         "seed": [0, 1, 0, 1] * 2, "cv_pred": [1.0, 1.0, -2.0, -2.0, 0.0, 0.0, 0.0, 0.0],
                         "target": [0.0, 2.0, -1.0, -1.0] * 2})
    out = unseen.arm_mean_maes(rows, ["a", "b"], resamples=2000)
    # arm means 1.0 (x) and -1.0 (y): a is off by 0 and 1, b by 1 and 1
    assert out["a"][0] == pytest.approx(0.5) and out["b"][0] == pytest.approx(1.0)
    # y's seeds agree and b forecasts 0 for x, whose resampled means are 0, 1 or 2: |0 - mean| in [0, 2]
    assert out["b"][1] == pytest.approx((0.5, 1.5))
    # paired: the same resamples of x's seeds for both; with y fixed the difference b - a is
    # (|m| + 1)/2 - (|1 - m| + 1)/2, which is -0.5, +0.5 or +0.5 for m = 0, 1, 2
    diff = out["b"][2] - out["a"][2]
    assert set(np.round(diff, 12)) <= {-0.5, 0.5}


def test_arm_mean_errors_agree_with_calibs_arm_level_errors(unseen):
    """The estimate is calib.noise_floor.arm_level_errors' (only the interval differs: seeds, not studies)."""
    from calib.noise_floor import arm_level_errors

    d = pd.read_csv(REPORT / "cv_predictions.csv")
    d = d[(d["cv"] == "study") & (d["method"] == "none") & (d["arm"] != "grpo_2xlr")
          & d["study"].str.startswith(("study_tiny@", "study_tiny_hard_r"))
          & d["forecaster"].isin(["forecast_cost_only", "forecast_probe"])]
    out = unseen.arm_mean_maes(d.assign(group=d["study"] + "/" + d["arm"]), ["forecast_cost_only", "forecast_probe"],
                               resamples=200)
    for f in ("forecast_cost_only", "forecast_probe"):
        x = d[d["forecaster"] == f]
        ref = arm_level_errors(x["cv_pred"], x["target"], x["arm"], x["study"], resamples=10)
        assert ref["arms"] == 6 and out[f][0] == pytest.approx(ref["mae"]["estimate"], abs=1e-12)


@pytest.mark.parametrize("study, why", [("study_tiny_", "names 7 studies"), ("nothing", "names 0 studies")])
def test_a_prefix_must_name_one_study(unseen, capsys, study, why):
    assert unseen.main([str(REPORT), "--study", study]) == 2
    assert why in capsys.readouterr().err


def test_a_study_the_report_was_not_made_with_says_how_to_make_one(unseen, capsys):
    """The shipped report holds the nine calibration studies: an unseen study needs a report made with it."""
    assert unseen.main([str(REPORT), "--study", "study_tiny_hard_heldout4k", "--studies-root", str(REPO / "data")]) == 2
    err = capsys.readouterr().err
    assert "--study 'study_tiny_hard_heldout4k' names 0 studies of the report (none)" in err
    assert (f"; {REPO / 'data' / 'study_tiny_hard_heldout4k'} is a study the report was not made with: make a report "
            f"with it among its studies (`calib report data/study_... {REPO / 'data' / 'study_tiny_hard_heldout4k'} "
            "--out runs/report_unseen`") in err and err.count("\n") == 1
    assert unseen.main([str(REPORT), "--study", "nothing", "--studies-root", str(REPO / "data")]) == 2
    assert "is a study the report was not made with" not in capsys.readouterr().err  # no such folder either


def test_pooled_studies_count_every_run_once_and_resample_seeds_within_each_studys_arms(unseen, capsys):
    names = ["study_tiny@", "study_tiny_hard_rewards"]
    assert unseen.main([str(REPORT), *[a for n in names for a in ("--study", n)],
                        "--studies-root", str(REPO / "data")]) == 0
    out = capsys.readouterr().out
    pooled = out[out.index("pooled, 2 held-out studies: 24 runs of 6 arms;"):]
    d = pd.read_csv(REPORT / "cv_predictions.csv")
    d = d[(d["cv"] == "study") & (d["study"].str.startswith(names[0]) | d["study"].str.startswith(names[1]))
          & (d["arm"] != "grpo_2xlr")]
    for f in ("forecast_cost_only", "forecast_probe"):
        x = d[(d["forecaster"] == f) & (d["method"] == "none")]
        assert len(x) == 24
        err = (x["cv_pred"] - x["target"]).abs()
        m, (lo, hi) = unseen.seed_resampled_mean(err, x["study"] + "/" + x["arm"])
        line = next(s for s in pooled.splitlines() if s.strip().startswith(f))
        assert f"as forecast {err.mean():.2f} [{lo:.2f}, {hi:.2f}]" in line
        # each study's own block is printed before the pooled one, with its 12 runs
        per = [np.abs(x[x["study"].str.startswith(n)]["cv_pred"] - x[x["study"].str.startswith(n)]["target"]).mean()
               for n in names]
        assert err.mean() == pytest.approx(np.mean(per))  # 12 runs each: the pooled MAE is their mean
    assert out.index("study_tiny@b6b755233a8f held out: 12 runs") < out.index("study_tiny_hard_rewards@") < out.index(
        "pooled, 2 held-out studies")
    assert "6 arms of 2 studies; given without an interval" in pooled


def test_a_study_named_twice_is_refused(unseen, capsys):
    assert unseen.main([str(REPORT), "--study", "study_tiny@", "--study", "study_tiny@b6"]) == 2
    assert "names study_tiny@b6b755233a8f again; name each study once" in capsys.readouterr().err


@pytest.mark.parametrize("content, why", [
    ("", "cannot be read as a CSV"),
    ("a,b\n1,2\n", "lacks column(s) ['cv', 'study', 'arm', 'seed', 'forecaster', 'method', 'cv_pred', 'target']"),
    ("cv,study,arm,seed,forecaster,method,cv_pred,target\narm,s@1,a,0,forecast_cost_only,none,0,0\n",
     "has no leave-one-study-out rows (cv = study)"),
    ("cv,study,arm,seed,forecaster,method,cv_pred,target\nstudy,study_tiny@1,a,0,forecast_first_order,none,0,0\n",
     "forecasts with none of forecast_cost_only, forecast_probe, forecast_signal_proxy")])
def test_a_damaged_report_is_refused_in_one_line(unseen, capsys, tmp_path, content, why):
    (tmp_path / "cv_predictions.csv").write_text(content)
    assert unseen.main([str(tmp_path), "--study", "study_tiny", "--studies-root", str(REPO / "data")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and why in err, err


def test_the_report_file_instead_of_its_folder_and_a_wrong_studies_root(unseen, capsys, tmp_path):
    assert unseen.main([str(REPORT / "cv_predictions.csv"), "--study", "study_tiny@"]) == 2
    assert "is a file: REPORT is the `calib report` folder" in capsys.readouterr().err
    assert unseen.main([str(REPORT), "--study", "study_tiny@", "--studies-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'study_tiny'} is no study folder (no runs.csv); pass --studies-root" in err
    assert unseen.main([str(REPORT), "--study", "nonesuch", "--studies-root", str(REPO / "data")]) == 2
    assert "give a prefix that names one of study_reward_granularity@" in capsys.readouterr().err


def test_a_missing_report(unseen, capsys, tmp_path):
    assert unseen.main([str(tmp_path / "none"), "--study", "x"]) == 2
    assert capsys.readouterr().err.startswith(f"unseen_study: error: {tmp_path / 'none'}/cv_predictions.csv not found")


UNSEEN = ["study_tiny_heldout4k", "study_tiny_replicate_heldout4k", "study_tiny_replicate2_heldout4k",
          "study_tiny_hard_heldout4k", "study_tiny_hard_replicate_heldout4k", "study_tiny_llama_heldout4k",
          "study_tiny_llama_replicate_heldout4k", "study_tiny_losses_heldout4k",
          "study_tiny_losses_replicate_heldout4k"]
CELLS = {"study_tiny_heldout4k": 3, "study_tiny_hard_heldout4k": 2, "study_tiny_llama_heldout4k": 2,
         "study_tiny_losses_heldout4k": 2}  # studies each
CELL_ARMS = {c: ("bnpo", "cispo") if "losses" in c else ("mc_value", "hybrid_0.5") for c in CELLS}
CALIBRATION_STUDIES = ["study_tiny", "study_tiny_sparse", "study_tiny_hard_rewards", "study_tiny_lr",
                       "study_reward_granularity", "study_tiny_llama", "study_tiny_losses", "study_tiny_greso",
                       "study_tiny_guided"]
NAMES = (("forecast_cost_only", "cost only"), ("forecast_probe", "probe"), ("forecast_signal_proxy", "signal proxy"))


@pytest.fixture(scope="module")
def unseen_report(tmp_path_factory):
    """The `calib report` over the nine calibration studies and the nine on 4,000 held-out prompts, as the
    READMEs' commands make it."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("unseen") / "report"
    done = subprocess.run([sys.executable, "-m", "calib.cli", "report",
                           *[str(REPO / "data" / s) for s in CALIBRATION_STUDIES + UNSEEN], "--out", str(out)],
                          capture_output=True, text=True, timeout=900, cwd=out.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def _quoted(printed: str, readme: str) -> None:
    for f, name in NAMES:
        line = next(s for s in printed.splitlines() if s.strip().startswith(f))
        raw = line.split("as forecast ")[1].split("   ")[0]
        cal = line.split("calibrated on the other studies ")[1].strip()
        assert f"| {name} | {raw} | {cal} |" in readme, line


@pytest.mark.parametrize("study", UNSEEN)
def test_the_figures_each_unseen_studys_readme_quotes(unseen, unseen_report, capsys, study):
    """Each 4,000-prompt study's README quotes this command's output on the eighteen-study report (the commands in
    the README): each forecaster's line, the seed-noise floor and the two-way split at its own N."""
    assert unseen.main([str(unseen_report), "--study", study, "--studies-root", str(REPO / "data")]) == 0
    printed = capsys.readouterr().out
    readme = " ".join((REPO / "data" / study / "README.md").read_text().split())
    _quoted(printed, readme)
    floor = printed.split("seed-noise floor of the run-level MAE: ")[1].split(" ")[0]
    assert f"floor of this study's runs is {floor}" in readme
    own_n = printed.split("held-out items: N ")[1].split(" ")[0]
    assert f"gives {own_n} at its own 4,000 prompts" in readme


def test_the_pooled_figures_the_calibration_readme_quotes(unseen, unseen_report, capsys):
    args = [a for s in UNSEEN for a in ("--study", s)]
    assert unseen.main([str(unseen_report), *args, "--studies-root", str(REPO / "data")]) == 0
    printed = capsys.readouterr().out
    pooled = printed[printed.index("pooled, 9 held-out studies: 72 runs of 18 arms;"):]
    cell = pooled[pooled.index("on these cells' arm means (8 arms"):]
    for path in (REPO / "data" / "calibration" / "README.md", REPO / "README.md"):
        text = " ".join(path.read_text().split())
        section = text[text.lower().index("pooled over the nine"):]
        for f, name in NAMES[:2]:
            line = next(s for s in pooled.splitlines() if s.strip().startswith(f))
            raw = line.split("as forecast ")[1].split("   ")[0]
            cal = line.split("calibrated on the other studies ")[1].strip()
            assert f"{name} {raw} as forecast, {cal} calibrated" in section, (path, line)
        floor = pooled.split("seed-noise floor of the run-level MAE: ")[1].split(" ")[0]
        assert f"seed-noise floor is {floor}" in section, path
        for f, name in NAMES[:2]:  # the four replicated cells' eight arm means (12, 8, 8, 8 seeds)
            line = next(s for s in cell.splitlines() if s.strip().startswith(f))
            assert line.split(maxsplit=1)[1].split("   ")[0] in section, (path, line)
        for c in CELLS:  # the smallest effect each arm's seeds detect
            block = _cell_block(pooled, c)
            for arm in CELL_ARMS[c]:
                line = next(s for s in block.splitlines() if s.strip().startswith(arm + " ") and "detectable" in s)
                assert f"{line.split('detectable ')[1].split()[0]} ({arm})" in section, (path, c, line)


def _cell_block(printed: str, cell: str) -> str:
    """The "replicates pooled: CELL, ..." block of ``printed``, up to the next cell's block or the arm-mean lines."""
    block = printed[printed.index(f"replicates pooled: {cell}, "):]
    ends = [block.find(s, 1) for s in ("\nreplicates pooled: ", "\non these cells' arm means")]
    return block[:min(e for e in ends if e > 0)]


def test_replicates_of_one_plan_are_pooled_into_one_cell(unseen, unseen_report, capsys):
    """The cells of the studies that replicate data/study_tiny_heldout4k (the frontier cell),
    data/study_tiny_hard_heldout4k (the hard cell), data/study_tiny_llama_heldout4k (the Llama cell) and
    data/study_tiny_losses_heldout4k (the loss-type cell): every seed of an arm once, realized mean with its t
    interval, the replicates' mean forecast, and the error on the eight arm means of the four cells together."""
    from scipy import stats
    from statsmodels.stats.power import TTestPower  # 80% power, two-sided paired t at alpha 0.05

    cells = {c: [s for s in UNSEEN if unseen.cell_of(REPO / "data" / s) == c] for c in CELLS}
    assert {c: len(members) for c, members in cells.items()} == CELLS
    assert unseen.main([str(unseen_report), *[a for s in UNSEEN for a in ("--study", s)],
                        "--studies-root", str(REPO / "data")]) == 0
    printed = capsys.readouterr().out
    report = pd.read_csv(unseen_report / "cv_predictions.csv")
    report = report[(report["cv"] == "study") & (report["method"] == "none")]
    errors = {}
    for c, members in cells.items():
        assert f"replicates pooled: {c}, {len(members)} studies (" in printed
        block = _cell_block(printed, c)
        d = report[report["study"].str.split("@").str[0].isin(members)]
        for arm in CELL_ARMS[c]:
            t = d[(d["arm"] == arm) & (d["forecaster"] == "forecast_cost_only")]["target"].to_numpy()
            assert t.size == 4 * len(members)
            half = stats.t.ppf(0.975, t.size - 1) * t.std(ddof=1) / np.sqrt(t.size)
            line = next(s for s in block.splitlines() if s.strip().startswith(arm + " "))
            assert (f"{t.size} seeds   realized {t.mean():+.2f} [{t.mean() - half:+.2f}, {t.mean() + half:+.2f}]"
                    in line), line
            mde = t.std(ddof=1) * TTestPower().solve_power(nobs=t.size, alpha=0.05, power=0.8,
                                                           alternative="two-sided")
            assert f"detectable {mde:.2f}   forecast_cost_only" in line
            for f in ("forecast_cost_only", "forecast_probe"):
                fc = d[(d["arm"] == arm) & (d["forecaster"] == f)]["cv_pred"]
                assert fc.groupby(d["study"]).nunique().eq(1).all()  # one forecast per arm of each replicate
                assert f"{f} {fc.mean():+.2f}" in line
                errors.setdefault(f, []).append(abs(fc.mean() - t.mean()))
    assert printed.count("replicates pooled: ") == len(CELLS)
    tail = printed[printed.index("on these cells' arm means (8 arms"):]
    for f, e in errors.items():
        assert len(e) == 8
        line = next(s for s in tail.splitlines() if s.strip().startswith(f))
        assert line.split()[1] == f"{np.mean(e):.2f}"


def test_no_cell_without_a_replicate(unseen, capsys, tmp_path):
    assert unseen.cell_of(tmp_path) == tmp_path.name
    (tmp_path / "replicate_of.json").write_text('{"source": "/elsewhere/data/study_x", "seeds": [4]}')
    assert unseen.cell_of(tmp_path) == "study_x"
    assert unseen.main([str(REPORT), "--study", "study_tiny@", "--study", "study_tiny_hard_rewards",
                        "--studies-root", str(REPO / "data")]) == 0
    assert "replicates pooled" not in capsys.readouterr().out


@pytest.mark.parametrize("content, why", [
    ("{not json", "is not a JSON object (JSONDecodeError)"), ("", "is not a JSON object (JSONDecodeError)"),
    ("[1, 2]", "is not a JSON object (AttributeError)"), ('{"seeds": [4]}', "has no 'source' path"),
    ('{"source": 7}', "has no 'source' path of the replicated study (got 7)"),
    ('{"source": "/tmp/x/study_tiny", "source_plan_sha256": "000"}',
     "records source_plan_sha256 000, but {root}/study_tiny/study.json has plan sha256 b6b755233a8f: the folder "
     "does not replicate that study's plan, so it cannot be pooled with it")])
def test_a_damaged_replicate_of_json_is_refused_in_one_line_before_any_output(unseen, capsys, tmp_path, content,
                                                                                why):
    for name in ("study_tiny", "study_tiny_hard_rewards"):
        shutil.copytree(REPO / "data" / name, tmp_path / name, ignore=shutil.ignore_patterns("figures"))
    (tmp_path / "study_tiny_hard_rewards" / "replicate_of.json").write_text(content)
    assert unseen.main([str(REPORT), "--study", "study_tiny@", "--study", "study_tiny_hard_rewards",
                        "--studies-root", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    why = why.format(root=tmp_path)
    assert out == "" and err.count("\n") == 1 and why in err and "replicate_of.json" in err, err


def test_a_study_without_per_item_results_is_named_and_the_pooled_split_says_on_how_many(unseen, capsys, tmp_path):
    for name in ("study_tiny", "study_tiny_hard_rewards"):
        shutil.copytree(REPO / "data" / name, tmp_path / name, ignore=shutil.ignore_patterns("figures"))
    (tmp_path / "study_tiny_hard_rewards" / "eval_items.jsonl.gz").unlink()
    assert unseen.main([str(REPORT), "--study", "study_tiny@", "--study", "study_tiny_hard_rewards",
                        "--studies-root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    pooled = out[out.index("pooled, 2 held-out studies"):]
    assert "two-way split (on 1 of 2 studies) on N = 1000 held-out items: N " in pooled
    assert "not split: study_tiny_hard_rewards@" in pooled and "no per-item results at the evals read" in pooled
    assert out.count("two-way split on N = 1000") == 1  # study_tiny's own block; the other study's has none


def test_a_study_named_by_its_whole_folder_name_wins_over_longer_names(unseen, capsys):
    """`--study study_tiny` is the folder data/study_tiny, though study_tiny_hard_rewards starts with it too; a
    prefix of several folders' names (none of them whole) is still refused."""
    assert unseen.main([str(REPORT), "--study", "study_tiny", "--studies-root", str(REPO / "data")]) == 0
    assert capsys.readouterr().out.startswith("study_tiny@")
    assert unseen.main([str(REPORT), "--study", "study_tiny_", "--studies-root", str(REPO / "data")]) == 2
    assert "give a prefix that names one of" in capsys.readouterr().err


def _block(printed: str, start: str) -> list:
    """The indented lines after the line of ``printed`` that starts with ``start``."""
    lines = printed.splitlines()
    i = next(k for k, s in enumerate(lines) if s.startswith(start))
    out = []
    for s in lines[i + 1:]:
        if not s.startswith("  "):
            break
        out.append(s)
    return out


def test_the_coverage_of_the_held_out_studies_counts_their_runs_inside_the_reports_intervals(unseen, unseen_report,
                                                                                             capsys):
    assert unseen.main([str(unseen_report), *[a for s in UNSEEN for a in ("--study", s)],
                        "--studies-root", str(REPO / "data")]) == 0
    lines = _block(capsys.readouterr().out, "coverage of the report's 90% (cv_plus) intervals")
    d = pd.read_csv(unseen_report / "cv_predictions.csv")
    d = d[(d["cv"] == "study") & d["study"].str.split("@").str[0].isin(UNSEEN)]
    assert [s.split()[0] for s in lines] == ["forecast_cost_only", "forecast_probe", "forecast_signal_proxy"]
    for line in lines:
        f = line.split()[0]
        for method, label in (("none", "as forecast"), ("linear", "calibrated on the other studies")):
            x = d[(d["forecaster"] == f) & (d["method"] == method)]
            inside = int(((x["cv_lower"] <= x["target"]) & (x["target"] <= x["cv_upper"])).sum())
            assert len(x) == 72 and f"{label} {inside / 72:.2f} [" in line and f"({inside} of 72)" in line, line


def _pooled_tau(table: pd.DataFrame, column: str) -> float:
    """Kendall tau-b of ``column`` against realized within each study, averaged with weights n(n-1)/2, by scipy."""
    from scipy import stats

    taus, weights = [], []
    for _, t in table.groupby("study"):
        if t[column].nunique() > 1 and t["realized"].nunique() > 1:
            taus.append(stats.kendalltau(t[column], t["realized"]).statistic)
            weights.append(len(t) * (len(t) - 1) / 2)
    return float(np.average(taus, weights=weights))


def test_the_ranking_table_ranks_grpo_at_zero_and_averages_each_arms_seeds(unseen):
    rows = []
    for key, gains in (("s1", {"a": (-1.0, -3.0), "b": (2.0, 4.0)}), ("s2", {"a": (1.0, 1.0), "b": (-2.0, 0.0)})):
        for arm, (g0, g1) in gains.items():
            for seed, g in enumerate((g0, g1)):
                for f, pred in (("forecast_cost_only", 0.0 if key == "s2" else {"a": -1.0, "b": 1.0}[arm]),
                                ("forecast_probe", {"a": 0.5, "b": -0.5}[arm] + seed)):
                    for method, shift in (("none", 0.0), ("linear", -1.0)):
                        rows.append(dict(key=key, study=f"{key}@x", arm=arm, seed=seed, forecaster=f, method=method,
                                         cv_pred=pred + shift, target=g))
    t = unseen.ranking_table_of(pd.DataFrame(rows), ["forecast_cost_only", "forecast_probe"])
    assert list(t["study"]) == ["s1"] * 3 + ["s2"] * 3
    assert list(t["arm"]) == ["b", "grpo", "a", "a", "grpo", "b"]  # calib's order: by realized rank within a study
    t = t.set_index(["study", "arm"])
    assert t.loc[("s1", "b"), "realized"] == 3.0 and t.loc[("s1", "a"), "realized_se"] == pytest.approx(1.0)
    assert t.loc[("s1", "a"), "forecast_probe"] == 1.0 and t.loc[("s2", "a"), "forecast_cost_only"] == 0.0
    assert not [c for c in t.columns if "calibrated" in c]  # a held-out study's calibration is not ranked
    grpo = t.xs("grpo", level="arm")
    assert (grpo[["realized", "realized_se", "forecast_cost_only", "forecast_probe"]] == 0.0).all().all()
    assert list(grpo["seeds"]) == [2, 2]


def test_the_held_out_ranking_is_the_within_study_kendall_tau_pooled_by_pairs(unseen, unseen_report, capsys):
    """Each printed tau is the pairs-weighted mean of scipy's per-study tau-b; its interval, p and ceiling are calib's
    pooled_rank_agreement on calib's ranking_table of the same runs (grpo at 0 for every seed)."""
    import re

    from calib.metrics import p_value_text, pooled_rank_agreement, ranking_table

    assert unseen.main([str(unseen_report), *[a for s in UNSEEN for a in ("--study", s)],
                        "--studies-root", str(REPO / "data")]) == 0
    printed = capsys.readouterr().out
    lines = _block(printed, "within-study ranking (9 studies)")
    d = pd.read_csv(unseen_report / "cv_predictions.csv")
    d = d[(d["cv"] == "study") & d["study"].str.split("@").str[0].isin(UNSEEN) & (d["method"] == "none")]
    runs = d[d["forecaster"] == "forecast_cost_only"]
    assert [s.split()[0] for s in lines] == ["forecast_cost_only", "forecast_probe", "forecast_signal_proxy"]
    for line in lines:
        f = line.split()[0]
        x = d[d["forecaster"] == f]
        means = pd.DataFrame({"realized": runs.groupby(["study", "arm"])["target"].mean(),
                              f: x.groupby(["study", "arm"])["cv_pred"].mean()}).reset_index()
        means = pd.concat([means, pd.DataFrame({"study": sorted(set(means["study"])), "arm": "grpo", "realized": 0.0,
                                                f: 0.0})])
        tau, iv, p, arms, n, ceiling = re.search(r"(\S+) (\[\S+, \S+\]) \(p (.+); (\d+) arms in (\d+); ceiling (\S+);",
                                                 line).groups()
        assert tau == f"{_pooled_tau(means, f):+.2f}", line
        rows = x[["study", "arm", "seed", "target", "cv_pred"]].rename(columns={"cv_pred": f})
        grpo = rows[["study", "seed"]].drop_duplicates().assign(arm="grpo", target=0.0, **{f: 0.0})
        r = pooled_rank_agreement(ranking_table(pd.concat([rows, grpo]), [f]), f)
        lo, hi = r["kendall_tau_interval"]  # 7 ranked studies: an interval, around the tau
        assert iv == f"[{lo:+.2f}, {hi:+.2f}]" and lo <= r["kendall_tau"] <= hi, line
        assert (p, int(arms), int(n), ceiling) == (p_value_text(r), r["n_arms"], r["n_studies"],
                                                   f"{r['oracle_kendall_tau']:+.2f}"), line
        critical = re.search(r"; significant from (\S+);", line).group(1)
        assert critical == f"{r['critical_kendall_tau']:+.2f}" and (float(p.split()[0]) <= 0.05) == (
            r["kendall_tau"] >= r["critical_kendall_tau"] - 1e-12), line
        assert int(arms) == 21 and int(n) == 7  # the two loss-type studies: every forecaster says 0, no ranking
    cost = next(s for s in lines if s.split()[0] == "forecast_cost_only")
    assert "; 7 tied arm(s) in the studies it ranks)" in cost  # mc_value and hybrid_0.5 cost the same
    cells = _block(printed, "ranking within these cells (4 cells")
    assert [s.split()[0] for s in cells] == ["forecast_cost_only", "forecast_probe", "forecast_signal_proxy"]
    assert all(" [no interval] (p " in s and " arms in 3;" in s for s in cells), cells  # 3 ranked cells: under 5
    after = printed.splitlines()[printed.splitlines().index(cells[-1]) + 1]
    assert after == ("no tau interval: 3 ranked studies: no study-level bootstrap interval under 5 (a percentile "
                     "bootstrap over few clusters undercovers: Cameron & Miller 2015)")


def test_the_eighteen_study_report_gives_each_pooled_tau_its_study_bootstrap_interval(unseen_report):
    """metrics.json's rankings carry the 95% study-cluster interval of each pooled tau and rho, as
    calib.metrics.pooled_rank_agreement gives it on the report's rows, and report.html's ranking table shows them."""
    import json

    from calib.metrics import pooled_rank_agreement, ranking_table

    m = json.loads((unseen_report / "metrics.json").read_text())
    rows = pd.read_csv(unseen_report / "rows.csv")
    table = ranking_table(rows[np.isfinite(rows["target"].astype(float))], [f for f, _ in NAMES])
    html = (unseen_report / "report.html").read_text()
    for f, _ in NAMES:
        r, got = pooled_rank_agreement(table, f), m["ranking"][f]
        assert got["kendall_tau_interval"] == pytest.approx(r["kendall_tau_interval"], abs=1e-12), f
        assert got["spearman_rho_interval"] == pytest.approx(r["spearman_rho_interval"], abs=1e-12), f
        lo, hi = got["kendall_tau_interval"]
        assert got["n_studies"] >= 5 and lo <= got["kendall_tau"] <= hi and got["kendall_tau_interval_reason"] is None
        assert f"<td class=n>[{lo:+.2f}, {hi:+.2f}]</td>" in html, f
    assert m["kendall_tau_interval"] == m["ranking"][m["forecaster"]]["kendall_tau_interval"]
    assert m["ranking"]["forecast_cost_only"]["interval_bootstrap"]["resamples"] == 5000
    assert "Tau and rho intervals: 95% percentile, study-cluster bootstrap (5000 resamples" in html


def test_a_monte_carlo_p_value_at_its_floor_is_printed_as_that_floor(unseen_report):
    """No permutation of 9999 reached cost only's pooled tau on the 18 studies: its p is the floor 1/10000, which the
    HTML report shows as the floor it is, not as a measured p-value."""
    import json

    from calib.metrics import p_value_text

    r = json.loads((unseen_report / "metrics.json").read_text())["ranking"]["forecast_cost_only"]
    assert not r["exact"] and r["n_permutations"] == 9999 and r["p_kendall"] == pytest.approx(1 / 10000)
    assert p_value_text(r) == "0.0001 (the floor 1/(1+B): none of 9999 permutations reached it)"
    html = (unseen_report / "report.html").read_text()
    assert "0.0001 (the floor 1/(1+B): none of 9999 permutations reached it)" in html


def test_the_readmes_quote_the_held_out_ranking_and_coverage_as_printed(unseen, unseen_report, capsys):
    import re

    assert unseen.main([str(unseen_report), *[a for s in UNSEEN for a in ("--study", s)],
                        "--studies-root", str(REPO / "data")]) == 0
    printed = capsys.readouterr().out
    readme, calib_readme = (" ".join((REPO / p).read_text().split())
                            for p in ("README.md", "data/calibration/README.md"))
    for start, unit, texts in (("within-study ranking (9 studies)", "studies", (readme, calib_readme)),
                               ("ranking within these cells (4 cells", "cells", (calib_readme,))):
        for line in _block(printed, start)[:2]:  # cost only, probe
            tau, iv, p, arms, n, ceiling = re.search(
                r"(\S+) (\[\S+, \S+\]|\[no interval\]) \(p (.+); (\d+) arms in (\d+); ceiling (\S+);", line).groups()
            for text in texts:  # with its interval, or saying there is none
                shown = "" if iv == "[no interval]" else re.escape(iv) + " "
                after = "; no interval" if iv == "[no interval]" else r"\b"
                quoted = rf"{re.escape(tau)} {shown}\((permutation )?p {re.escape(p)}; {arms} arms in {n} {unit}{after}"
                assert re.search(quoted, text), (start, line)
                assert f"ceiling of {ceiling}" in text, (start, line)
                critical = re.search(r"significant from (\S+);", line).group(1)
                assert f"significant from {critical}" in text, (start, line)
    for start in ("on arm means (each arm once", "on these cells' arm means"):
        for line in _block(printed, start)[1:]:  # the differences from cost only
            diff, detectable = re.search(r"minus forecast_cost_only (\S+ \[\S+ \S+\])   detectable (\S+)",
                                         line).groups()
            assert re.search(rf"{re.escape(diff)}[^.;]*detectable from {re.escape(detectable)}", calib_readme), line
    for line in _block(printed, "coverage of the report's 90% (cv_plus) intervals")[:2]:
        cal = re.search(r"calibrated on the other studies (\S+ \[\S+ \S+\])", line).group(1)
        for text in (readme, calib_readme):
            assert cal in text, line


def test_a_report_without_interval_columns_says_coverage_is_not_measured(unseen, capsys, tmp_path):
    d = pd.read_csv(REPORT / "cv_predictions.csv").drop(columns=["cv_lower", "cv_upper"])
    d.to_csv(tmp_path / "cv_predictions.csv", index=False)
    assert unseen.main([str(tmp_path), "--study", "study_tiny@", "--study", "study_tiny_hard_rewards",
                        "--studies-root", str(REPO / "data")]) == 0
    out = capsys.readouterr().out
    assert "coverage: not measured (the report's cv_predictions.csv has no cv_lower/cv_upper columns" in out
    assert "within-study ranking (2 studies)" in out


@pytest.mark.parametrize("column, value, why", [
    ("target", "True", 'line 7 column target is "True", not a finite number'),
    ("cv_pred", "abc", 'line 7 column cv_pred is "abc", not a finite number'),
    ("target", "nan", 'line 7 column target is "nan", not a finite number'),
    ("cv_lower", "True", 'line 7 column cv_lower is "True", not a number or empty'),
    ("seed", "True", 'line 7 column seed is "True", not an integer')])
def test_a_cell_calib_report_never_writes_is_refused_in_one_line_naming_its_line(unseen, capsys, tmp_path, column,
                                                                                  value, why):
    d = pd.read_csv(REPORT / "cv_predictions.csv").astype({column: object})
    d.loc[5, column] = value
    d.to_csv(tmp_path / "cv_predictions.csv", index=False)
    assert unseen.main([str(tmp_path), "--study", "study_tiny@", "--studies-root", str(REPO / "data")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and why in err and "the file is damaged" in err, err


@pytest.mark.parametrize("metrics, says", [
    (None, "cannot be read, FileNotFoundError"), ('{"confidence_level": true}', "confidence_level true, not a number"),
    ('{"confidence_level": 95}', "confidence_level 95, not a number in (0, 1)"),
    ('{"confidence_level": ' + "1" * 400 + "}", "not a number in (0, 1)")])
def test_the_coverage_header_says_when_the_reports_level_is_unknown(unseen, capsys, tmp_path, metrics, says):
    shutil.copy(REPORT / "cv_predictions.csv", tmp_path / "cv_predictions.csv")
    if metrics is not None:
        (tmp_path / "metrics.json").write_text(metrics)
    assert unseen.main([str(tmp_path), "--study", "study_tiny@", "--study", "study_tiny_hard_rewards",
                        "--studies-root", str(REPO / "data")]) == 0
    line = next(s for s in capsys.readouterr().out.splitlines() if s.startswith("coverage of "))
    assert line.startswith("coverage of the report's (level unknown: ") and says in line, line


def test_a_replicate_whose_source_is_not_passed_is_said_not_pooled(unseen, capsys, tmp_path):
    for name in ("study_tiny", "study_tiny_hard_rewards"):
        shutil.copytree(REPO / "data" / name, tmp_path / name, ignore=shutil.ignore_patterns("figures"))
    (tmp_path / "study_tiny_hard_rewards" / "replicate_of.json").write_text(
        '{"source": "../nowhere", "source_name": "nowhere"}')
    assert unseen.main([str(REPORT), "--study", "study_tiny@", "--study", "study_tiny_hard_rewards",
                        "--studies-root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "not pooled: study_tiny_hard_rewards@" in out and "replicates nowhere, which is not among the studies" in out
    assert "replicates pooled" not in out


def test_a_cut_last_line_of_cv_predictions_is_named_at_its_own_line(unseen, capsys, tmp_path):
    lines = (REPORT / "cv_predictions.csv").read_text().splitlines()
    last = ",".join(lines[-1].split(",")[:3])  # the last line cut after its third field
    (tmp_path / "cv_predictions.csv").write_text("\n".join(lines[:-1] + [last]) + "\n")
    assert unseen.main([str(tmp_path), "--study", "study_tiny@", "--studies-root", str(REPO / "data")]) == 2
    err = capsys.readouterr().err
    assert f"line {len(lines)} column seed is empty, not an integer" in err and err.count("\n") == 1, err


def test_the_detectable_difference_is_two_point_eight_bootstrap_standard_errors(unseen):
    """(z_0.975 + z_0.8) x the resamples' standard deviation: checked against statsmodels' normal power solver
    (the difference whose two-sided 5% z-test has 80% power when its standard error is that SD)."""
    from statsmodels.stats.power import NormalIndPower

    resampled = np.random.default_rng(0).normal(0.1, 0.17, size=5000)
    sd = np.std(resampled, ddof=1)
    # NormalIndPower with ratio=0 is the one-sample z-test; its effect size is in units of the standard error
    effect = NormalIndPower().solve_power(effect_size=None, nobs1=1, alpha=0.05, power=0.8, ratio=0)
    assert unseen.detectable_difference(resampled) == pytest.approx(effect * sd, rel=1e-4)  # a root-finder
    assert unseen.detectable_difference(resampled) == pytest.approx(2.8016 * sd, rel=1e-4)
