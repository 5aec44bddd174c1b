#!/usr/bin/env bash
# Train the ESCO and O*NET towers on the device machine (see bench/device/README.md); results
# and one trained tower, packed, land in $OUT. Run from the repository root, with .device carried.
#   TAXONOMIES  which to train (default esco,onet); ESCO_RECIPES  its recipes (default default)
#   BRING_BACK  whose "default" tower comes back packed (default esco): the trip back takes
#               64 MiB in all, room for one packed tower (34 MB)
#   MINUTES     each model's training budget
set -euo pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
MINUTES=${MINUTES:-1.25}
TAXONOMIES=${TAXONOMIES:-esco,onet}
ESCO_RECIPES=${ESCO_RECIPES:-default}
BRING_BACK=${BRING_BACK:-esco}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, sentence_transformers as s; print(torch.__version__, s.__version__)" | tee -a "$OUT/gpu.txt"
python3 bench/device/pack_model.py unpack .device/minilm
for taxonomy in ${TAXONOMIES//,/ }; do
    recipes=default
    [ "$taxonomy" = esco ] && recipes=$ESCO_RECIPES
    python3 bench/tower_training.py --device cuda --base .device/minilm --data .device/data \
        --minutes "$MINUTES" --zero-shot --taxonomies "$taxonomy" --recipes "$recipes" \
        --save "$OUT/towers" --out "$OUT/tower_training_$taxonomy.json" 2>&1 \
        | grep -v -i "warn\|Loading weights\|shards"
done
# Bring one tower back packed and split (the trip back takes files of at most 16 MiB).
python3 bench/device/pack_model.py pack "$OUT/towers/$BRING_BACK-default" /tmp/packed
split -b 15M /tmp/packed/packed_weights.pt "$OUT/${BRING_BACK}_default_packed.part-"
tar -C /tmp/packed --exclude="$(basename /tmp/packed/packed_weights.pt)" -czf "$OUT/${BRING_BACK}_default_files.tgz" .
rm -rf "$OUT/towers"
ls -la "$OUT"
