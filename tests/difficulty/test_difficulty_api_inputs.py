"""Bad inputs at the difficulty API's boundary get the message the command line gives, naming the argument and the fix:

- ``gradprobe.evaluate_difficulty`` (``evaluate_estimator``) with features of magnitude 1e200 failed inside
  scikit-learn with "Input X contains NaN" (the square in the standardisation overflowed), and with no feature column
  with "Found array with 0 feature(s) ... SimpleImputer"; ``DifficultyEstimator.observe`` / ``predict_model`` (the
  public estimator) the same. The limit is the command line's for ``--metadata-keys`` values (``MAX_METADATA``).
- ``gradprobe.prompt_features(policy, ["1 + 2"])`` failed with "'str' object has no attribute 'question'".
- ``gradprobe difficulty-eval --pool 0`` said "must be >= 1", then ``--pool 1`` "must be >= 2".
"""

from __future__ import annotations

import numpy as np
import pytest

import gradprobe
from gradprobe.cli import main
from gradprobe.difficulty import DifficultyEstimator
from gradprobe.difficulty.evaluate import evaluate_estimator
from gradprobe.difficulty.metadata import MAX_METADATA

OVERFLOW = ("the estimator standardises each feature, and the square of such a value overflows; rescale that column "
            "of features (e.g. its log10, or divide it by its scale)")
NO_COLUMN = ("features has 0 columns (shape (40, 0)): the logistic model needs at least one feature per prompt; pass "
             "an (M, F) array with F >= 1, e.g. gradprobe.prompt_features(policy, problems)")


def _data(m=40):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(m, 5))
    y = (rng.random((m, 8)) < 0.5).astype(float)
    return [f"p{i}" for i in range(m)], x, y


def test_evaluate_difficulty_refuses_features_beyond_the_command_lines_limit():
    ids, x, y = _data()
    x[3, 2], x[7, 4] = 1e200, -2e151
    with pytest.raises(ValueError) as e:
        gradprobe.evaluate_difficulty(ids, x, y, observed=2)
    assert str(e.value) == f"features[3, 2] is 1e+200 (2 value(s) beyond +-1e+150): {OVERFLOW}"
    x[3, 2], x[7, 4] = MAX_METADATA, -MAX_METADATA  # the limit is inclusive, as on the command line: its square fits
    res = evaluate_estimator(ids, x, y, observed=2)
    assert res["split"] == {"fit_prompts": 20, "eval_prompts": 20, "observed_per_eval_prompt": 2,
                            "target_per_eval_prompt": 6, "seed": 0}
    assert 0 <= res["estimators"]["model"]["brier"] <= 1


def test_evaluate_difficulty_refuses_features_without_a_column():
    ids, x, y = _data()
    with pytest.raises(ValueError) as e:
        gradprobe.evaluate_difficulty(ids, x[:, :0], y, observed=2)
    assert str(e.value) == NO_COLUMN


def test_the_estimator_refuses_the_same_features_at_observe_and_predict():
    ids, x, _ = _data()
    s, n = np.arange(40) % 5, np.full(40, 4)
    est = DifficultyEstimator()
    with pytest.raises(ValueError) as e:
        est.observe(ids, x * 1e200, s, n)
    assert str(e.value) == f"features[0, 0] is {x[0, 0] * 1e200:g} (200 value(s) beyond +-1e+150): {OVERFLOW}"
    with pytest.raises(ValueError) as e:
        est.observe(ids, x[:, :0], s, n)
    assert str(e.value) == NO_COLUMN
    est.observe(ids, x, s, n)
    est.fit()
    big = x.copy()
    big[1, 3] = 5e160
    with pytest.raises(ValueError) as e:
        est.predict_model(big)
    assert str(e.value) == f"features[1, 3] is 5e+160 (1 value(s) beyond +-1e+150): {OVERFLOW}"
    with pytest.raises(ValueError) as e:
        est.predict_model(x[:, :3])
    assert str(e.value) == ("predict_model: features have 3 columns, the observed features 5; pass the same feature "
                            "columns as to observe")
    p = est.predict_model(x)
    assert p.shape == (40,) and np.all((p > 0) & (p < 1))


FIX = "(answer: the gold answer, not read by the features)"


@pytest.mark.parametrize("problems, message", [
    (["1 + 2"], "problems[0] is a str ('1 + 2'), not a task item: problems must be a list of Problems "
                "(gradprobe.load_task(spec).problems(split, n)); make a Problem of a prompt's text with "
                f"gradprobe.tasks.Problem(id='p0', question='1 + 2', answer='') {FIX}"),
    ("1 + 2", "problems must be a list of task items (Problems: gradprobe.load_task(spec).problems(split, n)), got "
              "the string '1 + 2'; make a Problem of a prompt's text with gradprobe.tasks.Problem(id='p0', "
              f"question=TEXT, answer='') {FIX} and pass a list of them"),
])
def test_prompt_features_refuses_text_for_task_items_before_the_model_is_read(problems, message):
    with pytest.raises(TypeError) as e:
        gradprobe.prompt_features(None, problems)  # no policy is needed to refuse them
    assert str(e.value) == message


def test_the_problem_the_message_shows_is_accepted():
    from gradprobe.difficulty.features import check_problems
    from gradprobe.tasks import Problem
    check_problems([Problem(id="p0", question="1 + 2", answer="")])  # what the message says to write: no error


def test_difficulty_eval_gives_one_message_with_the_real_least_pool(tmp_path, capsys):
    out = tmp_path / "o"
    for pool in ("0", "1", "-3"):  # 0 was the parser's "must be >= 1", 1 the command's "must be >= 2"
        argv = ["difficulty-eval", "--model", "tiny-qwen2", "--task", "chain_sum", "--pool", pool, "--out", str(out)]
        assert main(argv) == 2
        assert capsys.readouterr().err == ("gradprobe difficulty-eval: error: --pool must be >= 2 (a fit half and an "
                                           f"eval half), got {pool}\n")
        assert not out.exists()
