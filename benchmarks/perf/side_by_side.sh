#!/bin/bash
# The RL step and the evaluation of two checkouts, side by side and alternated (ROUNDS rounds, one torch thread each),
# on the same cold start, training videos and held-out videos:
#
#   git worktree add /tmp/ref 5c0f8f3 && git worktree add /tmp/new HEAD
#   bash benchmarks/perf/side_by_side.sh /tmp/ref /tmp/new OUT [ROUNDS]
#
# Each round trains 6 RL steps of repro_cpu from the repro's committed cold start (24 training videos, 32 held out)
# and evaluates the cold start on the 32 held-out videos at frame budget 8 with up to 5 parallel crops. Then:
#   python benchmarks/perf/side_by_side.py OUT
# prints the steps' seconds and training tokens/s (step 1 left out: its caches are cold), the evaluations' seconds
# and whether their rows are identical.
set -u
REF=$(realpath "$1"); NEW=$(realpath "$2"); OUT=$(realpath -m "$3"); ROUNDS=${4:-2}
CS=$(realpath "$(dirname "$0")/../../results/repro/repro_cpu/coldstart/coldstart/model")
export OMP_NUM_THREADS=1
mkdir -p "$OUT"
for R in $(seq 1 "$ROUNDS"); do
  for V in ref new; do
    D=$REF; [ $V = new ] && D=$NEW
    T=$OUT/${V}_train_$R; rm -rf "$T"
    (cd "$D" && PYTHONPATH=$D python -m paravt train --recipe repro_cpu --out "$T" --threads 1 model.path="$CS" \
       sft.steps=0 perception.steps=0 steps=6 data.synth_n=24 data.heldout_n=32 > "$T.log" 2>&1) || echo "train failed: $V $R"
    E=$OUT/${V}_eval_$R; rm -rf "$E"
    START=$(date +%s.%N)
    (cd "$D" && PYTHONPATH=$D python -m paravt eval --policy "hf:$CS" --data "$OUT/ref_train_1/heldout" --out "$E" \
       --frame-budget 8 --max-parallel 5 --crop-max-frames 16 --max-pixels 12544 --prompt-mode agentic_compact \
       --threads 1 --no-progress > "$E.log" 2>&1) || echo "eval failed: $V $R"
    echo "$V $R $(echo "$(date +%s.%N) - $START" | bc)" >> "$OUT/eval_process_s.txt"
  done
done
