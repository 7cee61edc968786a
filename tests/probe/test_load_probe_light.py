"""``gradprobe.load_probe`` checks a probe.json without pandas or scipy (numpy only): its checks
(``gradprobe.forecast.probe_input``) no longer run ``gradprobe/forecast/__init__.py``'s imports of the forecast
(pandas, scipy: about 1.2 s of a first read; ``benchmarks/load_probe_import.py`` times it), which now load on first
use; the forecast's public names still come from ``gradprobe.forecast``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBES = [ROOT / "data" / "study_tiny" / "probe", ROOT / "data" / "study_tiny_guided" / "probe" / "guided" / "guided"]


def _fresh(code: str) -> dict:
    """Run ``code`` (which sets ``out``) in a fresh interpreter with this checkout first on sys.path; ``out`` plus
    the heavy modules imported, as JSON."""
    script = (f"import sys, json\nsys.path.insert(0, {str(ROOT)!r})\n{code}\n"
              "print(json.dumps({'out': out, 'heavy': [m for m in ('pandas', 'scipy', 'torch') if m in sys.modules]}))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("folder", PROBES, ids=["study_tiny", "guided"])
def test_load_probe_of_a_shipped_probe_imports_no_pandas_or_scipy(folder):
    code = (f"import gradprobe\nr = gradprobe.load_probe({str(folder)!r})\n"
            "out = [r.raw['rewards'][0]['name'], len(r.raw['rewards'])]")
    result = _fresh(code)
    expected = json.loads((folder / "probe.json").read_text())["rewards"]
    assert result["out"] == [expected[0]["name"], len(expected)]  # it read the file
    assert result["heavy"] == []  # was: ["pandas", "scipy"]


def test_the_forecast_names_still_load_from_the_package():
    result = _fresh("import gradprobe.forecast as F\n"
                    "light = [m for m in ('pandas', 'scipy') if m in sys.modules]\n"
                    "from gradprobe.forecast import METHODS, forecast_rewards\n"
                    "out = [light, list(METHODS), forecast_rewards.__module__, F.curves.__name__, "
                    "F.ReferenceCurve.__module__, sorted(set(F.__all__) - set(dir(F)))]")
    light, methods, forecast_module, curves, curve_module, undiscoverable = result["out"]
    assert light == []  # importing the package alone loads neither (was: both)
    assert methods == ["probe", "cost_only", "signal_proxy"]
    assert forecast_module == "gradprobe.forecast.budget_forecast"
    assert curves == curve_module == "gradprobe.forecast.curves"
    assert undiscoverable == [] and set(result["heavy"]) >= {"pandas", "scipy"}  # loaded on first use
