"""The one-line error of a run stopped because it trained nothing
(:func:`gradprobe.training.update.check_untrained_stop`), written out in full by the tests that expect it: the frame
is shared, each test passes its cause's own words (``tests/test_no_valid_reward_run.py``: ``"no_valid_reward"``;
``tests/training/test_never_trained_overflow.py``: ``"reward_overflow"``)."""

from __future__ import annotations


def untrained_stop_message(reward: str, out, update: int, *, did: str, why: str, kept: str, reason: str, fix: str,
                           arm: str = "grpo") -> str:
    """The expected error of a run of arm ``arm`` stopped at update ``update`` (counted from 1).

    ``did``: what the updates did, up to the words before "the run stopped" (``{which}`` is replaced by
    ``"update 1"`` or ``"updates 1-<update>"``); ``why``: why it stopped (in parentheses); ``kept``: what
    ``metrics.jsonl`` keeps (in parentheses); ``reason``: ``summary.json``'s ``stop_reason``; ``fix``: the fix, before
    "and rerun with a new --out"."""
    which = "update 1" if update == 1 else f"updates 1-{update}"
    return (f"update {update}: reward {reward!r} of arm {arm!r} {did.format(which=which)} the run stopped ({why}); "
            f"{out} keeps metrics.jsonl ({kept}) and summary.json (stop_reason \"{reason}\"); {fix} and rerun with a "
            "new --out")


def blocking_reward_source(metrics, go) -> str:
    """The source of a reward plug-in (``fn``, reward 1.0 for every completion: no group trains) that blocks once its
    run's ``metrics`` file holds 3 update lines, until the file ``go`` exists (or 60 s pass): a study's untrained
    warning that lets it go on can only come from a look at the running run."""
    return (f"import json, time\nfrom pathlib import Path\n\n\ndef _updates():\n    try:\n"
            f"        lines = Path({str(metrics)!r}).read_text().splitlines()\n    except OSError:\n"
            f"        return 0\n    return sum(not json.loads(x).get('eval') for x in lines if x.strip())\n\n\n"
            f"def fn(prompts, completions, **kwargs):\n    end = time.monotonic() + 60\n"
            f"    while _updates() >= 3 and not Path({str(go)!r}).exists() and time.monotonic() < end:\n"
            f"        time.sleep(0.05)\n    return [1.0 for _ in completions]\n")


def releasing_say(said: list, go, arm: str = "const"):
    """A study's ``say`` that records each message in ``said`` and creates ``go`` (releasing
    :func:`blocking_reward_source`'s reward) at the untrained warning of ``arm``'s seed 0."""
    def say(message):
        said.append(message)
        if message.startswith(f"warning: run {arm} seed 0:"):
            go.touch()
    return say


def blocking_study(tmp_path, constant_reward, monkeypatch):
    """``(plan, study, said, say)`` of a one-run study (arm ``const``, 5 updates, one thread) whose reward is
    :func:`blocking_reward_source`'s and whose ``say`` is :func:`releasing_say`'s, the study looking at its running
    runs every 0.1 s; ``constant_reward`` is the ``(plug-in file, spec)`` fixture of the study tests."""
    import gradprobe.study.orchestrator as orchestrator
    from helpers_training import tiny_plan

    rw, spec = constant_reward
    study, go, said = tmp_path / "study", tmp_path / "go", []
    rw.write_text(blocking_reward_source(study / "runs" / "const" / "seed0" / "metrics.jsonl", go))
    plan = tmp_path / "plan.toml"
    plan.write_text(tiny_plan(arm="const", reward=spec, budget={"updates": 5}, eval={"sampled": False}))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(orchestrator, "UNTRAINED_WATCH_SECONDS", 0.1)
    return plan, study, said, releasing_say(said, go)
