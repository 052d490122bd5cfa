#!/usr/bin/env bash
# Text generation speed with the key-value cache: cloze-generate against
# transformers' generate() (4.38.2 on Debian's torch 1.13, the venv of
# tests/scripts/hf_venv.sh), both greedy in fp32 on GPT-2 small's shape
# (random weights: GPT2Config's defaults, 124M parameters, saved by
# transformers; cloze-generate reads the same directory), the same 10-token
# prompt, NEW new tokens per sequence, batch 1 and 8, alternated, REPS
# repetitions, medians. Each side times generation only (not loading):
# cloze-generate --stats, generate() after a 2-token warm-up. The first
# sequence's ids must agree (the run stops when they do not).
#
# usage: bench/generate_vs_hf.sh BUILD_DIR
# env: REPS (3), NEW (64), BATCHES ("1 8"), THREADS ("2": each thread count
#      is a row; cloze --threads N, torch.set_num_threads(N)), WORK
#      (scratch, default a temporary directory), LOCK (default
#      /tmp/cloze-cpu.lock, held for each pair of runs so that timed runs of
#      several people on one machine never overlap).
# Prints one RESULT line per run, then a markdown table of medians.
set -euo pipefail
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
reps=${REPS:-3} new=${NEW:-64} batches=${BATCHES:-1 8} threads_list=${THREADS:-2}
lock=${LOCK:-/tmp/cloze-cpu.lock}
py=$("$root/tests/scripts/hf_venv.sh" "$build/hf-venv")
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
work=${WORK:-$(mktemp -d /tmp/cloze-genbench-XXXXXX)}
mkdir -p "$work"
model=$work/gpt2-124m
[ -s "$model/model.safetensors" ] || "$py" "$root/bench/generate_hf.py" make "$model" 2>/dev/null
prompt="464 2068 7586 21831 18045 625 262 16931 3290 13"
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), load $(cut -d' ' -f1-3 /proc/loadavg)"
rows=()
for t in $threads_list; do
  for b in $batches; do
    : >"$work/c.$t.$b"
    : >"$work/h.$t.$b"
    for r in $(seq "$reps"); do
      exec 9>"$lock"
      flock 9
      "$build/cloze-generate" "$model" --prompt-ids "$prompt" --greedy --max-new-tokens "$new" \
        --ignore-eos --ids --stats --threads "$t" --num-samples "$b" >"$work/c.out" 2>"$work/c.err"
      "$py" "$root/bench/generate_hf.py" run "$model" "$b" "$new" "$t" "$prompt" \
        >"$work/h.out" 2>/dev/null
      flock -u 9
      c=$(sed -n 's/.* s: \([0-9.]*\) tokens\/s.*/\1/p' "$work/c.err")
      h=$(awk 'NR == 1 { print $2 }' "$work/h.out")
      [ "$(head -1 "$work/c.out")" = "$(sed -n 2p "$work/h.out")" ] ||
        { echo "the greedy ids differ from transformers' (batch $b)"; exit 1; }
      echo "RESULT threads $t batch $b rep $r: cloze $c tokens/s, transformers $h tokens/s (same ids)"
      echo "$c" >>"$work/c.$t.$b"
      echo "$h" >>"$work/h.$t.$b"
    done
    cm=$(median <"$work/c.$t.$b") hm=$(median <"$work/h.$t.$b")
    rows+=("| $t | $b | $cm | $hm | $(awk -v c="$cm" -v h="$hm" 'BEGIN { printf "%.2fx", c / h }') |")
  done
done
echo
echo "GPT-2 124M shape, fp32, greedy, $new new tokens after a 10-token prompt, medians of $reps:"
echo "| threads | batch | cloze-generate tokens/s | transformers generate() tokens/s | ratio |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
