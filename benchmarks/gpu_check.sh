#!/usr/bin/env bash
# The one-GPU check (benchmarks/gpu_check.py) as one device call. On one H200 (2026-12-04) the Qwen2.5-1.5B
# shape alone took 410 s (call 429 s), so the SmolLM2 shape was skipped at --time-limit 300: run it in a
# second call (--models smollm2-135m). --time-limit is checked between models only (a model started before it
# runs all its parts); the two calls together nearly fill a 15-minute device budget. Figures: README, "GPU path".
#
# Here, once:  echo /.whl/ >> .git/info/exclude && WITH_TASKS=1 bash benchmarks/fetch_gpu_wheels.sh .whl
#              (the loop part trains on chain_sum, which needs reasoning-gym there)
#              (transformers 5.24.0, 12.9 MiB, the version the hf_paged backend is tested with; the
#              machine's own is 5.17; plus SmolLM2-135M's config + tokenizer, about 3.5 MiB)
# Device call: carry [".whl"], command `bash benchmarks/gpu_check.sh`, timeout_s 540.
#
# Installs the carried wheels into /tmp/site (no index, no dependencies: transformers 5.24's
# huggingface-hub >= 1.31, tokenizers 0.23 and safetensors 0.8 are on the machine), runs the
# driver with python3 (3.12, torch 2.11 there) and leaves $OUT/gpu_check.json and
# $OUT/gpu_check.log. Extra arguments go to the driver (e.g. --models qwen2.5-1.5b-shape,
# --max-new-tokens 256, --gradient-checkpointing, --parts loop for the end-to-end figure alone:
# run_training itself, on vLLM where it imports, else on hf, with its weight push after each update).
set -uo pipefail
cd "$(dirname "$0")/.."
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "gpu_check.sh: installing the carried wheels failed" >&2; exit 3; }
fi
export PYTHONPATH=".:/tmp/site${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
LOG=${OUT:+$OUT/gpu_check.log}
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>/dev/null || echo "no nvidia-smi"
  python3 -c "import sys, torch, transformers; print(sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available())"
  timeout 460 python3 benchmarks/gpu_check.py --device cuda --time-limit 300 "$@"
} 2>&1 | tee ${LOG:-/dev/null}
exit "${PIPESTATUS[0]}"
