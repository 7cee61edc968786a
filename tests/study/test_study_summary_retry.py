"""The study's end summary says what a rerun does for its failed runs: a run whose error says to start anew (a new
--out: a reward that scored nothing, a plug-in reward edited since the run started) would fail the same way on a
retry, so "rerun the same command to retry them" is not said of it (a review's finding)."""

from pathlib import Path

from gradprobe.study.result import StudyResult

ANEW = "... fix the reward function and rerun with a new --out"


def _last(failed: dict) -> str:
    return StudyResult(out=Path("S"), plan_sha256="x", failed=failed).summary().splitlines()[-1]


def test_the_retry_line_follows_what_each_error_says():
    assert _last({("a", 0): "CUDA out of memory"}) == (
        "  failed runs keep their data in S/runs/<arm>/seed<S>/; rerun the same command to retry them (completed runs "
        "are not redone)")
    assert _last({("a", 0): ANEW, ("b", 1): ANEW}) == (
        "  failed runs keep their data in S/runs/<arm>/seed<S>/; each error above says to start anew: a rerun of this "
        "study would fail the same way, so fix what it names and run the study under a new --out")
    assert _last({("a", 0): "CUDA out of memory", ("b", 1): ANEW}) == (
        "  failed runs keep their data in S/runs/<arm>/seed<S>/; rerun the same command to retry the others "
        "(completed runs are not redone); b seed 1 need what their error says (a new --out)")
