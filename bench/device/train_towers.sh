#!/usr/bin/env bash
# Train the ESCO and O*NET towers on the device machine (see bench/device/README.md); results
# and the packed ESCO tower land in $OUT. Run from the repository root, with .device carried.
set -euo pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
MINUTES=${MINUTES:-1.25}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, sentence_transformers as s; print(torch.__version__, s.__version__)" | tee -a "$OUT/gpu.txt"
python3 bench/device/pack_model.py unpack .device/minilm
run() { python3 bench/tower_training.py --device cuda --base .device/minilm --data .device/data \
          --minutes "$MINUTES" --zero-shot "$@"; }
run --taxonomies esco --recipes default,batch256,steps1500 --save "$OUT/towers" \
    --out "$OUT/tower_training_esco.json" 2>&1 | grep -v -i "warn\|Loading weights\|shards"
run --taxonomies onet --recipes default --out "$OUT/tower_training_onet.json" 2>&1 \
    | grep -v -i "warn\|Loading weights\|shards"
# Bring the ESCO tower back packed and split (the trip back takes files of at most 16 MiB).
python3 bench/device/pack_model.py pack "$OUT/towers/esco-default" /tmp/esco-packed
split -b 15M /tmp/esco-packed/packed_weights.pt "$OUT/esco_default_packed.part-"
rm -rf "$OUT/towers"
ls -la "$OUT"
