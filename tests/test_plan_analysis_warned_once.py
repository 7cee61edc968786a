"""``gradprobe.study.analysis.analyze`` called directly (outside a study command's reach_warned_once block) read the
study's frozen plan twice (runs.csv's lost-line check and the analysis's own read), so a frozen plan whose token
budget is out of reach of its updates warned twice under ``warnings.simplefilter("always")``; once now, at the
caller's line."""

from __future__ import annotations

import hashlib
import warnings

from gradprobe.study.analysis import analyze
from gradprobe.training.budget import OutOfReachWarning

from test_budget_reach import _old_study
from test_budget_reach_once import _FROZEN


def test_analyze_called_directly_warns_once_under_always(tmp_path):
    study = _old_study(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = analyze(study, write=False, figures=False)
    reach = [w for w in caught if issubclass(w.category, OutOfReachWarning)]
    assert [(str(w.message), w.filename) for w in reach] == [(f"plan {study / 'plan.toml'}: {_FROZEN}", __file__)]
    assert result["plan_sha256"] == hashlib.sha256((study / "plan.toml").read_bytes()).hexdigest()
    with warnings.catch_warnings(record=True) as caught:  # each call is one read: a second call warns again
        warnings.simplefilter("always")
        analyze(study, write=False, figures=False)
    assert sum(issubclass(w.category, OutOfReachWarning) for w in caught) == 1
