"""``replicate_of.json`` is portable: ``gradprobe study --replicate SRC --out DIR`` records the source study as a
path relative to DIR and its name, so the pair of folders still links up after it is moved or copied elsewhere;
files written before (an absolute ``source``) still read, and a source that is nowhere is refused in one line."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from gradprobe.cli import main as cli_main
from gradprobe.study import replicate as replicate_mod
from gradprobe.study.folder import StudyError
from gradprobe.study.replicate import replicate_record, replicate_source
from gradprobe.study.result import StudyResult

from study_helpers import make_study

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def unseen():
    spec = importlib.util.spec_from_file_location("unseen_study", REPO / "benchmarks" / "unseen_study.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _replicate(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """A finished hand-made study ``tree/finished`` and its replicate ``tree/rep`` written by the CLI (the study's
    runs faked: only the replicate's folder and replicate_of.json are of interest here)."""
    src = make_study(tmp_path / "tree" / "finished", seeds=2)
    study = json.loads((src / "study.json").read_text())  # the plan sha256 the study records: that of its plan
    study["plan_sha256"] = hashlib.sha256((src / "plan.toml").read_bytes()).hexdigest()
    (src / "study.json").write_text(json.dumps(study))
    ran = []

    def fake_run_study(path, out, **kw):
        ran.append(Path(out))
        return StudyResult(out=Path(out), plan_sha256="x")

    monkeypatch.setattr(replicate_mod, "run_study", fake_run_study)
    rep = tmp_path / "tree" / "rep"
    assert cli_main(["study", "--replicate", str(src), "--out", str(rep), "--executor", "inline", "--no-analysis"]) == 0
    assert ran == [rep]
    return src, rep


def test_a_replicate_records_its_source_relative_to_it_and_finds_it_after_a_move(tmp_path, monkeypatch, unseen):
    src, rep = _replicate(tmp_path, monkeypatch)
    record = json.loads((rep / "replicate_of.json").read_text())
    assert record == {"source": "../finished", "source_name": "finished",
                      "source_plan_sha256": hashlib.sha256((src / "plan.toml").read_bytes()).hexdigest(),
                      "seeds": [2, 3], "heldout_seed": 2}
    assert replicate_source(rep) == src
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(tmp_path / "tree", moved)
    shutil.rmtree(tmp_path / "tree")  # the machine that ran it is gone
    assert replicate_source(moved / "rep") == moved / "finished"
    assert replicate_source(str(moved / "rep")).joinpath("plan.toml").read_text().startswith("\nname = \"handmade\"")
    assert unseen.cell_of(moved / "rep") == "finished"


def test_the_source_path_is_relative_wherever_the_replicate_is(tmp_path):
    src, out = tmp_path / "data" / "study_x", tmp_path / "runs" / "deep" / "study_x_rep"
    src.mkdir(parents=True)
    out.mkdir(parents=True)
    record = replicate_record(src, out, source_sha256="abc", seeds=(4, 5), heldout_seed=4)
    assert record == {"source": "../../../data/study_x", "source_name": "study_x", "source_plan_sha256": "abc",
                      "seeds": [4, 5], "heldout_seed": 4}
    (out / "replicate_of.json").write_text(json.dumps(record))
    assert replicate_source(out) == src


def test_an_old_absolute_source_still_reads_and_names_the_same_cell(tmp_path, unseen):
    src, rep = tmp_path / "data" / "study_x", tmp_path / "data" / "study_x_rep"
    src.mkdir(parents=True)
    rep.mkdir()
    (rep / "replicate_of.json").write_text(json.dumps({"source": str(src), "source_plan_sha256": "abc",
                                                       "seeds": [4], "heldout_seed": 4}))
    assert replicate_source(rep) == src
    assert unseen.cell_of(rep) == "study_x"
    # the absolute path of the machine that ran it is gone: the study of that name beside it is taken
    (rep / "replicate_of.json").write_text(json.dumps({"source": "/gone/snap/data/study_x", "seeds": [4]}))
    assert replicate_source(rep) == src
    assert unseen.cell_of(rep) == "study_x"
    (rep / "replicate_of.json").write_text(json.dumps({"source": "../study_x", "source_name": "study_x"}))
    assert unseen.cell_of(rep) == "study_x"  # the new form: the same cell


def test_the_shipped_replicates_find_their_sources_beside_them(tmp_path):
    pairs = {"study_tiny_replicate_heldout4k": "study_tiny_heldout4k",
             "study_tiny_replicate2_heldout4k": "study_tiny_heldout4k",
             "study_tiny_hard_replicate_heldout4k": "study_tiny_hard_heldout4k",
             "study_tiny_llama_replicate_heldout4k": "study_tiny_llama_heldout4k"}
    for rep, src in pairs.items():
        record = json.loads((REPO / "data" / rep / "replicate_of.json").read_text())
        assert record["source"] == f"../{src}" and record["source_name"] == src
        sha = hashlib.sha256((REPO / "data" / src / "plan.toml").read_bytes()).hexdigest()
        assert record["source_plan_sha256"] == sha and record["seeds"] and isinstance(record["heldout_seed"], int)
        assert replicate_source(REPO / "data" / rep) == REPO / "data" / src
        (tmp_path / rep).mkdir()  # copied without its source: the replicate alone is refused, naming the fix
        shutil.copy(REPO / "data" / rep / "replicate_of.json", tmp_path / rep)
        with pytest.raises(StudyError, match=f"no study folder is at {tmp_path / src}; copy the source study"):
            replicate_source(tmp_path / rep)


def test_a_missing_source_is_refused_in_one_line(tmp_path, monkeypatch):
    src, rep = _replicate(tmp_path, monkeypatch)
    shutil.rmtree(src)
    path = rep / "replicate_of.json"
    with pytest.raises(StudyError) as e:
        replicate_source(rep)
    assert str(e.value) == (f"{path} names source '../finished', but no study folder is at {src}; copy the source "
                            f"study to {src} (beside the replicate)")
    path.write_text(json.dumps({"source": "/gone/data/finished"}))
    with pytest.raises(StudyError) as e:
        replicate_source(rep)
    assert str(e.value) == (f"{path} names source '/gone/data/finished', but no study folder is at "
                            f"/gone/data/finished nor {src}; copy the source study to {src} (beside the replicate)")
    path.write_text('{"seeds": [2]}')
    with pytest.raises(StudyError, match=r"has no 'source' path of the replicated study \(got None\)"):
        replicate_source(rep)
    path.write_text("[1, 2]")
    with pytest.raises(StudyError, match=r"replicate_of.json cannot be read as a JSON object \(AttributeError\)"):
        replicate_source(rep)
    path.unlink()
    with pytest.raises(StudyError, match=r"replicate_of.json not found: .* is no replicate") as e:
        replicate_source(rep)
    assert "\n" not in str(e.value)
