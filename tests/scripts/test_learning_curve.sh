#!/usr/bin/env bash
# BERT-mini learns: shards from WikiText-2 valid + 12 Gutenberg books (BERT's
# own uncased vocabulary, ~1.5% of documents held out), 2 ranks, a CI-sized
# budget. The held-out MLM accuracy must rise over the run and end well above
# the unigram baseline (always predicting the most frequent held-out token).
# The curve is written to $CLOZE_CURVE_OUT (default: the work dir, printed).
set -euo pipefail
source "$(dirname "$0")/train_common.sh"
data=${CLOZE_SHARED_DATA:-}
if [ -z "$data" ] || [ ! -f "$data/vocab/bert-base-uncased/vocab.txt" ]; then
  echo "SKIP: CLOZE_SHARED_DATA not set or incomplete"; exit 77
fi
work=$(mktemp -d /tmp/cloze-curve-XXXXXX)
trap 'rm -rf "$work"' EXIT
steps=${CLOZE_CURVE_STEPS:-450}
# CLOZE_CURVE_EVAL_EVERY: steps between held-out evaluations (default a
# fifth of the run; 500 gives issue 33's points 500, 1000, 1500)
eval_every=${CLOZE_CURVE_EVAL_EVERY:-$(( steps / 5 ))}
# CLOZE_CURVE_MATMUL=fp32|bf16 (model.matmul_precision) and CLOZE_CURVE_SEED
# (train.seed) compare precisions and measure seed-to-seed noise
# (docs/learning-curve.md, "bf16 mode").
precision=${CLOZE_CURVE_MATMUL:-fp32}
seed=${CLOZE_CURVE_SEED:-12345}
if [ "$precision" = bf16 ] && ! grep -qw avx512_bf16 /proc/cpuinfo; then
  echo "SKIP: model.matmul_precision=bf16 needs AVX512_BF16"; exit 77
fi

# CLOZE_CURVE_FINAL: file that receives "final_acc final_loss" of a run
# without CLOZE_CURVE_REF (the fp32 test) and that a run with it (the bf16
# test) reads as its reference; the writer removes it first, so a failed
# fp32 run never leaves a stale reference behind.
if [ -n "${CLOZE_CURVE_FINAL:-}" ] && [ -z "${CLOZE_CURVE_REF:-}" ]; then rm -f "$CLOZE_CURVE_FINAL"; fi

"$BIN/cloze-prep" shards --vocab "$data/vocab/bert-base-uncased/vocab.txt" --out "$work/shards" \
  --shards 2 --heldout 0.015 --wikitext-detok --quiet \
  "$data/corpus/wikitext-2-raw" "$data/corpus/gutenberg"

# seq 128 / max_pred 20 as in BERT's phase 1. MLM first sits on a plateau
# where it predicts only the most frequent token; measured (docs/
# learning-curve.md): batch 32 with dropout for 200 steps, and batch 16
# without dropout for 450 steps, both at lr 1e-3 with BERT's uncorrected Adam,
# never left it. What does: lr 5e-4, 10% warm-up, Adam's bias correction, many
# small steps (batch 16: the budget is ~1M tokens), no dropout.
mpi 2 "$BIN/cloze-train" "$SRC/conf/bert-mini.cfg" \
  --set data.train_manifest="$work/shards/train.manifest" \
  --set data.heldout_manifest="$work/shards/heldout.manifest" \
  --set train.run_dir="$work/run" --set train.steps=$steps \
  --set train.global_batch=16 --set train.micro_batch=8 --set train.threads=1 \
  --set train.log_every=20 --set train.eval_every=$eval_every --set train.eval_batches=32 \
  --set train.ckpt_every=0 --set optim.lr=5e-4 --set optim.warmup_steps=0 \
  --set optim.warmup_fraction=0.1 --set optim.bias_correction=true --set model.hidden_dropout=0 \
  --set model.attn_dropout=0 --set data.seq=128 --set data.max_pred=20 \
  --set model.matmul_precision=$precision --set train.seed=$seed

$PY - "$work/shards/heldout.manifest" "$work/run/metrics.jsonl" "${CLOZE_CURVE_OUT:-$work/curve.md}" <<'PY'
import collections, json, os, struct, sys
manifest, metrics, out = sys.argv[1:4]
# unigram baseline: the most frequent held-out token (shard layout:
# include/cloze/shard.h), leaving out the specials that are never MLM labels
special, counts = set(), collections.Counter()
for line in open(manifest):
    f = line.split()
    if f[0] == "special" and f[1] in ("cls", "sep", "pad", "mask"):
        special.add(int(f[2]))
    if f[0] == "shard":
        path = os.path.join(os.path.dirname(manifest), f[1])
        with open(path, "rb") as s:
            b = s.read()
        width, n_tokens = struct.unpack_from("<I", b, 12)[0], struct.unpack_from("<Q", b, 32)[0]
        off = struct.unpack_from("<Q", b, 56)[0]
        fmt = "<%d%s" % (n_tokens, "H" if width == 2 else "I")
        counts.update(struct.unpack_from(fmt, b, off))
for t in special:
    counts.pop(t, None)
top, top_n = counts.most_common(1)[0]
baseline = top_n / sum(counts.values())
evals = [r for r in map(json.loads, open(metrics)) if "eval_mlm_acc" in r]
rows = ["| step | held-out MLM loss | held-out MLM acc | held-out NSP acc |", "|---|---|---|---|"]
rows += ["| %d | %.3f | %.3f | %.3f |" % (r["step"], r["eval_mlm_loss"], r["eval_mlm_acc"],
                                         r["eval_nsp_acc"]) for r in evals]
rows.append("\nunigram baseline (token id %d, %d of %d held-out tokens): %.3f"
            % (top, top_n, sum(counts.values()), baseline))
open(out, "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
first, last = evals[0]["eval_mlm_acc"], evals[-1]["eval_mlm_acc"]
# Margin: 3 points above the baseline. The evaluation scores ~4900 masked
# tokens, so the standard error of an accuracy near 0.1 is ~0.0043: 0.03 is
# seven of them, and it also clears the eval subset's own unigram figure (the
# plateau runs scored 0.062 there, always predicting one token). A model that
# only learned the unigram distribution fails; so does one that learned nothing.
margin = 0.03
assert last >= baseline + margin, f"final held-out MLM acc {last:.3f} < baseline {baseline:.3f} + {margin}"
# rose: above the first evaluation after step 0 (step 0 itself scores ~0)
second = evals[1]["eval_mlm_acc"]
assert last >= second + margin, f"held-out MLM acc did not rise: {second:.3f} -> {last:.3f}"
assert evals[-1]["eval_mlm_loss"] < evals[1]["eval_mlm_loss"] - 0.2, "held-out MLM loss did not fall"
print(f"learning curve: ok (final {last:.3f} vs baseline {baseline:.3f} + {margin})")
final = os.environ.get("CLOZE_CURVE_FINAL")
if final and not os.environ.get("CLOZE_CURVE_REF"):
    open(final, "w").write("%.6f %.6f\n" % (last, evals[-1]["eval_mlm_loss"]))
# Against a reference curve (CLOZE_CURVE_REF="acc loss band_acc band_loss"):
# the bf16 run must end where fp32 ends, within the measured noise. When the
# fp32 run of the same test session left its final figures in
# CLOZE_CURVE_FINAL, those replace acc and loss (same code, same machine).
ref = os.environ.get("CLOZE_CURVE_REF")
if ref:
    acc, loss, band_acc, band_loss = map(float, ref.split())
    if final and os.path.exists(final):
        acc, loss = map(float, open(final).read().split())
        print(f"reference: the fp32 run of this session ({final})")
    fin_acc, fin_loss = last, evals[-1]["eval_mlm_loss"]
    assert abs(fin_acc - acc) <= band_acc, \
        f"final held-out MLM acc {fin_acc:.3f}, reference {acc:.3f} +- {band_acc}"
    assert abs(fin_loss - loss) <= band_loss, \
        f"final held-out MLM loss {fin_loss:.3f}, reference {loss:.3f} +- {band_loss}"
    print(f"reference: ok (acc {fin_acc:.3f} vs {acc:.3f} +- {band_acc}, "
          f"loss {fin_loss:.3f} vs {loss:.3f} +- {band_loss})")
PY
