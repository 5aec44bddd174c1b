"""Distillation: the fast n-gram student learns the tower's vectors, and refuses what cannot
work (no teacher, another dimension, a slow student) by name."""

from __future__ import annotations

import numpy as np
import pytest

from models_app.siamese.configs import ConfigError
from models_app.siamese.distill import distill_encoder, distillation_texts
from models_app.siamese.encoders import encoder_class, parse_config
from models_app.siamese.specs import DistillConfig
from models_app.siamese.towers import TransformerEncoder

TITLES = [
    "Registered Nurse", "Staff Nurse", "ICU Nurse", "Charge Nurse", "Nurse Practitioner",
    "Truck Driver", "Delivery Driver", "HGV Driver", "Bus Driver", "Taxi Driver",
    "Java Developer", "Software Engineer", "Backend Developer", "Python Programmer",
    "Barista", "Coffee Shop Server", "Espresso Bar Attendant", "Accountant", "Tax Accountant",
    "Bookkeeper", "Payroll Clerk", "Chef", "Line Cook", "Sous Chef", "Kitchen Porter",
]  # fmt: skip
# No output_dim: a student takes its teacher's dimension.
STUDENT = {"kind": "ngram_bag", "buckets": 4096, "embedding_dim": 64}
QUICK = DistillConfig(batch_size=32, learning_rate=0.02, max_steps=300, augmented_copies=1)


@pytest.fixture(scope="module")
def teacher():
    return TransformerEncoder.create([], parse_config({"kind": "transformer"}))


def test_the_student_learns_the_teachers_vectors(teacher):
    texts = distillation_texts(TITLES, ["night shift nurse", "van driver"], copies=1, seed=0)
    assert len(texts) == len(set(texts)) > len(TITLES) + 2  # augmented copies, distinct
    vectors = teacher.encode(texts)
    untrained = encoder_class("ngram_bag").create(
        texts, parse_config({**STUDENT, "output_dim": teacher.dim})
    )
    before = float((untrained.encode(texts) * vectors).sum(axis=1).mean())
    result = distill_encoder(texts, teacher, STUDENT, QUICK, teacher_vectors=vectors)
    assert result.steps == 300 and result.encoder.dim == teacher.dim
    assert result.metrics["teacher_cosine"] > before + 0.3
    # It ranks like its teacher: each title's nearest other title is the teacher's more often
    # than chance (1 in 24).
    mine, theirs = result.encoder.encode(TITLES), teacher.encode(TITLES)
    agree = 0
    for i in range(len(TITLES)):
        a, b = mine @ mine[i], theirs @ theirs[i]
        a[i] = b[i] = -np.inf
        agree += int(np.argmax(a) == np.argmax(b))
    assert agree >= len(TITLES) // 2


@pytest.mark.parametrize(
    "student, message",
    [
        ({**STUDENT, "output_dim": 128}, "must be the teacher's dimension"),
        ({"kind": "transformer"}, "cannot be a student"),
        ({"kind": "char_ngram_tfidf"}, "cannot be a student"),
    ],
)
def test_a_student_that_cannot_stand_in_for_the_teacher_is_refused(teacher, student, message):
    with pytest.raises(ConfigError, match=message):
        distill_encoder(TITLES, teacher, student, QUICK)


def test_distillation_without_a_teacher_or_texts_is_refused(teacher):
    with pytest.raises(ConfigError, match="needs a teacher"):
        distill_encoder(TITLES, None, STUDENT, QUICK)
    with pytest.raises(ConfigError, match="needs texts"):
        distill_encoder([], teacher, STUDENT, QUICK)
    with pytest.raises(ConfigError, match="do not match the texts"):
        distill_encoder(TITLES, teacher, STUDENT, QUICK, teacher_vectors=np.zeros((2, 384)))


@pytest.mark.parametrize("raw", [{"batch_size": 1}, {"temperature": 0.0}, {"device": "tpu"}])
def test_bad_distillation_options_are_refused(raw):
    with pytest.raises(ConfigError):
        DistillConfig(**raw)
