"""``replicate_source`` checks what it finds and says plainly what is wrong.

Before: a copy of another study renamed to the source's name beside the replicate was returned (the record's
``source_plan_sha256`` was ignored); a replicate folder that does not exist (or is a file) was refused as
"replicate_of.json not found ... restore it"; a ``source`` leading to a file said "copy the source study to
.../plan.toml"; a file that is not JSON gave no line or column; a control character in ``source`` was printed raw
in the paths of the message.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from gradprobe.study.folder import StudyError
from gradprobe.study.replicate import replicate_source, study_plan_sha

REPO = Path(__file__).resolve().parents[2]
PLAN_X, PLAN_Y = 'name = "x"\n', 'name = "y"\n'
SHA_X, SHA_Y = (hashlib.sha256(t.encode()).hexdigest() for t in (PLAN_X, PLAN_Y))
FIX = "restore it from a copy of the replicate (`gradprobe study --replicate SRC --out DIR` writes it)"


def _tree(tmp_path, record, plan: str = PLAN_X) -> tuple[Path, Path]:
    """``data/study_x`` (a study of ``plan``) and ``data/rep`` holding ``record`` (JSON text or an object)."""
    src, rep = tmp_path / "data" / "study_x", tmp_path / "data" / "rep"
    src.mkdir(parents=True)
    (src / "plan.toml").write_text(plan)
    rep.mkdir()
    (rep / "replicate_of.json").write_text(record if isinstance(record, str) else json.dumps(record))
    return src, rep


def _refusal(folder) -> str:
    with pytest.raises(StudyError) as e:
        replicate_source(folder)
    assert "\n" not in str(e.value)
    return str(e.value)


def test_another_study_under_the_sources_name_is_refused_naming_both_shas(tmp_path):
    src, rep = _tree(tmp_path, {"source": "../study_x", "source_name": "study_x", "source_plan_sha256": SHA_X},
                     plan=PLAN_Y)  # a copy of study y, renamed study_x
    assert _refusal(rep) == (  # was: src, returned without complaint
        f"{rep / 'replicate_of.json'} records source_plan_sha256 {SHA_X[:12]}, but the study at {src} has plan sha256 "
        f"{SHA_Y[:12]} ({src / 'plan.toml'}): it is another study (or another plan) than the one replicated; put the "
        f"replicated study (plan sha256 {SHA_X[:12]}) there, or restore replicate_of.json from a copy of the replicate")
    (src / "plan.toml").write_text(PLAN_X)
    assert replicate_source(rep) == src
    # study.json's plan_sha256 is the study's own record: it wins over its plan.toml
    (src / "study.json").write_text(json.dumps({"plan_sha256": SHA_Y}))
    assert _refusal(rep).endswith(f"has plan sha256 {SHA_Y[:12]} ({src / 'study.json'}): it is another study (or "
                                  f"another plan) than the one replicated; put the replicated study (plan sha256 "
                                  f"{SHA_X[:12]}) there, or restore replicate_of.json from a copy of the replicate")
    (src / "study.json").write_text(json.dumps({"plan_sha256": SHA_X}))
    assert replicate_source(rep) == src


def test_an_absolute_source_holding_another_study_gives_way_to_the_right_one_beside(tmp_path):
    src, rep = _tree(tmp_path, {})
    old = tmp_path / "old" / "study_x"
    old.mkdir(parents=True)
    (old / "plan.toml").write_text(PLAN_Y)  # a study at the old path, but another plan
    (rep / "replicate_of.json").write_text(json.dumps({"source": str(old), "source_plan_sha256": SHA_X}))
    assert replicate_source(rep) == src  # was: old, the other plan
    (src / "plan.toml").write_text(PLAN_Y)  # neither holds the replicated plan: the first is named
    assert _refusal(rep).startswith(f"{rep / 'replicate_of.json'} records source_plan_sha256 {SHA_X[:12]}, but the "
                                    f"study at {old} has plan sha256 {SHA_Y[:12]} ({old / 'plan.toml'})")
    # a record without source_plan_sha256 (files written before it) takes the study found
    (rep / "replicate_of.json").write_text(json.dumps({"source": str(old)}))
    assert replicate_source(rep) == old


@pytest.mark.parametrize("sha, shown", [(7, "7"), ("", "''"), (["ab"], "['ab']")])
def test_a_source_plan_sha256_that_is_no_string_is_refused(tmp_path, sha, shown):
    _, rep = _tree(tmp_path, {"source": "../study_x", "source_plan_sha256": sha})
    assert _refusal(rep) == (f"{rep / 'replicate_of.json'} has source_plan_sha256 {shown}, not the hex sha256 of the "
                             f"source study's plan.toml (a string); {FIX}")


def test_a_replicate_folder_that_is_not_there_or_is_a_file_says_so(tmp_path):
    fix = ("pass the folder of the replicate study (the --out of `gradprobe study --replicate SRC --out DIR`, holding "
           "replicate_of.json)")
    assert _refusal(tmp_path / "nope") == f"replicate folder {tmp_path / 'nope'} does not exist; {fix}"  # was: "...
    # replicate_of.json not found: ... is no replicate, or replicate_of.json was lost; restore it ..."
    (tmp_path / "file").write_text("x")
    assert _refusal(tmp_path / "file") == f"replicate folder {tmp_path / 'file'} is a file, not a folder; {fix}"


def test_a_source_leading_to_a_file_is_not_told_to_copy_a_study_onto_it(tmp_path):
    src, rep = _tree(tmp_path, {"source": "../study_x/plan.toml"})
    assert _refusal(rep) == (  # was: "... copy the source study to .../study_x/plan.toml (beside the replicate)"
        f"{rep / 'replicate_of.json'} names source '../study_x/plan.toml', but {src / 'plan.toml'} is a file, not a "
        f"study folder; set source to the source study's folder, relative to {rep}, e.g. '../study_x' (the folder "
        "holding plan.toml)")
    (tmp_path / "data" / "notes.txt").write_text("x")  # a file outside any study: no example
    (rep / "replicate_of.json").write_text(json.dumps({"source": "../notes.txt"}))
    assert _refusal(rep) == (f"{rep / 'replicate_of.json'} names source '../notes.txt', but "
                             f"{tmp_path / 'data' / 'notes.txt'} is a file, not a study folder; set source to the "
                             f"source study's folder, relative to {rep}")


@pytest.mark.parametrize("text, where", [
    ('{"source": ,}', "line 1, column 12 (Expecting value)"),
    ('{\n "source": "../study_x"\n,}', "line 3, column 2 (Expecting property name enclosed in double quotes)"),
    ("", "line 1, column 1 (Expecting value)")])
def test_a_file_that_is_not_json_is_refused_with_its_line_and_column(tmp_path, text, where):
    _, rep = _tree(tmp_path, text)
    assert _refusal(rep) == (f"{rep / 'replicate_of.json'} is not a JSON object (JSONDecodeError): not valid JSON at "
                             f"{where}; {FIX}")  # was: "is not a JSON object (JSONDecodeError); ..."


def test_a_file_that_is_not_utf8_names_the_byte(tmp_path):
    _, rep = _tree(tmp_path, "{}")
    (rep / "replicate_of.json").write_bytes(b'{"source": "\xff"}')
    assert _refusal(rep) == (f"{rep / 'replicate_of.json'} is not a JSON object (UnicodeDecodeError): not UTF-8 text "
                             f"(byte 0xff at offset 12); {FIX}")


@pytest.mark.parametrize("name", ["stu\x00dy", "stu\x1bdy", "stu\ndy"])
def test_a_control_character_in_source_is_shown_escaped(tmp_path, name):
    _, rep = _tree(tmp_path, {"source": f"../{name}"})
    want = tmp_path / "data" / name
    assert _refusal(rep) == (  # was: the character printed raw in the two paths
        f"{rep / 'replicate_of.json'} names source {'../' + name!r}, but no study folder (with plan.toml or "
        f"study.json) is at {str(want)!r}; copy the source study to {str(want)!r} (beside the replicate)")


def test_the_shipped_replicates_still_find_their_sources_and_a_swapped_one_is_refused(tmp_path):
    rep, src = "study_tiny_replicate_heldout4k", "study_tiny_heldout4k"
    assert replicate_source(REPO / "data" / rep) == REPO / "data" / src
    (tmp_path / rep).mkdir()
    shutil.copy(REPO / "data" / rep / "replicate_of.json", tmp_path / rep)
    shutil.copytree(REPO / "data" / "study_tiny_hard_heldout4k", tmp_path / src,  # another study under its name
                    ignore=shutil.ignore_patterns("runs", "figures", "*.jsonl*", "*.html", "*.png"))
    want = json.loads((REPO / "data" / rep / "replicate_of.json").read_text())["source_plan_sha256"]
    other = json.loads((tmp_path / src / "study.json").read_text())["plan_sha256"]
    assert want != other
    assert _refusal(tmp_path / rep).startswith(  # was: the copy of study_tiny_hard, returned
        f"{tmp_path / rep / 'replicate_of.json'} records source_plan_sha256 {want[:12]}, but the study at "
        f"{tmp_path / src} has plan sha256 {other[:12]} ({tmp_path / src / 'study.json'})")


def test_the_benchmark_pools_by_the_same_plan_sha_rule_as_replicate_source(unseen, tmp_path):
    """benchmarks/unseen_study.cell_of reads the source's plan sha256 as replicate_source does (study.json's, else
    plan.toml's): a source whose study.json records none is still checked against its plan.toml."""
    src, rep = tmp_path / "a", tmp_path / "rep"
    src.mkdir(), rep.mkdir()
    (src / "plan.toml").write_text("name = 'a'\n")
    (src / "study.json").write_text("{}")
    (rep / "replicate_of.json").write_text(json.dumps({"source": "../a", "source_plan_sha256": "0" * 64}))
    with pytest.raises(ValueError, match=r"records source_plan_sha256 000000000000, but .*plan.toml has plan sha256"):
        unseen.cell_of(rep)
    (rep / "replicate_of.json").write_text(json.dumps({"source": "../a", "source_plan_sha256": study_plan_sha(src)[0]}))
    assert unseen.cell_of(rep) == "a"


def _bare(tmp_path, record: dict) -> tuple[Path, Path]:
    """:func:`_tree` without the source's plan.toml: a folder whose plan sha256 is up to each test."""
    src, rep = _tree(tmp_path, record)
    (src / "plan.toml").unlink()
    return src, rep


SHA = "ab" * 32
END = (f"so its plan sha256 cannot be read to check that it is the study replicated; put the replicated study's "
       f"plan.toml (plan sha256 {SHA[:12]}) there, or restore replicate_of.json from a copy of the replicate")


def test_a_source_whose_plan_sha_cannot_be_read_is_refused_when_the_record_has_one(tmp_path):
    src, rep = _bare(tmp_path, {"source": "../study_x", "source_plan_sha256": SHA})
    (src / "study.json").write_text("{}")  # a study folder, but no plan_sha256 and no plan.toml
    head = f"{rep / 'replicate_of.json'} records source_plan_sha256 {SHA[:12]}, but the study at {src} "
    # was: src, returned unchecked
    assert _refusal(rep) == f"{head}has no plan.toml and a study.json that records no plan_sha256, {END}"
    (src / "study.json").write_text("not json")
    assert _refusal(rep) == f"{head}has no plan.toml and a study.json that records no plan_sha256, {END}"
    (src / "study.json").unlink()
    (src / "plan.toml").mkdir()  # a plan.toml that cannot be read beside a study.json: a study, unreadable
    (src / "study.json").write_text("{}")
    assert _refusal(rep) == (f"{head}has a plan.toml that cannot be read and a study.json that records no "
                                 f"plan_sha256, {END}")
    (src / "study.json").write_text(json.dumps({"plan_sha256": SHA}))  # the fix: a sha that can be checked
    assert replicate_source(rep) == src
    (src / "study.json").write_text("{}")
    (rep / "replicate_of.json").write_text(json.dumps({"source": "../study_x"}))  # no sha recorded: nothing to check
    assert replicate_source(rep) == src


def test_an_unreadable_candidate_gives_way_to_a_checked_one_beside_the_replicate(tmp_path):
    src, rep = _bare(tmp_path, {})
    (src / "study.json").write_text(json.dumps({"plan_sha256": SHA}))
    old = tmp_path / "old" / "study_x"
    old.mkdir(parents=True)
    (old / "study.json").write_text("{}")  # a study at the old absolute path whose plan sha256 cannot be read
    (rep / "replicate_of.json").write_text(json.dumps({"source": str(old), "source_plan_sha256": SHA}))
    assert replicate_source(rep) == src  # was: old, unchecked
    (src / "study.json").write_text(json.dumps({"plan_sha256": "cd" * 32}))  # neither can be it: the first is named
    assert _refusal(rep).startswith(f"{rep / 'replicate_of.json'} records source_plan_sha256 {SHA[:12]}, but the "
                                        f"study at {old} has no plan.toml and a study.json that records no "
                                        "plan_sha256")
