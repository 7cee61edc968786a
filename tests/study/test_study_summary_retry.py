"""The study's end summary says what a rerun does for its failed runs: a run whose error says to start anew (a new
--out: a reward that scored nothing, a plug-in reward edited since the run started) would fail the same way on a
retry, so "rerun the same command to retry them" is not said of it (a review's finding)."""

from pathlib import Path

from gradprobe.study.result import StudyResult

ANEW = "... fix the reward function and rerun with a new --out"


def _last(failed: dict, resumable=()) -> str:
    result = StudyResult(out=Path("S"), plan_sha256="x", failed=failed, resumable=set(resumable))
    return result.summary().splitlines()[-1]


def test_the_retry_line_follows_what_each_error_says():
    assert _last({("a", 0): "CUDA out of memory"}) == (
        "  failed runs keep their data in S/runs/<arm>/seed<S>/; rerun the same command to retry them (completed runs "
        "are not redone)")
    assert _last({("a", 0): ANEW, ("b", 1): ANEW}) == (
        "  failed runs keep their data in S/runs/<arm>/seed<S>/; each error above says to start anew: a rerun of this "
        "study would fail the same way, so fix what it names and run the study under a new --out")
    assert _last({("a", 0): "CUDA out of memory", ("b", 1): ANEW}) == (
        "  failed runs keep their data in S/runs/<arm>/seed<S>/; a rerun of the same command retries every failed run "
        "(completed runs are not redone): the others may succeed, but b seed 1 would fail the same way again, as its "
        "error says (the rerun trains the same plan and reward code: this folder refuses an edited plan or plug-in "
        "reward file); to fix it, fix what the error names, then run the plan as a new study under a new --out")


def test_a_refused_resume_that_names_its_fix_is_retried_by_the_same_command():
    """A tester: runs refused because the model now loads other weights (a tier rebuilt in the cache) ended with
    "run the study under a new --out", against their own errors: delete the cache build and rerun the same command."""
    weights = ("S/runs/a/seed0 cannot be resumed: model 'tiny' now loads the cache build C ...; to resume it, delete "
               "the cache build C (or set GRADPROBE_CACHE to a folder without it) so that the shipped build T is "
               "loaded again, or start a new run under a new --out (not S/runs/a/seed0); nothing was loaded or written")
    assert _last({("a", 0): weights, ("a", 1): weights}, {("a", 0), ("a", 1)}) == (
        "  failed runs keep their data in S/runs/<arm>/seed<S>/; rerun the same command to retry them (completed runs "
        "are not redone), after the fix each refused resume names above")
    assert _last({("a", 0): weights, ("b", 1): ANEW}, {("a", 0)}).endswith(
        "but b seed 1 would fail the same way again, as its error says (the rerun trains the same plan and reward "
        "code: this folder refuses an edited plan or plug-in reward file); to fix it, fix what the error names, then "
        "run the plan as a new study under a new --out")


def test_a_run_counts_as_resumable_by_its_errors_resume_fix_not_by_its_words(tmp_path, monkeypatch):
    """The worker reports the error's ``resume_fix`` and the study records the run as resumable by it: an error that
    only quotes the words "to resume it," (a reward's own message) is not one (a review's finding: the footer matched
    the words)."""
    from gradprobe.study.orchestrator import _record_run
    from gradprobe.study import worker
    from gradprobe.training.errors import RunConfigMismatchError

    class Refused(RunConfigMismatchError):
        resume_fix = "to resume it, restore the weights"

    result = StudyResult(out=Path("S"), plan_sha256="x")
    for seed, error in enumerate((Refused("refused; to resume it, restore the weights"),
                                  ValueError("a reward said: to resume it, rerun with a new --out"))):
        res = {"kind": "train", "arm": "a", "seed": seed, "status": "failed", "error": str(error),
               "resume_fix": getattr(error, "resume_fix", None)}
        assert _record_run(res, {}, result).startswith("FAILED")
    assert result.resumable == {("a", 0)}

    def refuse(*args, **kwargs):
        raise Refused("refused")

    monkeypatch.setattr(worker, "load_plan", refuse)
    res = worker.execute_task({"kind": "train", "plan": str(tmp_path / "plan.toml"), "arm": "a", "seed": 0,
                               "out": str(tmp_path / "run")})
    assert (res["status"], res["resume_fix"]) == ("failed", "to resume it, restore the weights")
