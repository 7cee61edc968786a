"""notebooks/03_calibration_report.ipynb reads what its text says (several shipped studies, so the headline is
leave-one-study-out; it said "several" and read data/study_tiny alone) and marks a coverage of infinite conformal
intervals "(infinite intervals)" as ``calib report`` prints it (its table showed "coverage calibrated 1.0" bare).
Read with :mod:`ast` (the notebook itself runs in tests/test_notebooks.py); the notebook is committed clean."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import numpy as np

from calib.cli import _cov

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "03_calibration_report.ipynb"


def _cells() -> list[dict]:
    return json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]


def _code() -> ast.Module:
    return ast.parse("\n".join("".join(c["source"]) for c in _cells() if c["cell_type"] == "code"))


def test_the_notebook_reads_several_shipped_studies_as_its_text_says():
    tree = _code()
    studies = next(node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                   and any(isinstance(t, ast.Name) and t.id == "STUDIES" for t in node.targets))
    names = [e.right.value for e in studies.elts]  # DATA / "name"
    assert len(set(names)) >= 2, names  # leave-one-study-out needs two studies at least
    assert all((REPO / "data" / n / "study.json").is_file() for n in names)
    text = "".join("".join(c["source"]) for c in _cells())
    assert "With one study, leave-one-study-out is impossible and the report says so: the numbers are then" not in text
    assert "the headline is\nleave-one-study-out" in text


def test_the_coverage_column_carries_the_caveat_the_cli_prints():
    tree = _code()
    helper = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "coverage")
    space = {"np": np}
    exec(compile(ast.Module([helper], []), str(NOTEBOOK), "exec"), space)
    coverage = space["coverage"]
    for record in ({"coverage": 1.0, "mean_interval_width": math.inf}, {"coverage": 0.875, "mean_interval_width": 4.2}):
        assert coverage(record) == _cov(record)
    assert coverage({"coverage": 1.0, "mean_interval_width": math.inf}) == "1.00 (infinite intervals)"
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in _cells() if c["cell_type"] == "code")
