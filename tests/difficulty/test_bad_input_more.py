"""rank-prompts / difficulty-eval refuse bad input before any model load or sampling, naming the option and
the fix: seeds out of [0, 2**63 - 1], metadata keys that are not numbers or are given twice, and an --out
holding another command's output (their own earlier output is replaced, with one line saying so)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from gradprobe.cli import main
from gradprobe.difficulty.rank import PoolSettings, RankSettings, rank_prompts

from helpers_rollout import one_thread

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

#: a model that does not exist: a command refused up front never gets to say so
NO_MODEL = "no-such-model"


def _argv(command, out, *extra):
    sizes = ["--samples", "4"] if command == "difficulty-eval" else ["--fit-prompts", "2", "--probe-samples", "1"]
    return [command, "--model", NO_MODEL, "--task", "chain_sum", "--pool", "4", *sizes, "--max-new-tokens", "4",
            "--no-progress", "--out", str(out), *extra]


# ---------------------------------------------------------------------------- defect A: seeds
@pytest.mark.parametrize("options, message", [
    ({"seed": -1}, "seed (--seed) must be an integer in [0, 2**63 - 1], got -1"),
    ({"data_seed": -1}, "data_seed (--data-seed) must be an integer in [0, 2**63 - 1], got -1"),
    ({"seed": 10**20}, "seed (--seed) must be an integer in [0, 2**63 - 1], got 100000000000000000000"),
    ({"data_seed": 2**63}, "data_seed (--data-seed) must be an integer in [0, 2**63 - 1], got 9223372036854775808"),
])
def test_a_seed_out_of_range_is_refused_by_the_settings(options, message):
    with pytest.raises(ValueError) as info:
        RankSettings.from_options(options)
    assert str(info.value) == message
    with pytest.raises(ValueError) as info:
        PoolSettings(**options)
    assert str(info.value) == message


def test_the_largest_seed_is_accepted():
    s = RankSettings(seed=2**63 - 1, data_seed=2**63 - 1)
    assert (s.seed, s.data_seed) == (2**63 - 1, 2**63 - 1)


@pytest.mark.parametrize("command", ["rank-prompts", "difficulty-eval"])
@pytest.mark.parametrize("flag, value", [("--seed", "-1"), ("--data-seed", "-1"), ("--seed", "99999999999999999999")])
def test_a_bad_seed_exits_2_before_the_model_is_loaded(tmp_path, capsys, command, flag, value):
    out = tmp_path / "o"
    assert main(_argv(command, out, flag, value)) == 2
    err = capsys.readouterr().err.strip()
    name = flag[2:].replace("-", "_")
    assert err == f"gradprobe {command}: error: {name} ({flag}) must be an integer in [0, 2**63 - 1], got {value}"
    assert not out.exists()


def test_evaluate_estimator_refuses_a_negative_seed():
    from gradprobe.difficulty.evaluate import evaluate_estimator

    with pytest.raises(ValueError, match=re.escape("seed (--seed) must be an integer in [0, 2**63 - 1], got -1")):
        evaluate_estimator(["a", "b", "c", "d"], np.zeros((4, 2)), np.zeros((4, 4)), observed=1, seed=-1)


# ---------------------------------------------------------------------------- defect B: metadata keys
def _problems(*metas):
    return [SimpleNamespace(id=f"p{i}", metadata=m) for i, m in enumerate(metas)]


def test_a_key_given_twice_is_refused_by_the_settings(tmp_path, capsys):
    with pytest.raises(ValueError) as info:
        RankSettings(metadata_keys="num_terms, num_digits,num_terms")
    assert str(info.value) == "metadata_keys (--metadata-keys) names 'num_terms' twice; give each key once"
    with pytest.raises(ValueError, match="names 'a' twice"):
        RankSettings.from_options({"metadata_keys": ["a", "a"]})
    out = tmp_path / "o"
    assert main(_argv("difficulty-eval", out, "--metadata-keys", "num_terms,num_terms")) == 2
    assert "metadata_keys (--metadata-keys) names 'num_terms' twice" in capsys.readouterr().err
    assert not out.exists()


def test_a_non_numeric_key_is_refused_with_an_example_and_the_numeric_keys():
    from gradprobe.difficulty.metadata import check_metadata_keys

    problems = _problems({"n": 3, "name": "alpha", "flag": True}, {"n": np.int64(4), "name": "beta", "w": None})
    with pytest.raises(ValueError) as info:
        check_metadata_keys(problems, ["n", "name"])
    assert str(info.value) == ("metadata key 'name' (--metadata-keys) is not a number: 'alpha' in prompt p0, 'beta' in "
                               "prompt p1; 'name' is numeric in 0 of 2 prompts: make each such value a number, or "
                               "null (missing: imputed), or give numeric keys only (keys numeric in every prompt "
                               "holding them: n)")
    with pytest.raises(ValueError, match=r"metadata key 'flag' \(--metadata-keys\) is not a number: True in prompt p0"):
        check_metadata_keys(problems, ["flag"])
    with pytest.warns(UserWarning, match=r"\(--metadata-keys\) absent: in no prompt of this pool"):
        check_metadata_keys(problems, ["n", "w", "absent"])  # numbers, None and absent keys pass (absent: warned)


def test_metadata_features_refuses_strings_and_reads_numpy_integers():
    from gradprobe.difficulty.features import metadata_features

    problems = _problems({"n": np.int64(4), "x": 2.5}, {"n": 7, "s": "3 + 4"}, {})
    got = metadata_features(problems, [[1, 2], [1], [1, 2, 3]], ["n", "x"])
    np.testing.assert_array_equal(got, [[2, 4, 2.5], [1, 7, np.nan], [3, np.nan, np.nan]])
    with pytest.raises(ValueError, match=r"metadata key 's' \(--metadata-keys\) is not a number: '3 \+ 4' in prompt "
                                         r"p1; 's' is numeric in 0 of 3 prompts: .*give numeric keys only "
                                         r"\(keys numeric in every prompt holding them: n, x\)"):
        metadata_features(problems, [[1], [1], [1]], ["n", "s"])
    with pytest.raises(ValueError, match="metadata key 'n' .*given twice"):
        metadata_features(problems, [[1], [1], [1]], ["n", "n"])


@pytest.mark.parametrize("command", ["rank-prompts", "difficulty-eval"])
def test_a_string_key_exits_2_before_the_model_is_loaded(tmp_path, capsys, command):
    out = tmp_path / "o"
    assert main(_argv(command, out, "--metadata-keys", "num_terms,expression")) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gradprobe {command}: error: metadata key 'expression' (--metadata-keys) is not a number: "
                          "'")
    assert "in prompt chain_sum/train/0, " in err and "and 1 more; 'expression' is numeric in 0 of 4 prompts: " in err
    assert "or give numeric keys only (keys numeric in every prompt holding them: num_digits, num_terms, " in err
    assert NO_MODEL not in err and "\n" not in err and not out.exists()


# ---------------------------------------------------------------------------- defect C: --out of another command
def _folder(path, *names):
    path.mkdir(parents=True, exist_ok=True)
    for name in names:
        (path / name).write_text("{}")
    return path


@pytest.mark.parametrize("command", ["rank-prompts", "difficulty-eval"])
@pytest.mark.parametrize("names, what", [
    (["study.json", "runs.csv", "plan.toml"], "a study (`gradprobe study`) (study.json)"),
    (["config.json", "metrics.jsonl"], "a training run (`gradprobe train`) (metrics.jsonl)"),
    (["probe.json", "report.html"], "a probe (`gradprobe probe`) (probe.json)"),
    (["metrics.json", "cv_predictions.csv"], "a calibration report (`calib report`) (cv_predictions.csv)"),
])
def test_another_commands_folder_is_refused_before_any_compute(tmp_path, capsys, command, names, what):
    out = _folder(tmp_path / "other", *names)
    assert main(_argv(command, out)) == 2
    err = capsys.readouterr().err.strip()
    noun = "a ranking" if command == "rank-prompts" else "an evaluation"
    assert err == (f"gradprobe {command}: error: --out {str(out)!r} holds {what}, not the output of `gradprobe "
                   f"{command}`; {noun} there would mix its files into it: choose another --out (an empty folder, "
                   f"or an earlier {noun.split()[1]}'s)")
    assert sorted(p.name for p in out.iterdir()) == sorted(names)  # nothing added


def test_the_shipped_study_copy_is_refused_and_left_as_it_was(tmp_path, capsys):
    import shutil

    from gradprobe.outputs import OutputDirError

    study = tmp_path / "sc"
    shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "study_tiny", study)
    before = sorted(p.relative_to(study) for p in study.rglob("*"))
    assert main(_argv("rank-prompts", study)) == 2
    assert "holds a study (`gradprobe study`) (study.json)" in capsys.readouterr().err
    assert main(_argv("difficulty-eval", study / "probe")) == 2
    assert "holds a study's probe folder (arms.json)" in capsys.readouterr().err
    with pytest.raises(OutputDirError, match="holds a study"):
        rank_prompts(NO_MODEL, "chain_sum", 4, out=study)
    assert sorted(p.relative_to(study) for p in study.rglob("*")) == before


@pytest.mark.parametrize("command, names, what", [
    ("rank-prompts", ["metrics.json", "reliability.png"], "a difficulty evaluation (`gradprobe difficulty-eval`) "
                                                          "(reliability.png)"),
    ("difficulty-eval", ["ranking.csv", "rank.json"], "a ranking (`gradprobe rank-prompts`) (ranking.csv)"),
])
def test_the_other_difficulty_commands_folder_is_refused(tmp_path, capsys, command, names, what):
    out = _folder(tmp_path / "other", *names)
    assert main(_argv(command, out)) == 2
    assert f"holds {what}, not the output of `gradprobe {command}`" in capsys.readouterr().err


def test_an_earlier_result_is_named_when_replaced(tmp_path):
    from gradprobe.difficulty.folder import check_output_folder

    assert check_output_folder(tmp_path / "new", "rank-prompts") is None
    assert check_output_folder(_folder(tmp_path / "empty"), "difficulty-eval") is None
    r = _folder(tmp_path / "r", "rank.json", "ranking.csv")
    (r / "rank.json").write_text('{"command": "rank-prompts"}')  # what rank-prompts writes: its own
    line = check_output_folder(r, "rank-prompts")
    assert re.fullmatch(rf"replacing the ranking in {re.escape(str(tmp_path / 'r'))} "
                        r"\(written \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\)", line)
    e = _folder(tmp_path / "e", "metrics.json")
    (e / "metrics.json").write_text('{"command": "difficulty-eval"}')  # what difficulty-eval writes: its own
    line = check_output_folder(e, "difficulty-eval")
    assert line.startswith(f"replacing the evaluation in {tmp_path / 'e'} (written ")


def test_rank_prompts_twice_says_it_replaces_its_ranking(tmp_path, capsys):
    out = tmp_path / "rank"
    argv = ["rank-prompts", "--model", "tiny-qwen2", "--task", "chain_sum", "--pool", "3", "--fit-prompts", "2",
            "--probe-samples", "1", "--max-new-tokens", "4", "--no-progress", "--out", str(out)]
    assert main(argv) == 0
    assert "replacing" not in capsys.readouterr().out
    assert main([*argv[:-2], "--seed", "1", "--out", str(out)]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("replacing")]
    assert len(lines) == 1 and lines[0].startswith(f"replacing the ranking in {out} (written ")
    assert json.loads((out / "rank.json").read_text())["settings"]["seed"] == 1
    assert sorted(p.name for p in out.iterdir()) == ["rank.json", "ranking.csv"]


def test_a_key_no_prompt_holds_is_warned_once_by_the_library_not_only_the_cli():
    """prompt_features(metadata_keys=["bogus"]) gave an all-NaN column without a word (only rank-prompts warned);
    the warning now comes from the key check every path takes (rank-prompts, difficulty-eval, the Python API)."""
    from gradprobe.difficulty.features import metadata_features

    problems = _problems({"n": 3}, {"n": 4, "w": 1.5})
    with pytest.warns(UserWarning) as record:
        got = metadata_features(problems, [[1], [1, 2]], ["n", "bogus", "w"])
    assert [str(w.message) for w in record] == [
        "metadata_keys (--metadata-keys) bogus: in no prompt of this pool, so imputed as a constant that carries no "
        "information (keys present: n, w)"]
    np.testing.assert_array_equal(got, [[1, 3, np.nan, np.nan], [2, 4, np.nan, 1.5]])


def test_metadata_keys_given_as_one_string_are_refused_not_read_per_character():
    """metadata_keys="num_terms" was read one character at a time ("metadata key 'm' is given twice")."""
    from gradprobe.difficulty.metadata import check_metadata_keys

    with pytest.raises(TypeError) as info:
        check_metadata_keys(_problems({"num_terms": 3}), "num_terms")
    assert str(info.value) == ("metadata_keys (--metadata-keys) must be a list of key names, got the string "
                               "'num_terms'; pass ['num_terms'] (or a comma-separated string split: "
                               "'num_terms'.split(','))")


@pytest.mark.parametrize("fill, message", [
    (np.nan, r"outcomes: all 24 are missing \(NaN\), nothing to fit or score"),
    (2.0, r"outcomes must be 0/1 \(NaN for a missing one\), got 2 at prompt 'p2', sample 1 \(1 such value\(s\)\)"),
    (np.inf, r"outcomes must be 0/1 \(NaN for a missing one\), got inf at prompt 'p2', sample 1"),
    # partial credit reached scikit-learn's "continuous format is not supported"
    (0.5, r"got 0.5 at prompt 'p2', sample 1 \(1 such value\(s\)\); partial credit is no success or failure: the "
          r"estimators predict the chance that one sample succeeds, so map each score to 0/1 first"),
])
def test_evaluate_estimator_refuses_missing_or_non_binary_outcomes(fill, message):
    """All-NaN outcomes (a scorer that failed on every prompt) returned brier/auc None with a note about groups."""
    from gradprobe.difficulty.evaluate import evaluate_estimator

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, (6, 4)).astype(float)
    if np.isnan(fill):
        y[:] = np.nan
    else:
        y[2, 1] = fill
    with pytest.raises(ValueError, match=message):
        evaluate_estimator([f"p{i}" for i in range(6)], rng.normal(size=(6, 3)), y, observed=1)


def test_a_metadata_value_whose_square_overflows_is_refused_naming_it():
    """A level of 1e300 reached scikit-learn as "Input X contains NaN" (the standardisation's variance overflowed),
    naming no key, prompt or fix. 1e150 is still read; inf is not a value this check names."""
    import numpy as np

    from gradprobe.difficulty.features import metadata_features
    from gradprobe.difficulty.metadata import check_metadata_keys

    check_metadata_keys(_problems({"level": 1}, {"level": 1e150}, {"level": None}), ["level"])
    with pytest.raises(ValueError) as info:
        check_metadata_keys(_problems({"level": 1}, {"level": -1e300}, {"level": 2e200}), ["level"])
    assert str(info.value) == ("metadata key 'level' (--metadata-keys) is -1e+300 in prompt p1 (2 value(s) beyond "
                               "+-1e+150): the estimator standardises each feature, and the square of such a value "
                               "overflows; rescale the key (e.g. its log10) or leave it out of --metadata-keys")
    x = metadata_features(_problems({"level": 1}, {"level": 1e150}), [[1, 2], [3]], ["level"])
    assert np.isfinite(x).all()


def test_a_metadata_integer_too_large_for_a_float_is_named_not_an_overflow_error():
    from gradprobe.difficulty.metadata import check_metadata_keys

    with pytest.raises(ValueError, match=r"metadata key 'level' \(--metadata-keys\) is an integer of 401 digits in "
                                         r"prompt p1 \(1 value\(s\) beyond"):
        check_metadata_keys(_problems({"level": 1}, {"level": 10 ** 400}), ["level"])
