"""Wall and CPU time of the tiny tier's work under this process's thread settings.

    python benchmarks/thread_policy.py THREADS          # OpenMP's default wait policy
    OMP_WAIT_POLICY=PASSIVE python benchmarks/thread_policy.py THREADS

Five forward + backward passes of a 64 x 50 batch and one 32 x 30-token ``generate`` of the shipped
``tiny`` tier (README, "Quick start", Threads). Run it once alone and once beside a competing
2-thread process (e.g. ``python3 -c 'while True: pass' &`` twice): with threads that spin while they
wait, the CPU time grows with the competition; with passive waiting or one thread it stays that of
the work, and the wall time grows only by the share of the cores the others take.
"""

import os
import sys
import time

import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else torch.get_num_threads()
torch.set_num_threads(threads)

from gradprobe.models import load_policy  # noqa: E402

model = load_policy("tiny", dtype="float32").model
torch.manual_seed(0)
ids = torch.randint(3, 20, (64, 50))


def forward_backward():
    model.zero_grad(set_to_none=True)
    model(input_ids=ids).logits.float().logsumexp(-1).mean().backward()


def generate():
    with torch.no_grad():
        model.generate(input_ids=ids[:32, :12], attention_mask=torch.ones(32, 12, dtype=torch.long), max_new_tokens=30,
                       min_new_tokens=30, do_sample=True, pad_token_id=0)


forward_backward()
generate()  # warm-up
cpu, t0 = time.process_time(), time.perf_counter()
for _ in range(5):
    forward_backward()
t1 = time.perf_counter()
generate()
t2 = time.perf_counter()
print(f"threads={threads} OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '-')}  forward+backward x5 {t1 - t0:.2f} s  "
      f"generate {t2 - t1:.2f} s  total {t2 - t0:.2f} s  cpu {time.process_time() - cpu:.2f} s  "
      f"load average {os.getloadavg()[0]:.1f}")
