"""``freeze_plan`` acted on a read of the plan made before the study folder's lock was held (``gradprobe study``
reads the plan, then locks the folder, then freezes): a plan read as the folder's frozen one (its token budget out of
reach of its updates only warned about, as for a study frozen before such budgets were refused) stayed read so when
another command had replaced that study in between, and ``--restart`` then deleted the other study and froze the
out-of-reach plan as a new study, which a new plan's check refuses. Under the lock the folder's state is read again:
a plan the folder no longer holds frozen is checked as a new plan, before anything is written or deleted."""

from __future__ import annotations

import hashlib
import json
import warnings

import pytest

import gradprobe.study.orchestrator as orchestrator
from gradprobe.study.folder import FolderLock
from gradprobe.study.freeze import freeze_plan, load_study_plan
from gradprobe.study.result import StudyResult
from gradprobe.training.budget import OutOfReachWarning
from gradprobe.training.plan import PlanError

from helpers_training import tiny_plan

#: 10 updates of the tiny plan's grpo arm generate at most 10 * 2 * 4 * 40 = 3,200 tokens
OUT_OF_REACH = {"generated_tokens": 250_000, "updates": 10}
REFUSED = r"^budget\.generated_tokens = 250,000 is out of reach of budget\.updates = 10: "


def _folders(tmp_path):
    """(plan A: out of reach, frozen into ``study`` as before that was refused; plan B: another valid plan; study)."""
    a, b, study = tmp_path / "a.toml", tmp_path / "b.toml", tmp_path / "study"
    a.write_text(tiny_plan(budget=OUT_OF_REACH))
    b.write_text(tiny_plan(budget={"updates": 3}))
    study.mkdir()
    (study / "plan.toml").write_bytes(a.read_bytes())
    (study / "study.json").write_text(json.dumps({"plan_sha256": hashlib.sha256(a.read_bytes()).hexdigest()}))
    return a, b, study


def _other_command(b, study) -> None:
    """``gradprobe study B --out STUDY --restart``, run to its freeze under the folder's lock."""
    lock = FolderLock(study, ".study.lock", wait=False, what="study folder")
    try:
        freeze_plan(b, study, restart=True)
    finally:
        lock.release()


def _holds_b(study, b) -> bool:
    record = json.loads((study / "study.json").read_text())
    return (record["plan_sha256"] == hashlib.sha256(b.read_bytes()).hexdigest()
            and (study / "plan.toml").read_bytes() == b.read_bytes())


def test_a_plan_read_as_frozen_is_checked_as_new_when_another_command_replaced_the_study(tmp_path, capsys):
    a, b, study = _folders(tmp_path)
    with pytest.warns(OutOfReachWarning):  # the early read: the folder froze A, so its budget is only warned about
        early = load_study_plan(a, study)
    _other_command(b, study)  # between that read and this command's lock
    with pytest.raises(PlanError, match=REFUSED):  # old code: B's study deleted, A frozen as a new study
        freeze_plan(a, study, restart=True, plan=early)
    assert _holds_b(study, b)  # nothing written or deleted
    assert freeze_plan(b, study)[0].budget.updates == 3  # B's study resumes
    capsys.readouterr()


def test_gradprobe_study_reads_the_folder_again_once_it_holds_the_lock(tmp_path, monkeypatch, capsys):
    a, b, study = _folders(tmp_path)

    def racing_lock(folder, name, **kwargs):  # the other command freezes B just before this command's lock
        _other_command(b, study)
        return FolderLock(folder, name, **kwargs)

    monkeypatch.setattr(orchestrator, "FolderLock", racing_lock)
    monkeypatch.setattr(orchestrator, "_run", lambda plan, record, out, *args: StudyResult(out=out,
                                                                                           plan_sha256=plan.sha256))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OutOfReachWarning)  # the read before the lock: the folder froze A then
        with pytest.raises(PlanError, match=REFUSED):  # old code: returned a study of A, B's deleted
            orchestrator.run_study(a, study, executor="inline", probe=False, analyze=False, check=False,
                                   restart=True)
    assert _holds_b(study, b)
    capsys.readouterr()
