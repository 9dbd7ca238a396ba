#!/usr/bin/env bash
# The GPU check in one command: the CUDA unit tests of the blend maths, the operations a blend
# issues by part, then the bench table (Qwen2.5 0.5B/1.5B/7B/14B geometries at 8K and 7B at 32K,
# chunk KV from host and device memory, the every-token path, a profile of each way). Needs torch
# with CUDA, transformers and pytest; nothing from vLLM (tests/unit/test_gpu_check_image.py holds
# it to that). Results go to $OUT (default load_tests/results/gpu-check), and after each part all
# of them into one archive beside it, $OUT.tar.gz, so a run cut short still brings back what it
# did; the parts the issue's targets need come first. A few minutes on an H200.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
OUT=${OUT:-load_tests/results/gpu-check}
OUT=${OUT%/}
mkdir -p "$OUT"
bundle() { tar -czf "$OUT.tar.gz" -C "$OUT" . || echo "could not write $OUT.tar.gz"; }
failed=""  # a failing part does not stop the others: the GPU time is used for all of them
"$PYTHON" -c 'import torch; assert torch.cuda.is_available(), "no CUDA GPU visible"; print(torch.__version__, torch.cuda.get_device_name())'

if "$PYTHON" -c 'import pytest' 2>/dev/null; then
    "$PYTHON" -m pytest -q -p no:cacheprovider -o addopts= \
        tests/unit/test_blend_on_cuda.py tests/unit/test_blend_placed.py \
        tests/unit/test_kvstore_memory.py 2>&1 | tee "$OUT/tests.txt" \
        || failed="$failed tests"
    bundle
else
    echo "pytest is not installed: the CUDA unit tests are skipped" | tee "$OUT/tests.txt"
fi

bench() {  # name, then bench_blend_maths arguments
    local name=$1
    shift
    echo "== $name"
    "$PYTHON" -m load_tests.bench_blend_maths --device cuda --modes probe@0.15,v@0.15 \
        --kv-on host,device --profile --out "$OUT/$name" "$@" 2>&1 | tee "$OUT/$name.txt" \
        || failed="$failed $name"
    bundle
}
bench 7b-8k --geometry 7b --context 8192
bench 0.5b-8k --geometry 0.5b --context 8192
bench 7b-32k --geometry 7b --context 32768 --repeats 3
bench 14b-8k --geometry 14b --context 8192
bench 1.5b-8k --geometry 1.5b --context 8192
echo "== operations a blend issues (kernel launches and copies), by part"
"$PYTHON" -m load_tests.count_blend_ops --device cuda --dtype bfloat16 --context 8192 \
    --chunks 4,16 2>&1 | tee "$OUT/operations.txt" || failed="$failed operations"
bundle
echo "results in $OUT and $OUT.tar.gz"
if [ -n "$failed" ]; then
    echo "failed:$failed"
    exit 1
fi
