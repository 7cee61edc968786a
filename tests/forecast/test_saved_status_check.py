"""A saved curve's ``status`` is checked with the fit's own rule (curve_fit.fit_statuses), not a copy of it.

A tampered status is still refused in one line naming the file, the field and the fix; curves whose parameters
the fit left on a bound still load; and a status the fit never writes for a parameter on a bound
(``not_identified`` with a standard error below its scale) is refused.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from gradprobe.forecast import CurveError, ReferenceCurve, curve_file, curve_fit, default_curve_path

FIX = "the file was edited or damaged: rebuild it from its source (ReferenceCurve.from_study"


def _tampered(tmp_path: Path, name: str, status: str) -> Path:
    d = json.loads(default_curve_path().read_text())
    d["status"][name] = status
    path = tmp_path / "curve.json"
    path.write_text(json.dumps(d))
    return path


@pytest.mark.parametrize("name,status,detail", [
    ("n_mid", "identified", r'is "identified" but standard_errors\.n_mid is 192\.456375\d*: identified needs a '
                            r"standard error below 57\.14, the parameter's scale"),
    ("B", "not_identified", r'is "not_identified" but standard_errors\.B 0\.248312\d* is below 0\.5107, the '
                            r"parameter's scale: the fit marks that identified \("),
    ("A", "at_bound", r'is "at_bound" but params\.A 89\.817339\d* is not on a bound of the fit\'s range'),
])
def test_a_tampered_status_is_refused_with_its_message(tmp_path, name, status, detail):
    path = _tampered(tmp_path, name, status)
    with pytest.raises(CurveError) as e:
        ReferenceCurve.load(path)
    msg = str(e.value)
    assert msg.startswith(f"reference curve file {str(path)!r}: field status.{name} "), msg
    assert re.search(detail, msg) and FIX in msg and "\n" not in msg, msg


def test_the_check_asks_the_fits_rule(monkeypatch):
    """The shipped curve passes with the real rule, each fitted parameter asked about; a rule that marks everything
    not_identified refuses its identified A: the check has no rule of its own."""
    calls = []
    real = curve_fit.fit_statuses
    monkeypatch.setattr(curve_file, "fit_statuses", lambda *a, **k: calls.append(a) or real(*a, **k))
    ReferenceCurve.load(default_curve_path())
    assert calls and all(list(a[0]) == ["A", "n_mid", "B"] for a in calls)
    assert {tuple(sorted(real(*a, r0=None, b_fixed=None).items())) for a in calls} == {
        (("A", "identified"), ("B", "identified"), ("n_mid", "not_identified"))}
    monkeypatch.setattr(curve_file, "fit_statuses", lambda names, *a, **k: {n: "not_identified" for n in names})
    with pytest.raises(CurveError, match=r'field status\.A is "identified" but standard_errors\.A is 19\.868'):
        ReferenceCurve.load(default_curve_path())


@pytest.mark.parametrize("accuracy,B,name", [
    ([10 + 0.1 * u for u in (0, 2, 5, 10, 20)] + [10.2 + 0.1 * u for u in (0, 2, 5, 10, 20)], None, "A"),
    ([10 + 0.1 * u for u in (0, 2, 5, 10, 20)] + [10.2 + 0.1 * u for u in (0, 2, 5, 10, 20)], 1.0, "A"),
    ([10, 40, 40.2, 40.1, 40.3, 10, 39.9, 40.1, 40.0, 40.2], None, "n_mid"),
], ids=["linear-A-at-100", "linear-B-fixed", "saturated-n_mid-at-lower-bound"])
def test_curves_with_a_parameter_on_a_bound_still_load(tmp_path, monkeypatch, accuracy, B, name):
    calls = []
    real = curve_fit.fit_statuses
    monkeypatch.setattr(curve_file, "fit_statuses", lambda *a, **k: calls.append(real(*a, **k)) or calls[-1])
    c = ReferenceCurve(updates=[0, 2, 5, 10, 20] * 2, accuracy=accuracy, seeds=["0"] * 5 + ["1"] * 5, B=B,
                       n_replicates=5)
    assert c.status[name] == "at_bound"
    d = ReferenceCurve.load(c.save(tmp_path / "c.json"))
    assert d.status == c.status and d.params == c.params
    assert any(st[name] == "at_bound" for st in calls)  # the check's rule puts it on the bound too


def _fake_curve(B: float, status_B: str, se_B: float):
    """What _check_status reads of a curve: B free, on or near its upper bound 10."""
    return SimpleNamespace(params={"R0": 10.0, "A": 40.0, "n_mid": 5.0, "B": B},
                           points=pd.DataFrame({"update": [0.0, 2.0, 5.0, 10.0, 20.0]}),
                           standard_errors={"A": 1.0, "n_mid": 1.0, "B": se_B},
                           status={"A": "identified", "n_mid": "identified", "B": status_B, "R0": "fixed"})


def test_not_identified_with_a_small_standard_error_on_a_bound_is_refused():
    """The fit marks a parameter on a bound at_bound and one off its bounds with a standard error below its scale
    identified, never not_identified (the check before this change let it pass within 2e-6 of a bound)."""
    for B in (10.0, 10.0 - 1.5e-5):  # on the bound; 1.5e-6 of the width (9.9) inside it
        with pytest.raises(CurveError, match=r'field status\.B is "not_identified" but standard_errors\.B 0\.5 is '
                                             r"below 10, the parameter's scale: the fit marks that at_bound or "
                                             r"identified \(gradprobe\.forecast\.curve_fit\)"):
            curve_file._check_status("c.json", _fake_curve(B, "not_identified", 0.5))
    curve_file._check_status("c.json", _fake_curve(10.0 - 1.5e-5, "not_identified", 12.0))  # se above the scale
    curve_file._check_status("c.json", _fake_curve(10.0 - 1.5e-5, "identified", 0.5))  # the fit's off-bound call
    curve_file._check_status("c.json", _fake_curve(10.0 - 1.5e-5, "at_bound", float("inf")))  # its on-bound call
