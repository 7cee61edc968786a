"""Building the pool of ``rank-prompts`` / ``difficulty-eval`` shows a tqdm bar with its total and ETA where the pool's
size is known in advance (a reasoning-gym task's ``--pool N``, a JSONL file's lines), the elapsed seconds elsewhere,
and nothing with ``--no-progress`` (``progress=False``; the CLI sets ``TQDM_DISABLE`` too)."""

from __future__ import annotations

import json
import re

import pytest

from gradprobe.difficulty.progress import pool_problems
from gradprobe.tasks import Problem, Task, load_task
from pool_bars import captured  # noqa: F401,E402 (a fixture: tests/pool_bars.py)


def test_a_reasoning_gym_pool_shows_its_total_and_eta(captured):
    err, bars = captured
    task = load_task("chain_sum:min_terms=2,max_terms=3,max_digits=1")
    got = pool_problems(task, 7, seed=0, desc="rank-prompts: building the pool of 7 prompts", progress=True)
    assert [p.id for p in got] == [p.id for p in task.problems("train", 7, seed=0)]  # the same pool
    assert [(b.total, b.n) for b in bars] == [(7, 7)]
    shown = err.getvalue()
    # done/total [elapsed<ETA
    bar = r"rank-prompts: building the pool of 7 prompts: +\d+%\|[^|]*\| *\d/7 \[[\d:]+<[\d:?]+"
    assert re.search(bar, shown), shown
    assert "on_progress" not in vars(task)  # the counting hook is removed again


def test_a_few_shot_wrapper_counts_its_wrapped_tasks_items(captured):
    err, bars = captured
    task = load_task("chain_sum:max_digits=1")
    task.task = None  # a plain task with a None ``task`` attribute is no wrapper
    pool_problems(task, 3, seed=1, desc="x", progress=True)
    assert [(b.total, b.n) for b in bars] == [(3, 3)]


def test_a_jsonl_pool_counts_the_files_lines(captured, tmp_path):
    err, bars = captured
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps({"question": f"what is {i} + 1?", "answer": str(i + 1)}) + "\n"
                            for i in range(20)))
    task = load_task(f"jsonl:{path}")
    got = pool_problems(task, 5, seed=0, desc="difficulty-eval: building the pool of 5 prompts", progress=True)
    assert len(got) == 5 and [(b.total, b.n) for b in bars] == [(20, 20)]
    assert re.search(r"building the pool of 5 prompts: +100%\|[^|]*\| *20/20 ", err.getvalue()), err.getvalue()
    assert "on_progress" not in vars(task)


def test_an_unknown_size_keeps_the_elapsed_seconds(captured):
    err, bars = captured

    class Plain:
        def problems(self, split, n, *, seed=0):
            return list(range(n))

    assert pool_problems(Plain(), 4, seed=0, desc="pool", progress=True) == [0, 1, 2, 3]
    assert [b.total for b in bars] == [None]
    assert re.fullmatch(r"(\r?pool: [\d:]+\s*)+", err.getvalue().replace("\x1b[A", "")), repr(err.getvalue())


def test_no_progress_shows_nothing(captured):
    err, bars = captured
    task = load_task("chain_sum:max_digits=1")
    assert len(pool_problems(task, 3, seed=0, desc="pool", progress=False)) == 3
    assert bars == [] and err.getvalue() == "" and "on_progress" not in vars(task)


def test_a_few_shot_wrappers_examples_are_not_counted(captured):
    """FewShotTask builds its K + 8 example candidates (seed FEWSHOT_SEED) with the wrapped task's ``_make`` after the
    pool: before, they were counted too and the bar of a 10-prompt pool ended at 20/10."""
    err, bars = captured
    task = load_task("chain_sum", fewshot=2)
    got = pool_problems(task, 10, seed=0, desc="pool", progress=True)
    assert len(got) == 10 and len(task._candidates) >= 3  # the examples were made during the call
    assert [(b.n, b.total) for b in bars] == [(10, 10)]
    assert "on_progress" not in vars(task.task)


def test_a_few_shot_pool_whose_data_seed_is_the_examples_seed_still_ends_at_n(captured):
    from gradprobe.tasks.fewshot import FEWSHOT_SEED

    err, bars = captured
    task = load_task("chain_sum", fewshot=3)
    got = pool_problems(task, 4, seed=FEWSHOT_SEED, desc="pool", progress=True)  # examples: 3 + 8 more train items
    assert len(got) == 4 and [(b.n, b.total) for b in bars] == [(4, 4)]


def test_a_jsonl_files_last_line_without_a_newline_is_counted(captured, tmp_path):
    """The total counted newline bytes, so a file whose last row has no final newline ended the bar at 20/19; a final
    newline, a blank last line and an empty file are counted as before."""
    err, bars = captured
    rows = "\n".join(json.dumps({"question": f"what is {i} + 1?", "answer": str(i + 1)}) for i in range(20))
    for name, text in [("no_final_newline", rows), ("final_newline", rows + "\n"), ("blank_last", rows + "\n\n"),
                       ("empty", "")]:
        (tmp_path / f"{name}.jsonl").write_text(text)
        task = load_task(f"jsonl:{tmp_path / name}.jsonl")
        try:
            assert len(pool_problems(task, 5, seed=0, desc="pool", progress=True)) == 5
        except ValueError:  # the empty file has no row
            assert name == "empty"
    assert [(b.n, b.total) for b in bars] == [(20, 20), (20, 20), (21, 21), (0, 0)]


class _Counted(Task):
    """A plug-in task that reports through the public hook only (Task.progress_unit, Task.report_progress): each
    problem as it is made, with its request's split and seed; ``extra`` more of another seed (a wrapper's examples)."""

    name = "counted"
    progress_unit = "prompt"

    def __init__(self, extra: int = 0):
        self.extra = extra

    def problems(self, split, n, *, seed=0):
        out = []
        for i in range(n):
            out.append(Problem(id=f"counted/{split}/{i}", question=f"what is {i} + 1?", answer=str(i + 1)))
            self.report_progress(1, split=split, seed=seed)
        for _ in range(self.extra):
            self.report_progress(1, split=split, seed=seed + 1)
            self.report_progress(1, split="heldout", seed=seed)
        return out


def test_a_plug_in_task_that_reports_through_the_public_hook_gets_a_total(captured):
    """Before, only reasoning-gym and JSONL tasks were counted (their private methods wrapped), so a plug-in task
    showed the elapsed seconds; one that reports through Task.report_progress now gets done / total and ETA, counting
    only the reports of the pool's own request (split "train", its data seed)."""
    err, bars = captured
    task = _Counted(extra=3)
    got = pool_problems(task, 6, seed=2, desc="pool", progress=True)
    assert [p.id for p in got] == [f"counted/train/{i}" for i in range(6)]
    assert [(b.n, b.total) for b in bars] == [(6, 6)]
    assert re.search(r"pool: +100%\|[^|]*\| *6/6 \[", err.getvalue()), err.getvalue()
    assert "on_progress" not in vars(task) and task.on_progress is None


def test_a_plug_in_task_reporting_lines_announces_its_total(captured):
    """Unit "line": the task announces the lines it will read (total=) and reports each one parsed."""
    err, bars = captured

    class Lines(_Counted):
        progress_unit = "line"

        def problems(self, split, n, *, seed=0):
            self.report_progress(total=12)
            for _ in range(12):
                self.report_progress(1)
            return [Problem(id=f"l/{i}", question=str(i), answer="1") for i in range(n)]

    assert len(pool_problems(Lines(), 4, seed=0, desc="pool", progress=True)) == 4
    assert [(b.n, b.total) for b in bars] == [(12, 12)]
    assert re.search(r"pool: +100%\|[^|]*\| *12/12 \[[^\]]*line/s\]", err.getvalue()), err.getvalue()


def test_a_hook_that_fails_leaves_the_task_without_it(captured):
    """The task's errors propagate and the hook is removed again (an instance attribute only: the class keeps None)."""
    err, bars = captured

    class Failing(_Counted):
        def problems(self, split, n, *, seed=0):
            self.report_progress(1, split=split, seed=seed)
            raise ValueError("no rows")

    task = Failing()
    with pytest.raises(ValueError, match="no rows"):
        pool_problems(task, 3, seed=0, desc="pool", progress=True)
    assert [(b.n, b.total) for b in bars] == [(1, 3)] and "on_progress" not in vars(task)


def test_a_local_gsm8k_pool_counts_its_files_lines(captured, tmp_path):
    """GSM8K from a local JSONL file showed the elapsed seconds only; it reports its lines as a JSONL task does."""
    err, bars = captured
    path = tmp_path / "gsm.jsonl"
    path.write_text("".join(json.dumps({"question": f"q{i}?", "answer": f"{i} + 1\n#### {i + 1}"}) + "\n"
                            for i in range(15)))
    task = load_task(f"gsm8k:{path}")
    assert len(pool_problems(task, 4, seed=0, desc="pool", progress=True)) == 4
    assert [(b.n, b.total) for b in bars] == [(15, 15)]
