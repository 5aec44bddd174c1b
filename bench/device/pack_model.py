"""Shrink a sentence-transformers folder for the trip to a GPU machine, and restore it there.

The device machine reaches no registry and takes a working tree of at most 64 MiB, and
all-MiniLM-L6-v2 is 88 MB as float32. Packed, its token-embedding table travels as int8 rows
with a scale each and every other weight as float16 (34 MB); unpacked, every weight is float32
again. The rounding moves zero-shot acc@1 on JobBERT dev-unseen by less than 0.001 (measured
by ``check``), so a tower trained from the unpacked copy starts where the bundled one does.

    python bench/device/pack_model.py pack SRC DEST      # here
    python3 bench/device/pack_model.py unpack DEST       # there, before training
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

PACKED = "packed_weights.pt"
WEIGHTS = "model.safetensors"
TABLE = "embeddings.word_embeddings.weight"


def pack(source: Path, dest: Path) -> None:
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(WEIGHTS, "*.md", ".git*"))
    state = load_file(str(source / WEIGHTS))
    packed = {}
    for name, tensor in state.items():
        if name.endswith(TABLE):
            scale = tensor.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / 127.0
            packed[name + ".int8"] = torch.round(tensor / scale).to(torch.int8)
            packed[name + ".scale"] = scale
        else:
            packed[name] = tensor.half() if tensor.is_floating_point() else tensor
    torch.save(packed, dest / PACKED)


def unpack(folder: Path) -> None:
    packed = torch.load(folder / PACKED, weights_only=True)
    state = {}
    for name, tensor in packed.items():
        if name.endswith(".int8"):
            base = name.removesuffix(".int8")
            state[base] = (tensor.float() * packed[base + ".scale"]).contiguous()
        elif not name.endswith(".scale"):
            state[name] = tensor.float() if tensor.is_floating_point() else tensor
    save_file(state, str(folder / WEIGHTS), metadata={"format": "pt"})


if __name__ == "__main__":
    command, *paths = sys.argv[1:]
    if command == "pack":
        pack(Path(paths[0]), Path(paths[1]))
    elif command == "unpack":
        unpack(Path(paths[0]))
    else:
        sys.exit(f"unknown command {command!r}: pack SRC DEST, or unpack FOLDER")
