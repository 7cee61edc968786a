"""``replicate_of.json`` is portable: ``gradprobe study --replicate SRC --out DIR`` records the source study as a
path relative to DIR and its name, so the pair of folders still links up after it is moved or copied elsewhere;
files written before (an absolute ``source``) still read, and a source that is nowhere is refused in one line."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from gradprobe.cli import main as cli_main
from gradprobe.study import replicate as replicate_mod
from gradprobe.study.folder import StudyError
from gradprobe.study.replicate import read_replicate_record, replicate_record, replicate_source
from gradprobe.study.result import StudyResult

from study_helpers import make_study

REPO = Path(__file__).resolve().parents[2]


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
    (src / "plan.toml").write_text('name = "x"\n')
    sha = hashlib.sha256(b'name = "x"\n').hexdigest()  # the plan's: replicate_source checks it
    record = replicate_record(src, out, source_sha256=sha, seeds=(4, 5), heldout_seed=4)
    assert record == {"source": "../../../data/study_x", "source_name": "study_x", "source_plan_sha256": sha,
                      "seeds": [4, 5], "heldout_seed": 4}
    (out / "replicate_of.json").write_text(json.dumps(record))
    assert replicate_source(out) == src


def test_an_old_absolute_source_still_reads_and_names_the_same_cell(tmp_path, unseen):
    src, rep = tmp_path / "data" / "study_x", tmp_path / "data" / "study_x_rep"
    src.mkdir(parents=True)
    rep.mkdir()
    (src / "study.json").write_text(json.dumps({"plan_sha256": "abc"}))  # a study recording the plan it froze
    (rep / "replicate_of.json").write_text(json.dumps({"source": str(src), "source_plan_sha256": "abc",
                                                       "seeds": [4], "heldout_seed": 4}))
    assert replicate_source(rep) == src
    # was: a study.json "{}" alone (no plan_sha256, no plan.toml) was taken though the record's sha cannot be checked
    (src / "study.json").write_text("{}")
    with pytest.raises(StudyError, match=r"records source_plan_sha256 abc, but the study at .*study_x has no "
                       r"plan\.toml and a study\.json that records no plan_sha256, so its plan sha256 cannot be read"):
        replicate_source(rep)
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
        with pytest.raises(StudyError) as e:
            replicate_source(tmp_path / rep)
        assert f"no study folder (with plan.toml or study.json) is at {tmp_path / src}; copy the source" in str(e.value)


def test_a_missing_source_is_refused_in_one_line(tmp_path, monkeypatch):
    src, rep = _replicate(tmp_path, monkeypatch)
    shutil.rmtree(src)
    path = rep / "replicate_of.json"
    with pytest.raises(StudyError) as e:
        replicate_source(rep)
    assert str(e.value) == (f"{path} names source '../finished', but no study folder (with plan.toml or study.json) is "
                            f"at {src}; copy the source study to {src} (beside the replicate)")
    path.write_text(json.dumps({"source": "/gone/data/finished"}))
    with pytest.raises(StudyError) as e:
        replicate_source(rep)
    assert str(e.value) == (f"{path} names source '/gone/data/finished', but no study folder (with plan.toml or "
                            f"study.json) is at /gone/data/finished nor {src}; copy the source study to {src} (beside "
                            "the replicate)")
    path.write_text('{"seeds": [2]}')
    with pytest.raises(StudyError, match=r"has no 'source' path of the replicated study \(got None\)"):
        replicate_source(rep)
    path.write_text("[1, 2]")
    with pytest.raises(StudyError, match=r"replicate_of.json is not a JSON object \(AttributeError\)"):
        replicate_source(rep)
    path.unlink()
    with pytest.raises(StudyError, match=r"replicate_of.json not found: .* is no replicate") as e:
        replicate_source(rep)
    assert "\n" not in str(e.value)


def _rep_with(tmp_path, record: dict) -> Path:
    """``tmp_path/data/rep`` holding ``record`` as its replicate_of.json, beside the study ``data/study_x``."""
    src, rep = tmp_path / "data" / "study_x", tmp_path / "data" / "rep"
    src.mkdir(parents=True)
    (src / "plan.toml").write_text('name = "x"\n')
    rep.mkdir()
    (rep / "replicate_of.json").write_text(json.dumps(record))
    return rep


@pytest.mark.parametrize("name", ["..", ".", "", "a/study_x", "../study_x", "/gone/data/study_x", 7, None])
def test_a_source_name_that_is_no_folder_name_is_refused_by_both_readers(tmp_path, unseen, name):
    rep = _rep_with(tmp_path, {"source": "/gone/data/study_x", "source_name": name})
    path = rep / "replicate_of.json"
    why = (f"{path} has source_name {name!r}, not a folder's name (one path part, no '..'); set it to 'study_x', "
           "the last part of source '/gone/data/study_x', or restore it from a copy of the replicate")
    with pytest.raises(StudyError) as e:  # was: data/.. (the folder above the studies) for ".."
        replicate_source(rep)
    assert str(e.value).startswith(why) and "\n" not in str(e.value)
    with pytest.raises(ValueError) as v:  # was: the cell ".."
        unseen.cell_of(rep)
    assert str(v.value) == str(e.value)


@pytest.mark.parametrize("source", ["../study_x", "/gone/data/study_x"])
def test_a_source_name_other_than_the_sources_last_part_is_refused(tmp_path, unseen, source):
    rep = _rep_with(tmp_path, {"source": source, "source_name": "study_y"})
    (tmp_path / "data" / "study_y").mkdir()
    (tmp_path / "data" / "study_y" / "plan.toml").write_text('name = "y"\n')
    path = rep / "replicate_of.json"
    why = (f"{path} has source_name 'study_y', but its source {source!r} ends in 'study_x': the two must name one "
           "study; set source_name to 'study_x' if source is right, or restore it from a copy of the replicate")
    with pytest.raises(StudyError) as e:  # was: study_x for the relative source, study_y for the absolute one
        replicate_source(rep)
    assert str(e.value).startswith(why)
    with pytest.raises(ValueError, match="has source_name 'study_y', but its source"):  # was: pooled as study_y
        unseen.cell_of(rep)
    (rep / "replicate_of.json").write_text(json.dumps({"source": source, "source_name": "study_x"}))
    assert replicate_source(rep) == tmp_path / "data" / "study_x" and unseen.cell_of(rep) == "study_x"
    assert read_replicate_record(rep) == {"source": source, "source_name": "study_x"}
    assert read_replicate_record(tmp_path / "data" / "study_x") is None  # no replicate_of.json: no replicate


def test_a_folder_without_a_study_is_not_the_source(tmp_path):
    rep = _rep_with(tmp_path, {"source": "../study_x", "source_name": "study_x"})
    (tmp_path / "data" / "study_x" / "plan.toml").unlink()  # a folder of that name, but no study in it
    (tmp_path / "data" / "study_x" / "notes.txt").write_text("x")
    with pytest.raises(StudyError) as e:  # was: the empty folder, taken as the source
        replicate_source(rep)
    src = tmp_path / "data" / "study_x"
    assert str(e.value).endswith(f"is at {src}; copy the source study to {src} (beside the replicate)")
    (src / "study.json").write_text("{}")  # a study's record alone makes it one
    assert replicate_source(rep) == src
    # an absolute source that still exists but holds no study: the study of that name beside it is taken
    old = tmp_path / "old" / "study_x"
    old.mkdir(parents=True)
    (rep / "replicate_of.json").write_text(json.dumps({"source": str(old)}))
    assert replicate_source(rep) == src  # was: tmp/old/study_x, a folder with no study


def test_a_source_not_beside_the_replicate_is_not_said_to_be(tmp_path, monkeypatch):
    rep = tmp_path / "runs" / "deep" / "rep"
    rep.mkdir(parents=True)
    (rep / "replicate_of.json").write_text(json.dumps({"source": "../../elsewhere/study_x", "source_name": "study_x"}))
    with pytest.raises(StudyError) as e:  # was: "... (beside the replicate)", two folders up from it
        replicate_source(rep)
    want = tmp_path / "runs" / "elsewhere" / "study_x"
    assert str(e.value) == (f"{rep / 'replicate_of.json'} names source '../../elsewhere/study_x', but no study folder "
                            f"(with plan.toml or study.json) is at {want}; copy the source study to {want}")
    # a replicate folder given relative to the working directory: "beside" is judged on the normalized paths
    (rep / "replicate_of.json").write_text(json.dumps({"source": "../study_x", "source_name": "study_x"}))
    monkeypatch.chdir(rep.parent)
    with pytest.raises(StudyError, match=r"is at study_x; copy the source study to study_x \(beside the replicate\)$"):
        replicate_source("rep")
    monkeypatch.chdir(rep)
    with pytest.raises(StudyError, match=r"is at \.\./study_x; copy the source study to \.\./study_x \(beside the"):
        replicate_source(".")
