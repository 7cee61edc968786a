"""A review of how a reference curve's accuracies are put on one scale: a fraction logged at a seed's first or
last eval among points, a whole seed logged as fractions beside seeds in points (each a wrong R0 or curve with no
word before), the public constructor given fractions, a CSV separated by semicolons or tabs, a header with spaces,
and several runs stacked in one CSV without a seed column."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gradprobe.forecast.accuracy_values import to_points
from gradprobe.forecast.curves import CurveError, ReferenceCurve, load_reference_curve

UPDATES = [0, 2, 5, 10, 20, 40]
SEED0 = [67.6, 71.0, 73.7, 73.9, 76.2, 77.5]  # the shipped tiny curve's evals, in points
SEED1 = [67.6, 69.1, 73.0, 73.5, 77.5, 76.1]


def _csv(path, seeds, header="update,accuracy,seed", sep=","):
    """``seeds``: one list of accuracies per seed, at UPDATES."""
    rows = [sep.join(str(x) for x in (u, a, s)) for s, acc in enumerate(seeds) for u, a in zip(UPDATES, acc)]
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


def test_a_fraction_at_a_seeds_first_or_last_eval_among_points_is_refused(tmp_path):
    r0 = _csv(tmp_path / "r0.csv", [[0.676] + SEED0[1:], [0.676] + SEED1[1:]])
    with pytest.raises(CurveError) as info:
        load_reference_curve(str(r0))  # as --reference-curve reads it: R0 = 0.68 points before
    assert str(info.value) == (
        f"{r0} accuracy mixes scales: the values are points, but line 2 (0.676), line 8 (0.676), a seed's first or "
        "last eval, read(s) as fractions: as points 0.676 would step 70.3 to the eval beside it (71), where the "
        "seed's other evals step at most 2.7, and as 67.6 it lies 3.4 from it; write such an eval in points (100 x "
        "the value); fix those evals, or pass accuracy_scale='points' if the values are points as they stand (on the "
        "command line, --reference-curve-scale points)")
    last = _csv(tmp_path / "last.csv", [SEED0[:-1] + [0.775], SEED1])
    with pytest.raises(CurveError, match=r"but line 7 \(0\.775\), a seed's first or last eval, read\(s\) as "
                                         r"fractions: as points 0\.775 would step 75\.4 to the eval beside it "
                                         r"\(76\.2\)"):
        ReferenceCurve.from_csv(last)
    assert ReferenceCurve.from_csv(r0, accuracy_scale="points", n_replicates=0).params["R0"] == pytest.approx(0.676)
    fixed = ReferenceCurve.from_csv(_csv(tmp_path / "ok.csv", [SEED0, SEED1]), n_replicates=0)
    assert fixed.params["R0"] == pytest.approx(67.6)
    one = np.array([0.4, 50, 58, 65, 70, 72])  # one seed, R0 as a fraction: steps 8 at most, 49.6 as points
    with pytest.raises(CurveError, match=r"but value #0 \(0\.4\), a seed's first or last eval"):
        to_points(one, "auto", "x", updates=[0, 5, 10, 20, 40, 60])
    # real curves starting under 1 point stay points: a steep start (0.8 then 45: its seed steps 10, and 80 is no
    # nearer 45 than a quarter of 44.2), a flat one after the jump, a start 0 then 0.5, a collapse at the end
    for real in ([0.8, 45, 55, 60, 62, 63], [0.8, 45, 46, 47, 48, 48.5], [0.0, 0.5, 60, 62, 63, 64],
                 [0, 0.5, 3, 10, 25, 40], [5, 60, 70, 72, 73, 74], [60, 64, 68, 71, 73, 0.2], [60, 64, 68, 71, 73, 1]):
        assert to_points(np.array(real, dtype=float), "auto", "x")[0].tolist() == real


def test_a_whole_seed_logged_as_fractions_beside_seeds_in_points_is_refused(tmp_path):
    path = _csv(tmp_path / "s.csv", [SEED0, SEED1, [a / 100 for a in SEED0]])  # a third of the values: fractions
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_csv(path)
    assert str(info.value).startswith(
        f"{path} accuracy mixes scales: the values are points, but line 14 (0.676), line 15 (0.71), line 16 (0.737), "
        "line 17 (0.739), line 18 (0.762) and 1 more, of a seed with no more than one eval above 1 point (seed 2), "
        "read(s) as fractions: as 67.6 it lies near the other seeds' evals at its update (median 67.6), and as "
        "0.676 far below them (a run logged as fractions beside runs in points); write its evals in points")
    # a seed that learns nothing on a hard task (under 1 point while the others reach 20-45) is no fraction
    hard = np.array([0.2, 20, 30, 40, 45, 0.1, 25, 33, 41, 44, 0.2, 0.3, 0.5, 0.6, 0.9])
    out, _ = to_points(hard, "auto", "x", updates=[0, 5, 10, 20, 40] * 3, seeds=[0] * 5 + [1] * 5 + [2] * 5)
    assert out.tolist() == hard.tolist()


def test_the_constructor_reads_fractions_as_the_readers_do(tmp_path):
    n, s = UPDATES * 2, [0] * 6 + [1] * 6
    points = ReferenceCurve(updates=n, accuracy=SEED0 + SEED1, seeds=s, n_replicates=0)
    fractions = ReferenceCurve(updates=n, accuracy=[a / 100 for a in SEED0 + SEED1], seeds=s, n_replicates=0)
    assert fractions.params["R0"] == pytest.approx(67.6) and fractions.params == pytest.approx(points.params)
    assert fractions.notes[0] == ("ReferenceCurve(accuracy=...): accuracy read as fractions in [0, 1] (range "
                                  "0.676-0.775) and converted to points; if they already are points, pass "
                                  "accuracy_scale='points'")
    assert not any("accuracy read as" in x for x in points.notes)  # points, as documented: read as given
    with pytest.raises(CurveError, match=r"^ReferenceCurve\(accuracy=\.\.\.\) mixes scales: the values are points, "
                                         r"but accuracy\[6\] \(0\.676\), a seed's first or last eval") as info:
        ReferenceCurve(updates=n, accuracy=SEED0 + [0.676] + SEED1[1:], seeds=s, n_replicates=0)
    assert str(info.value).endswith("fix those evals, or pass accuracy_scale='points' if the values are points as "
                                    "they stand")  # the command line's option is no fix for the constructor
    flat = [0.1, 0.3, 0.5, 0.6, 0.7, 0.75]  # a curve truly under 1 point, stated so: kept, and so when saved
    low = ReferenceCurve(updates=UPDATES, accuracy=flat, accuracy_scale="points", n_replicates=0)
    assert low.points["accuracy"].tolist() == flat
    low.save(tmp_path / "low.json")
    assert ReferenceCurve.load(tmp_path / "low.json").points["accuracy"].tolist() == flat
    assert ReferenceCurve(updates=UPDATES, accuracy=flat, accuracy_scale="fraction",
                          n_replicates=0).points["accuracy"].tolist() == pytest.approx([100 * a for a in flat])


def test_a_csv_separated_otherwise_names_its_separator_and_a_spaced_header_is_read(tmp_path):
    semi = tmp_path / "semi.csv"
    semi.write_text("update;accuracy\n" + "".join(f"{u};{str(a / 100).replace('.', ',')}\n"
                                                  for u, a in zip(UPDATES, SEED0)))
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_csv(semi)
    assert str(info.value) == (
        f"{semi} is separated by semicolons (;), not commas: its header 'update;accuracy' reads as one column, so "
        "there is no column 'update'; a CSV curve is comma-separated: write the file with commas between its cells "
        "and points as decimal marks (0.40, not 0,40) (a spreadsheet's CSV export with the comma as separator), or, "
        "from Python, read it with pandas.read_csv(path, sep=';', decimal=',') and pass its columns to "
        "ReferenceCurve(updates=..., accuracy=..., seeds=...)")
    tab = _csv(tmp_path / "tab.csv", [SEED0], header="update\taccuracy\tseed", sep="\t")
    with pytest.raises(CurveError, match=r"is separated by tabs, not commas: .* read it with "
                                         r"pandas\.read_csv\(path, sep='\\t'\) and pass"):
        ReferenceCurve.from_csv(tab)
    spaced = _csv(tmp_path / "sp.csv", [SEED0, SEED1], header="update, accuracy, seed", sep=", ")
    curve = ReferenceCurve.from_csv(spaced, n_replicates=0)
    assert curve.seed_labels == ["0", "1"] and curve.points["accuracy"].max() == pytest.approx(77.5)
    with pytest.raises(CurveError, match=r"has no column 'update' \(columns: \['updates', 'accuracy'\]\)"):
        ReferenceCurve.from_csv(_csv(tmp_path / "u.csv", [SEED0], header="updates,accuracy"))


def test_runs_stacked_in_a_csv_without_a_seed_column_are_told_to_add_one(tmp_path):
    path = tmp_path / "stacked.csv"
    path.write_text("update,accuracy\n" + "".join(f"{u},{a}\n" for acc in (SEED0, SEED1, SEED0)
                                                  for u, a in zip(UPDATES, acc)))
    with pytest.raises(CurveError) as info:
        ReferenceCurve.from_csv(path)
    assert str(info.value) == (
        f"{path} has no seed column, but its updates start over at line 8, line 14 and repeat with other accuracies "
        "(line 3 (71) and line 9 (69.1); line 4 (73.7) and line 10 (73); line 5 (73.9) and line 11 (73.5) and 2 "
        "more): 3 runs stacked one after another? add a column seed naming each line's run (0 on the first run's "
        "lines, 1 from line 8, ...), or keep one run per file")
    with_seeds = _csv(tmp_path / "seeded.csv", [SEED0, SEED1, SEED0])
    assert ReferenceCurve.from_csv(with_seeds, n_replicates=0).seed_labels == ["0", "1", "2"]
    metrics = tmp_path / "metrics.jsonl"  # the other readers keep their seeds per file: unchanged
    metrics.write_text("".join(json.dumps({"eval": True, "update": u, "greedy_accuracy": a / 100}) + "\n"
                               for u, a in zip(UPDATES, SEED0)))
    assert ReferenceCurve.from_metrics(metrics, n_replicates=0).params["R0"] == pytest.approx(67.6)


def test_two_files_of_one_run_are_refused_as_two_seeds(tmp_path):
    """Two checkpoints of one TRL run (their log_history shares every entry of the older one), or a copy of a
    metrics.jsonl, counted as two seeds shrank the curve's seed range to zero width (a reviewer's probe interval went
    from [-8.9, -7.6] to [-8.2, -7.8]). Two real seeds share at most their first eval."""
    import json

    from gradprobe.forecast import ReferenceCurve
    from gradprobe.forecast.curves import CurveError

    def state(folder, steps, seed):
        hist = []
        for s in steps:
            hist.append({"loss": round(0.5 + 0.01 * s + seed, 4), "step": s, "epoch": s / 100})
            hist.append({"eval_accuracy": 0.4 + 0.004 * s + 0.01 * seed * (s > 0), "step": s, "epoch": s / 100})
        (folder).mkdir(parents=True)
        (folder / "trainer_state.json").write_text(json.dumps({"log_history": hist, "global_step": steps[-1]}))
        return folder

    a = state(tmp_path / "run" / "checkpoint-40", [0, 10, 20, 30, 40], 0)
    b = state(tmp_path / "run" / "checkpoint-60", [0, 10, 20, 30, 40, 50, 60], 0)
    with pytest.raises(CurveError) as e:
        ReferenceCurve.from_trl_state([a, b])
    assert str(e.value).startswith(f"trainer_state.json {a / 'trainer_state.json'} and {b / 'trainer_state.json'} "
                                   f"log one run: {b / 'trainer_state.json'} holds its first 10 entries of ")
    other = state(tmp_path / "run2" / "checkpoint-60", [0, 10, 20, 30, 40, 50, 60], 1)  # another seed
    assert ReferenceCurve.from_trl_state([b, other]).points["seed"].nunique() == 2


def test_a_copied_run_folder_is_refused_but_runs_recording_other_seeds_are_read(tmp_path):
    import json
    import shutil

    from gradprobe.forecast import ReferenceCurve
    from gradprobe.forecast.curves import CurveError

    run = tmp_path / "run"
    run.mkdir()
    lines = []
    for u, acc in zip((0, 5, 10, 20, 40, 60), (0.40, 0.55, 0.62, 0.70, 0.76, 0.78)):
        lines += [json.dumps({"update": u, "loss": 0.1 + u / 1000, "seconds": 1.5 + u}),
                  json.dumps({"eval": True, "update": u, "greedy_accuracy": acc})]
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (run / "config.json").write_text(json.dumps({"run": {"seed": 0}}))
    shutil.copytree(run, tmp_path / "copy")
    with pytest.raises(CurveError, match=r"log one run: .*copy/metrics.jsonl holds the same entries of"):
        ReferenceCurve.from_metrics([run, tmp_path / "copy"], n_replicates=0)
    (tmp_path / "copy" / "config.json").write_text(json.dumps({"run": {"seed": 1}}))  # it says it is another seed
    assert ReferenceCurve.from_metrics([run, tmp_path / "copy"], n_replicates=0).seed_labels == ["0", "1"]
