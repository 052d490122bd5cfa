#!/usr/bin/env bash
# µP's coordinate check as a test (cloze-sweep coordcheck): GPT-2's layout,
# 1 layer, widths 64 ... 512, 3 AdamW steps at lr 1e-2, mean of 3 seeds.
# Under µP every site's mean |activation| (embeddings, attention and FFN
# outputs, logits) stays within a factor 2 across the widths, and the
# standard parametrization's logits grow by more (exit 0, "ok"); with the
# readout multiplier planted at 1 (CLOZE_COORDCHECK_FAULT=output_mult_1) the
# µP logits grow with width and the check fails (exit 1) naming the logits.
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
work=$(mktemp -d /tmp/cloze-coordcheck-XXXXXX)
trap 'rm -rf "$work"' EXIT
args=(coordcheck "$SRC/conf/gpt2-mini.cfg" --set model.vocab_size=256 --set model.vocab_pad_to=0
      --set model.layers=1 --set data.seq=16 --set train.micro_batch=4 --set optim.lr=1e-2
      --widths 64,128,256,512 --steps 3 --seeds 3 -t 1)
"$BIN/cloze-sweep" "${args[@]}" --out "$work/good" > "$work/good.log" 2>&1 ||
  { cat "$work/good.log"; echo "FAIL: the coordinate check fails µP"; exit 1; }
cat "$work/good.log" | grep -v "info\]"
grep -q "coordcheck: µP: every scale within a factor .*: ok$" "$work/good.log" ||
  { echo "FAIL: no verdict line"; exit 1; }
# the table: 2 parametrizations x 4 widths x (embeddings, attn, ffn, logits)
[ "$(grep -c '' "$work/good/coordcheck.csv")" = 33 ] || { echo "FAIL: coordcheck.csv rows"; exit 1; }
if CLOZE_COORDCHECK_FAULT=output_mult_1 "$BIN/cloze-sweep" "${args[@]}" > "$work/bad.log" 2>&1; then
  cat "$work/bad.log"; echo "FAIL: the planted readout multiplier passed the check"; exit 1
fi
grep "coordcheck: µP" "$work/bad.log"
grep -q "PLANTED FAULT" "$work/bad.log" && grep -q "(worst: logits; limit 2).*FAILED$" "$work/bad.log" ||
  { cat "$work/bad.log"; echo "FAIL: the fault's verdict does not name the logits"; exit 1; }
echo "test_mup_coordcheck: ok"
