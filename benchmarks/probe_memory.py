"""Peak memory of the probe, stage by stage, against the model's parameter memory.

Runs :func:`gradprobe.probe.run.run_probe` once and records, for every stage, the peak resident
set size (RSS, bytes of RAM the process holds) reached while it ran, and prints them as figures
(GB = 1e9 bytes) and as a ratio to the model's parameter memory (sum of numel x element size of
``model.parameters()``, tied weights once). On a CUDA device torch's own peak
(``torch.cuda.max_memory_allocated``) is reported beside it.

How the per-stage peak is read: Linux keeps the peak RSS of a process in ``VmHWM``
(/proc/self/status); writing ``5`` to /proc/self/clear_refs resets it to the current RSS. Each
stage resets it on entry and reads it on exit; the stretch between two stages is read as
``(between)``. Where /proc/self/clear_refs is not writable, a thread samples the RSS every 2 ms
(psutil) instead, which can miss spikes shorter than that. ``tracemalloc`` would not see torch's
allocations (they bypass Python's allocator).

Stages (the functions ``run_probe`` calls, wrapped for the run): ``load_policy``, ``rollouts``
(``collect_rollouts`` of the probe batch), ``rewards`` (advantages, MC continuations included),
``heldout rollouts``, ``reference`` (:func:`heldout_reference`), ``second moment`` (Adam
preconditioner), ``update fwd+bwd`` (the cost yardstick), ``alignment`` (the jvp pass),
``estimates``, ``signal proxy`` and ``write``.

Targets (issue 14): the documented SmolLM2-135M command at most 3 GB peak RSS, the tiny tier's
default job at most 1 GB; ``--max-peak-gb`` makes the exit status 1 when the overall peak is above it.

    python benchmarks/probe_memory.py --model tiny                        # the default job
    python benchmarks/probe_memory.py --model smollm2-135m                # the README command
    python benchmarks/probe_memory.py --model smollm2-135m --rewards outcome --prompts 4   # quicker
    python benchmarks/probe_memory.py --model smollm2-135m --no-release-memory   # without malloc_trim

Between stages the probe hands freed heap pages back to the OS (:mod:`gradprobe.memory`);
``--no-release-memory`` turns that off to show what it saves.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import threading
import time

GB = 1e9

#: The README's "A real pretrained model" command (flat ProbeConfig settings, ProbeConfig.from_dict).
SMOLLM2_JOB = dict(task="chain_sum:min_terms=2,max_terms=2,max_digits=1", rewards=("outcome", "mc_value"), prompts=8,
                   group=4, heldout_prompts=4, heldout_group=8, max_new_tokens=64, continuations=2, lr=1e-6,
                   budget_tokens=1_000_000)


def _vm_hwm() -> int:
    """Peak RSS since the last reset, bytes (VmHWM of /proc/self/status)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM line in /proc/self/status")


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS line in /proc/self/status")


class PeakMeter:
    """Resettable peak RSS (bytes): the kernel's VmHWM where it can be reset, else a 2 ms sampling thread."""

    def __init__(self):
        self.kernel = False
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            _vm_hwm()
            self.kernel = True
        except OSError:
            import psutil

            self._proc = psutil.Process()
            self._peak = self._proc.memory_info().rss
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()

    def _sample(self):
        while not self._stop.wait(0.002):
            self._peak = max(self._peak, self._proc.memory_info().rss)

    def rss(self) -> int:
        return _rss() if self.kernel else self._proc.memory_info().rss

    def reset(self) -> None:
        if self.kernel:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        else:
            self._peak = self._proc.memory_info().rss

    def peak(self) -> int:
        return _vm_hwm() if self.kernel else max(self._peak, self._proc.memory_info().rss)


class StageRecorder:
    """Wraps functions so that each call records (stage, RSS at entry, peak RSS, RSS at exit, seconds)."""

    def __init__(self, meter: PeakMeter):
        self.meter = meter
        self.rows: list[dict] = []
        self.cuda_peaks: dict[str, int] = {}
        self._depth = 0

    def _cuda(self):
        import torch

        return torch.cuda.is_available() and torch.cuda.is_initialized()

    @contextlib.contextmanager
    def stage(self, name: str):
        if self._depth:  # nested call (e.g. a reward collecting rollouts): counted in the outer stage
            yield
            return
        between = self.meter.peak()
        if self.rows:
            self.rows.append(dict(stage="(between)", entry=self.rows[-1]["exit"], peak=between,
                                  exit=self.meter.rss(), seconds=0.0))
        self.meter.reset()
        if self._cuda():
            import torch

            torch.cuda.reset_peak_memory_stats()
        entry, t0 = self.meter.rss(), time.perf_counter()
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            row = dict(stage=name, entry=entry, peak=self.meter.peak(), exit=self.meter.rss(),
                       seconds=time.perf_counter() - t0)
            if self._cuda():
                import torch

                row["cuda_peak"] = torch.cuda.max_memory_allocated()
            self.rows.append(row)
            self.meter.reset()

    def wrap(self, module, attr: str, name=None):
        """Replace ``module.attr`` by a recording wrapper (``name``: a label or a function of the call's kwargs)."""
        if not hasattr(module, attr):
            raise AttributeError(f"{module.__name__}.{attr} no longer exists: update benchmarks/probe_memory.py "
                                 "to the probe's current stage functions")
        fn = getattr(module, attr)

        def wrapper(*args, **kwargs):
            label = name(kwargs) if callable(name) else (name or attr)
            with self.stage(label):
                return fn(*args, **kwargs)

        setattr(module, attr, wrapper)


def _install(rec: StageRecorder) -> None:
    import gradprobe.probe.direction as direction
    import gradprobe.probe.result as result
    import gradprobe.probe.run as run
    import gradprobe.probe.stages as stages

    def rollouts(kw):  # the probe batch's ("rollouts") or the held-out reference's
        return "heldout rollouts" if kw.get("category") == "eval" else kw.get("category", "rollouts") + "s"

    # each function wrapped where the probe's stage modules look it up (their module-level imports)
    rec.wrap(run, "load_policy")
    rec.wrap(stages, "collect_rollouts", rollouts)
    rec.wrap(direction, "collect_rollouts", rollouts)
    rec.wrap(stages, "reward_outputs", "rewards")
    rec.wrap(direction, "heldout_reference", "reference")
    rec.wrap(direction, "second_moment_from_minibatches", "second moment")
    rec.wrap(stages, "loss_and_backward", "update fwd+bwd")
    rec.wrap(direction, "token_alignment", "alignment")
    rec.wrap(result, "estimate_rewards", "estimates")
    rec.wrap(result, "token_probability_stats", "signal proxy")
    rec.wrap(run, "_write", "write")


def parameter_bytes(model) -> int:
    """Bytes of the model's parameters (tied weights counted once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="tiny", help="tiny (the default job) or smollm2-135m (the README command; "
                   "a local folder whose name contains smollm2 runs the same job)")
    p.add_argument("--rewards", help="comma-separated (default: the job's)")
    p.add_argument("--prompts", type=int)
    p.add_argument("--group", type=int)
    p.add_argument("--heldout-prompts", type=int)
    p.add_argument("--heldout-group", type=int)
    p.add_argument("--max-new-tokens", type=int)
    p.add_argument("--continuations", type=int)
    p.add_argument("--micro-batch-size", type=int)
    p.add_argument("--no-release-memory", action="store_true",
                   help="turn off gradprobe.memory.release_memory (gc + glibc malloc_trim after each large "
                        "stage and after a GGUF load): the figures without it, for comparison")
    p.add_argument("--max-peak-gb", type=float, help="exit status 1 when the overall peak RSS (GB) is above it")
    p.add_argument("--json", help="write the stage table here")
    args = p.parse_args(argv)

    import torch

    from gradprobe.probe.run import ProbeConfig, run_probe

    job = dict(SMOLLM2_JOB) if "smollm2" in args.model.lower() else {}  # the alias or a saved copy of it
    for key in ("prompts", "group", "heldout_prompts", "heldout_group", "max_new_tokens", "continuations"):
        if getattr(args, key) is not None:
            job[key] = getattr(args, key)
    if args.rewards:
        job["rewards"] = tuple(args.rewards.split(","))
    if args.micro_batch_size:
        job["micro_batch_size"] = args.micro_batch_size
    config = ProbeConfig.from_dict(dict(job, model=args.model, progress=False))  # flat settings (max_new_tokens...)

    if args.no_release_memory:  # run.py and models.py import it at call time, so the module attribute is what they get
        import gradprobe.memory as memory

        memory.release_memory = lambda: False
    meter = PeakMeter()
    rec = StageRecorder(meter)
    _install(rec)
    import gradprobe.models as models

    loaded = {}
    load = models.load_policy

    def keep(*a, **kw):
        loaded["policy"] = load(*a, **kw)
        return loaded["policy"]

    models.load_policy = keep
    start_rss = meter.rss()
    with tempfile.TemporaryDirectory() as out:
        run_probe(config, out=os.path.join(out, "probe"))
    total_peak = max(r["peak"] for r in rec.rows)
    pbytes = parameter_bytes(loaded["policy"].model)

    print(f"model {args.model}: {pbytes / GB:.3f} GB of parameters "
          f"({sum(p.numel() for p in loaded['policy'].model.parameters()):,}, "
          f"{next(loaded['policy'].model.parameters()).dtype}); torch threads {torch.get_num_threads()}; "
          f"RSS after imports {start_rss / GB:.3f} GB; peak reading: "
          f"{'kernel VmHWM' if meter.kernel else 'psutil sampling'}")
    print(f"{'stage':<18} {'peak GB':>8} {'x params':>9} {'+GB over entry':>15} {'exit GB':>8} {'seconds':>8}")
    for i, r in enumerate(rec.rows):
        if r["stage"] == "(between)" and r["peak"] <= max(rec.rows[i - 1]["peak"], rec.rows[i + 1]["peak"]
                                                         if i + 1 < len(rec.rows) else 0):
            continue  # a gap between stages that set no peak of its own
        print(f"{r['stage']:<18} {r['peak'] / GB:>8.3f} {r['peak'] / pbytes:>9.2f} "
              f"{(r['peak'] - r['entry']) / GB:>15.3f} {r['exit'] / GB:>8.3f} {r['seconds']:>8.1f}"
              + (f"  cuda peak {r['cuda_peak'] / GB:.3f} GB" if "cuda_peak" in r else ""))
    worst = max(rec.rows, key=lambda r: r["peak"])
    print(f"overall peak RSS {total_peak / GB:.3f} GB = {total_peak / pbytes:.2f} x parameter memory "
          f"(in stage {worst['stage']!r}); above the RSS after imports: {(total_peak - start_rss) / GB:.3f} GB "
          f"= {(total_peak - start_rss) / pbytes:.2f} x parameter memory")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(model=args.model, config=config.to_dict(), parameter_bytes=pbytes,
                           rss_after_imports=start_rss, peak=total_peak, stages=rec.rows), f, indent=2)
    if args.max_peak_gb is not None and total_peak > args.max_peak_gb * GB:
        print(f"FAIL: peak {total_peak / GB:.3f} GB > --max-peak-gb {args.max_peak_gb}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
