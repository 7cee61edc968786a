"""Does probing along a reference run help the forecast? The shipped studies' probes, redone at kept weights.

For every cell (model x task) of the compared shipped studies it trains one reference grpo run (the cell's
first study's plan, arm grpo, seed 0) for ``--updates``' largest value, keeping its weights after each listed
update (``[train] save_weights_at``). Then, for every study, it probes the study's own probe settings
(:func:`gradprobe.study.probe_plan.probe_settings`, and each guided arm's) at the initial policy and at
those weights (:func:`gradprobe.probe.checkpoints.run_probe_checkpoints`, what ``gradprobe probe
--checkpoints`` runs), and writes a copy of the study whose ``probe/probe.json`` is the pooled probe. With
``--control`` it also writes a copy whose probe pools the same number of batches at the INITIAL policy
(probe seeds 0, 1, 2, ...: other prompts and rollouts, each its own reference draw), to tell the checkpoints
apart from merely more batches. Finally it runs ``calib report`` (leave one study out) on the shipped
studies and on each copy, and prints the forecasters' errors and rank agreement side by side.

    python benchmarks/probe_along_reference.py --out runs/along_reference --control

About 30 minutes on 2 CPU cores, as the README records for its 2026-12-03 run (3 reference runs of 30 updates, 8
studies x 4 policies of probes, the control's 8 x 3 probes, 3 calib reports). Figures and their reading: README,
"Probing along a reference run".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ["study_tiny", "study_tiny_sparse", "study_tiny_hard_rewards", "study_tiny_lr", "study_reward_granularity",
           "study_tiny_llama", "study_tiny_losses", "study_tiny_greso", "study_tiny_guided"]
NO_PROBE_ROWS = {"study_tiny_lr"}  # learning-rate arms only: no probe forecast to compare (data/calibration/README.md)


def _cell(plan) -> str:
    """A cell's key: the model and the task with its configuration."""
    return json.dumps([plan.model.name, plan.task.name, plan.task.config], sort_keys=True, default=str)


def train_reference(plan, out: Path, updates: list[int]) -> list[Path]:
    """Train the plan's grpo arm (seed 0) for max(updates) updates with its weights kept after each; evals only
    at update 0 and the end. Returns the kept weight files in update order (an existing finished run is reused)."""
    from gradprobe.training.budget import shorten_budget
    from gradprobe.training.run import run_training

    run = shorten_budget(plan.arm("grpo", seed=0), {"updates": max(updates)})
    run = dataclasses.replace(run, train=dataclasses.replace(run.train, save_weights_at=tuple(updates)),
                              eval=dataclasses.replace(run.eval, at_updates=(), at_fractions=(), every_tokens=0,
                                                       sampled=False))
    if not (out / "summary.json").exists():
        run_training(run, out, progress=False)
    return [out / "weights" / f"update-{u:06d}.safetensors" for u in updates]


def probe_along(study: Path, weights: list[Path], work: Path) -> dict:
    """The study's probes (shared, then each guided arm's) at the initial policy and at ``weights``, pooled.
    Returns folder relative to ``probe/`` ("" for the shared one) -> the pooled probe.json dict."""
    from gradprobe.probe.checkpoints import run_probe_checkpoints

    out = {}
    for folder, (config, policy, task) in _study_probes(study):
        dest = work / study.name / (folder or "shared")
        done = dest / "probe.json"
        if done.exists():
            out[folder] = json.loads(done.read_text())
            continue
        shutil.rmtree(dest, ignore_errors=True)
        out[folder] = run_probe_checkpoints(config, weights, out=dest, policy=policy(), task=task)
    return out


def _study_probes(study: Path):
    """Yield (folder relative to probe/, (ProbeConfig, policy loader, task)) of the study's probes, the shared one
    first: the plan's probe settings, its task and model loaded as the study worker loads them."""
    from gradprobe.probe_settings import ProbeConfig
    from gradprobe.study.probe_plan import guided_probes, probe_settings
    from gradprobe.training.plan import load_plan
    from gradprobe.training.run import load_run_policy, load_run_task

    plan = load_plan(study / "plan.toml", check_schedule=False)
    task = load_run_task(plan.task)
    jobs = {"": probe_settings(plan), **{k: g["settings"] for k, g in guided_probes(plan).items()}}
    for folder, settings in jobs.items():
        config = ProbeConfig.from_dict(settings)
        yield folder, (config, lambda c=config: load_run_policy(plan.model, seed=c.batch.seed), task)


def probe_initial_seeds(study: Path, along: dict, seeds: int, work: Path) -> dict:
    """The control: ``seeds`` batches at the initial policy (seed 0 is ``along``'s initial batch, seeds 1.. new
    probes), each its own reference draw, pooled. Returns folder -> pooled probe.json dict."""
    from gradprobe.probe.batches import combine_batches
    from gradprobe.probe.run import run_probe

    out = {}
    for folder, (config, policy, task) in _study_probes(study):
        # batch 0 of the pooled probe is the initial policy's (one batch per policy)
        initial = json.loads((work / study.name / (folder or "shared") / "batch_0" / "probe.json").read_text())
        initial["reference"]["draw"] = "seed0"
        results = [initial]
        for s in range(1, seeds):
            dest = work / study.name / f"control_{folder or 'shared'}_seed{s}".replace("/", "_")
            res = json.loads((dest / "probe.json").read_text()) if (dest / "probe.json").exists() else \
                run_probe(config.with_settings(seed=config.batch.seed + s), out=dest, policy=policy(), task=task)
            res["reference"]["draw"] = f"seed{s}"
            results.append(res)
        out[folder] = combine_batches(results, config)
    return out


def prescreen_tokens(folder: Path) -> int:
    """Generated tokens of a pooled probe in ``folder``: each batch's charged tokens (rollouts, continuations)
    and held-out reference rollouts, read from its ``batch_K/probe.json``."""
    total = 0
    for f in sorted(folder.glob("batch_*/probe.json")):
        r = json.loads(f.read_text())
        total += int(r["ledger"]["charged_generated_tokens"]) + int(r["reference"]["ledger"]["generated_tokens"]["eval"])
    return total


def study_copy(study: Path, probes: dict, dest: Path) -> None:
    """A copy of the study folder whose probe.json files are ``probes`` (folder relative to probe/ -> dict)."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(study, dest)
    for folder, result in probes.items():
        (dest / "probe" / folder / "probe.json").write_text(json.dumps(result))


def calib_report(studies: list[Path], out: Path) -> None:
    """``calib report`` (leave one study out) over ``studies`` into ``out`` (rows.csv, metrics.json)."""
    done = subprocess.run([sys.executable, "-c", "import sys; from calib.cli import main; sys.exit(main())", "report",
                           *map(str, studies), "--out", str(out)], capture_output=True, text=True)
    if done.returncode != 0:  # its warnings (runs shared by studies, as the shipped report's) are not printed
        raise RuntimeError(f"calib report failed ({done.returncode}):\n{done.stderr}")


def summary(name: str, report: Path, keys) -> list[str]:
    """The raw forecasts' leave-out errors on the runs ``keys`` ((study, arm, seed) rows: the shipped report's
    runs that every compared forecaster covers, so every set is scored on the same runs), with their 95%
    study-cluster bootstrap intervals (:mod:`calib.bootstrap`: intervals, not p-values) and the probe's paired
    difference vs cost only, beside the smallest paired difference these runs resolve: 2.8 standard errors
    (80% power for a two-sided 5% test under a normal approximation), the standard error read off the 95%
    interval as its width / 3.92; and the Kendall tau pooled within studies (its permutation p-value, arms,
    studies)."""
    import pandas as pd
    from calib.bootstrap import mae_difference_interval, mae_interval
    from calib.metrics import p_value_text

    rows = pd.read_csv(report / "rows.csv").set_index(["study", "arm", "seed"]).loc[keys]
    y, clusters = rows["target"].to_numpy(float), rows.index.get_level_values("study")
    m = json.loads((report / "metrics.json").read_text())
    lines = []
    for f in ("forecast_probe", "forecast_cost_only"):
        e = mae_interval(rows[f].to_numpy(float), y, clusters)
        d = ""
        if f != "forecast_cost_only":
            diff = mae_difference_interval(rows[f].to_numpy(float), rows["forecast_cost_only"].to_numpy(float), y, clusters)
            mde = 2.8 * (diff.interval[1] - diff.interval[0]) / 3.92
            d = (f"  vs cost only {diff.estimate:+.2f} [{diff.interval[0]:+.2f}, {diff.interval[1]:+.2f}] "
                 f"(resolves +/-{mde:.2f})")
        rank = m["ranking"][f]
        tau = rank.get("kendall_tau")
        lines.append(f"{name:<24} {f:<19} MAE {e.estimate:5.2f} [{e.interval[0]:.2f}, {e.interval[1]:.2f}] on {e.rows} "
                     f"runs{d}  Kendall tau {'undefined' if tau is None else f'{tau:+.2f}'} (p {p_value_text(rank)}, "
                     f"{rank.get('n_arms')} arms in {rank.get('n_studies')} studies)")
    return lines


def common_keys(report: Path) -> list[tuple]:
    """(study, arm, seed) of the report's non-grpo runs that every forecaster covers (calib report's common runs)."""
    import pandas as pd

    rows = pd.read_csv(report / "rows.csv")
    cover = rows[["forecast_probe", "forecast_cost_only", "forecast_signal_proxy", "forecast_first_order"]].notna().all(axis=1)
    keep = rows[cover & (rows["arm"] != "grpo")]
    return list(zip(keep["study"], keep["arm"], keep["seed"]))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/along_reference", help="work folder (reference runs, probes, study copies)")
    p.add_argument("--updates", default="10,20,30", help="updates after which the reference run's weights are probed")
    p.add_argument("--control", action="store_true", help="also pool as many batches at the initial policy")
    args = p.parse_args(argv)
    from gradprobe.training.plan import load_plan

    work, updates = Path(args.out), [int(u) for u in args.updates.split(",")]
    studies = [ROOT / "data" / s for s in STUDIES]
    refs: dict[str, list[Path]] = {}
    along, control = work / "studies_along", work / "studies_control"
    for study in studies:
        if study.name in NO_PROBE_ROWS:
            for dest in (along, control):
                study_copy(study, {}, dest / study.name)
            continue
        plan = load_plan(study / "plan.toml", check_schedule=False)
        key = _cell(plan)
        if key not in refs:
            refs[key] = train_reference(plan, work / "reference" / study.name, updates)
        probes = probe_along(study, refs[key], work / "probes")
        study_copy(study, probes, along / study.name)
        if args.control:
            study_copy(study, probe_initial_seeds(study, probes, 1 + len(updates), work / "probes"),
                       control / study.name)
        spent, budget = prescreen_tokens(work / "probes" / study.name / "shared"), probes[""]["config"]["budget_tokens"]
        print(f"probed {study.name}: {1 + len(updates)} policies, {spent:,} generated tokens = {spent / budget:.1%} of "
              f"its {budget:,}-token budget", flush=True)
    sets = {"shipped": studies, f"initial + {len(updates)} ckpts": [along / s.name for s in studies]}
    if args.control:
        sets[f"initial x {1 + len(updates)} seeds"] = [control / s.name for s in studies]
    keys = None
    for name, dirs in sets.items():
        report = work / "reports" / name.replace(" ", "_")
        calib_report(dirs, report)
        keys = keys or common_keys(report)  # the shipped studies' common runs, for every set
        print("\n".join(summary(name, report, keys)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
