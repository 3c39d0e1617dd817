#!/usr/bin/env bash
# The first GPU run's checks (docs/gpu.md), in phases that each fit one 10-minute call of
# the device tool. Here, once:     bash benchmarks/gpu/gpu_session.sh wheels
# There (carry .whl):              bash benchmarks/gpu/gpu_session.sh PHASE     ($OUT: where the results go)
#   tests    the model-dependent tests on CUDA (PARAVT_TEST_DEVICE=cuda)
#   main     the main job with model.device=cuda, to the end
#   step2b   benchmarks.gpu.gpu_step: 3 PARA-GRPO steps of a random Qwen3-VL-2B (recipe gpu_smoke), then 1 step
#            of the path before the rollout engine (--engine generate; its own 4-step cold start), beside it
#   step8b   the same at 8B, 2 steps (by arithmetic it does not fit one GPU: the OOM and its peak are the figure)
#   episode  the OpenRLHF executor's episode at 2B with the local engine: alignment, scripted and sampled
#   memory   training log-probs at Qwen's vocabulary, chunked vs plain, on the GPU
#   video    the frame-sampling benchmarks (ours vs qwen-vl-utils) on the 16-core machine
set -euo pipefail
cd "$(dirname "$0")/.."
phase=${1:?usage: bash benchmarks/gpu/gpu_session.sh wheels|tests|main|step2b|step8b|episode|memory|video}
out=${OUT:-runs/gpu}
mkdir -p "$out"

if [ "$phase" = wheels ]; then
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux1_x86_64 -d .whl -r requirements/gpu-carry.txt
    exit 0
fi

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD" PARAVT_CACHE=/tmp/paravt_cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$out/gpu.txt"

case "$phase" in
    tests)
        # the engines are not carried: their adapters' tests skip (PARAVT_ENGINE unset)
        PARAVT_TEST_DEVICE=cuda python3 -m pytest -q -p no:cacheprovider tests/paravt/learners \
            tests/benchmarks/gpu/test_gpu_step.py 2>&1 | tee "$out/tests.log" ;;
    main)
        python3 -m paravt train --recipe tiny_cpu --out "$out/main" --no-progress model.device=cuda 2>&1 | tee "$out/main.log" ;;
    step2b)
        python3 -m benchmarks.gpu.gpu_step --out "$out/step2b" --no-progress 2>&1 | tee "$out/step2b.log"
        cp "$out/step2b/gpu_step.json" "$out/step2b.json"
        python3 -m benchmarks.gpu.gpu_step --out "$out/step2b_generate" --no-progress --engine generate --steps 1 2>&1 \
            | tee -a "$out/step2b.log"
        cp "$out/step2b_generate/gpu_step.json" "$out/step2b_generate.json" ;;
    step8b)
        # no SFT stage: its optimiser's fp32 masters would sit beside RL's (2 x 35 GB at 8B)
        python3 -m benchmarks.gpu.gpu_step --out "$out/step8b" --no-progress --steps 2 model.size=8b sft.steps=0 \
            2>&1 | tee "$out/step8b.log" || true
        cp "$out/step8b/gpu_step.json" "$out/step8b.json" ;;
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
    *) echo "unknown phase $phase" >&2; exit 2 ;;
esac
