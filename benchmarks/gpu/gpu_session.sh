#!/usr/bin/env bash
# The first GPU run's checks (docs/gpu.md), in phases; several phases run in one call of the device tool, in the
# order given (each call at most 10 minutes, about 15 minutes of device time in all: docs/gpu.md has the plan).
# Here, once:     bash benchmarks/gpu/gpu_session.sh wheels
# There (carry .whl):   bash benchmarks/gpu/gpu_session.sh PHASE...     ($OUT: where the results go)
#   tests    the model-dependent tests on CUDA (PARAVT_TEST_DEVICE=cuda): the learners, the policies (the rollout
#            engine) and gpu_step's own; 8 pytest-xdist workers on one GPU where xdist is installed
#   main     the main job with model.device=cuda, to the end
#   step2b   benchmarks.gpu.gpu_step: a random Qwen3-VL-2B at the release's settings (recipe gpu_smoke), one cold
#            start, then 1 PARA-GRPO step with the rollout engine and 1 with model.generate (the path before it),
#            every thread's stack printed each minute; run it alone (docs/gpu.md)
#   step8b   the same at 8B, 1 step, 256 new tokens a turn (by arithmetic it does not fit one GPU: the out-of-memory
#            error and its peak are the figure; short rollouts reach the update sooner)
#   episode  the OpenRLHF executor's episode at 2B with the local engine: alignment, scripted and sampled
#   memory   training log-probs at Qwen's vocabulary, chunked vs plain, on the GPU
#   video    the frame-sampling benchmarks (ours vs qwen-vl-utils) on the 16-core machine
#   install  nothing but the carried wheels: run it first when phases then run side by side (WORKERS=N: test workers)
set -euo pipefail
cd "$(dirname "$0")/../.."  # the repository root
[ $# -gt 0 ] || { echo "usage: bash benchmarks/gpu/gpu_session.sh wheels | PHASE... (tests main step2b step8b episode memory video install)" >&2; exit 2; }
out=${OUT:-runs/gpu}
# run directories (checkpoints, videos) outside $OUT: the device tool brings back 8 files from it at most
runs=${GPU_RUNS:-/tmp/paravt_gpu_runs}
mkdir -p "$out" "$runs"

if [ "$1" = wheels ]; then
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux1_x86_64 -d .whl -r requirements/gpu-carry.txt
    exit 0
fi

# Installed once per machine (a second invocation, or one beside it, finds the marker).
if [ ! -e /tmp/site/.paravt-carried ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    touch /tmp/site/.paravt-carried
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
fi
export PYTHONPATH="/tmp/site:$PWD" PARAVT_CACHE=/tmp/paravt_cache PYTHONUNBUFFERED=1
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$out/gpu.txt"

for phase in "$@"; do
echo "== phase $phase ($(date -u +%T))"
case "$phase" in
    tests)
        # the engines are not carried: their adapters' tests skip (PARAVT_ENGINE unset)
        # -v (and no -q, which cancels it): each result named as it comes, so that a run cut off by its time
        # limit still says what failed; --timeout: one hung test does not take the call
        workers=$(python3 -c "import xdist" 2>/dev/null && echo "-n ${WORKERS:-8} --dist loadfile" || true)
        timeout=$(python3 -c "import pytest_timeout" 2>/dev/null && echo "--timeout 150" || true)
        # $TESTS: other test paths (a rerun of what failed, say)
        PARAVT_TEST_DEVICE=cuda python3 -m pytest -v -rfE --tb=short -p no:cacheprovider $workers $timeout \
            ${TESTS:-tests/paravt/learners tests/paravt/policies tests/benchmarks/gpu/test_gpu_step.py} 2>&1 \
            | tee "$out/tests.log" || true ;;
    main)
        python3 -m paravt train --recipe tiny_cpu --out "$runs/main" --no-progress model.device=cuda 2>&1 | tee "$out/main.log" ;;
    step2b)
        # $ENGINES: the engines measured in turn (a random 2B's rollout at the release's settings takes minutes each);
        # $STEP2B_ARGS: recipe overrides (sft.steps=0: no cold-start stage, the RL step sooner)
        python3 -m benchmarks.gpu.gpu_step --out "$runs/step2b" --stacks-every "${STACKS_EVERY:-60}" --steps 1 \
            --engine "${ENGINES:-cached,generate}" ${STEP2B_ARGS:-} 2>&1 \
            | tee "$out/step2b.log" || true
        cp "$runs/step2b/gpu_step.json" "$out/step2b.json" || true ;;
    step8b)
        # no SFT stage: its optimiser's fp32 masters would sit beside RL's (2 x 35 GB at 8B)
        python3 -m benchmarks.gpu.gpu_step --out "$runs/step8b" --stacks-every 60 --steps 1 model.size=8b sft.steps=0 \
            rollout.max_new_tokens=256 2>&1 | tee "$out/step8b.log" || true
        cp "$runs/step8b/gpu_step.json" "$out/step8b.json" || true ;;
    episode)
        python3 -m benchmarks.gpu.openrlhf_episode --out "$out/episode_scripted.json" 2>&1 | tee "$out/episode.log"
        python3 -m benchmarks.gpu.openrlhf_episode --engine sampled --out "$out/episode_sampled.json" rollout.max_new_tokens=512 \
            2>&1 | tee -a "$out/episode.log" ;;
    memory)
        python3 -m benchmarks.perf.logprob_memory --device cuda --positions 10000 --out "$out/logprob_memory.json" 2>&1 | tee "$out/memory.log" ;;
    video)
        python3 -m pytest -q -p no:cacheprovider benchmarks/perf/test_bench_video.py --benchmark-only \
            --benchmark-json="$out/bench_video.json" 2>&1 | tee "$out/video.log"
        python3 -m benchmarks.perf.report "$out/bench_video.json" | tee -a "$out/video.log" ;;
    install) ;;  # the wheels only (above): before phases started side by side, which would install them twice at once
    *) echo "unknown phase $phase" >&2; exit 2 ;;
esac
done
