"""The model `make run` starts with (data/models/onet) loads and behaves like a job-title model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from models_app.siamese.encoders import load_encoder

SHIPPED = Path(__file__).resolve().parent.parent / "data" / "models" / "onet"


@pytest.fixture(scope="module")
def shipped():
    return load_encoder(SHIPPED)


def nearest(encoder, query: str, candidates: list[str]) -> str:
    vectors = encoder.encode([query, *candidates])
    return candidates[int(np.argmax(vectors[1:] @ vectors[0]))]


def test_its_record_names_the_spec_the_command_and_the_measured_accuracy():
    info = json.loads((SHIPPED / "shipped.json").read_text())
    documented = json.loads((SHIPPED.parents[2] / "docs" / "models" / "onet.json").read_text())
    for part in ("encoder", "distill", "search"):
        # The stored spec is the documented one with every default filled in.
        assert documented[part].items() <= info["spec"][part].items()
    # A student of the title tower, rebuilt by one command from the shipped data.
    assert info["command"] == "bench/onet_student.py --write"
    card = json.loads((SHIPPED.parent / "title_tower" / "card.json").read_text())
    # Distilled from the title tower that ships beside it, not an earlier build of it.
    assert info["spec"]["distill"]["teacher_version"] == f"title tower {card['layers_sha256'][:12]}"
    assert 0.5 < info["metrics"]["suite"]["mean_accuracy"] <= 1.0


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Sr. Java Dev (m/f/d) Berlin", "Java Developer"),
        ("registred nurse ICU night shift", "Registered Nurse"),
        ("barista - part time - weekends", "Barista"),
        ("CDL-A truck driver OTR", "Heavy Truck Driver"),
    ],
)
def test_noisy_titles_land_next_to_their_clean_title(shipped, query, expected):
    candidates = [
        "Java Developer",
        "Registered Nurse",
        "Barista",
        "Heavy Truck Driver",
        "Accountant",
    ]
    assert nearest(shipped, query, candidates) == expected
