"""What the engine's training tests share: four small groups of member strings, a tiny n-gram bag
encoder, a short training config and a model's weights as arrays."""

from __future__ import annotations

import numpy as np

from models_app.siamese.specs import TrainConfig

GROUPS = {
    0: ["java developer", "software engineer", "python developer", "backend developer"],
    1: ["registered nurse", "icu nurse", "staff nurse", "charge nurse"],
    2: ["barista", "coffee maker", "espresso bar attendant", "coffee shop server"],
    3: ["truck driver", "long haul trucker", "cdl truck driver", "tractor trailer driver"],
}

MEMBERS = [(group, text) for group, texts in GROUPS.items() for text in texts]

ENCODER = {"kind": "ngram_bag", "buckets": 4096, "embedding_dim": 16, "output_dim": 16}


def config(**overrides) -> TrainConfig:
    base = {
        "batch_size": 8, "max_steps": 30, "eval_every": 10, "patience": 10,
        "validation_share": 0.0, "learning_rate": 0.05, "threads": 1,
    }  # fmt: skip
    return TrainConfig(**{**base, **overrides})


def weights(encoder) -> dict[str, np.ndarray]:
    return {name: value.numpy().copy() for name, value in encoder.state_dict().items()}
