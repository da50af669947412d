#!/usr/bin/env bash
# The MLP of train_mlp on a GPU, ours against PyTorch (bench/torch_mlp.py) on the same device,
# and ours under budgets, each a fraction of our unbudgeted peak: per run the mean step time
# (every step, as train_mlp reports it), the final loss (the same bits under every budget: the
# budgeted runs replay the unbudgeted one), peak bytes, evictions, rematerializations and the
# pool's search + bookkeeping time.  Costs for the heuristic come from the flops model: a kernel
# timed on the host would measure its launch, not its run.
# Usage (on the GPU machine; scripts/gpu-check.sh run calls it):
#   TRAIN_MLP=build-gpu-carry/train_mlp bench/gpu_mlp.sh
# (DEVICE=cpu and smaller HIDDEN, LAYERS, BATCH, STEPS, BUDGETS try it out without a GPU.)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TRAIN_MLP:-build-gpu/examples/train_mlp}
python=${PYTHON:-python3}
device=${DEVICE:-cuda}
hidden=${HIDDEN:-2048} layers=${LAYERS:-8} batch=${BATCH:-8192} steps=${STEPS:-30}
budgets=${BUDGETS:-"none 0.7 0.5 0.35"}
examples=$((batch * 4))
epochs=$(((steps + 3) / 4))
echo "== MLP 784-${hidden}x${layers}-10, batch ${batch}, ${steps} steps, SGD momentum 0.9"
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for b in $budgets; do
  if out=$("$bin" --device "$device" --random-data --hidden "$hidden" --layers "$layers" \
    --batch-size "$batch" --train-limit "$examples" --test-limit "$batch" --epochs "$epochs" \
    --steps "$steps" --lr 0.01 --budget "$b" --dtr-cost flops 2>&1); then
    echo "{\"run\": \"ours\", \"budget\": \"$b\", \"result\": $(tail -1 <<<"$out")}" >>"$results"
  else
    echo "ours at budget $b failed: $(grep -m1 "^train_mlp:" <<<"$out" || tail -1 <<<"$out")"
  fi
done
# Where our unbudgeted step's device time goes (each call waits for its kernels here).
echo "== ours, unbudgeted, per op (device time, profiled run)"
"$bin" --device "$device" --random-data --hidden "$hidden" --layers "$layers" \
  --batch-size "$batch" --train-limit "$examples" --test-limit "$batch" --epochs 2 --steps 6 \
  --lr 0.01 --dtr-cost flops --profile 2>&1 >/dev/null | head -22 || true
if out=$("$python" bench/torch_mlp.py --device "$device" --hidden "$hidden" --layers "$layers" \
  --batch-size "$batch" --steps "$steps" --examples "$examples" --lr 0.01 2>&1); then
  echo "{\"run\": \"pytorch\", \"budget\": \"none\", \"result\": $(tail -1 <<<"$out")}" >>"$results"
else
  echo "PyTorch failed: $(tail -3 <<<"$out")"
fi
"$python" - "$results" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
base = next((r["result"] for r in runs if r["run"] == "ours" and r["budget"] == "none"), None)
torch = next((r["result"] for r in runs if r["run"] == "pytorch"), None)
mib = lambda b: f"{b / 2**20:.0f} MiB" if b is not None else "-"
for r in runs:
    x = r["result"]
    line = (f"{r['run']:8s} budget {r['budget']:5s} {x['ms_per_step']:8.2f} ms/step"
            f" (median after warm-up {x['median_ms_after_warmup']:.2f})")
    if r["run"] == "pytorch":
        line += (f"  peak allocated"
                 f" {mib(x.get('peak_allocated_bytes'))}, reserved {mib(x.get('peak_reserved_bytes'))}")
    else:
        line += (f"  peak {mib(x['peak_resident_bytes'])}, budget {mib(x['budget_bytes'])},"
                 f" {x['evictions']} evictions, {x['rematerializations']} remats,"
                 f" search+bookkeeping {x['overhead_ms']:.1f} ms in all")
        if base:
            line += f", x{x['ms_per_step'] / base['ms_per_step']:.3f} of unbudgeted"
            same = x["final_loss"] == base["final_loss"]
            line += ", final loss " + ("identical" if same else f"DIFFERS {x['final_loss']!r} vs {base['final_loss']!r}")
    print(line)
if base and torch:
    print(f"ours / PyTorch, unbudgeted: {base['ms_per_step'] / torch['ms_per_step']:.3f} (mean),"
          f" {base['median_ms_after_warmup'] / torch['median_ms_after_warmup']:.3f} (median after warm-up)")
PY
