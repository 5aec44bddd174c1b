"""The shipped O*NET model: a fast n-gram student distilled from the title tower.

The demo serves O*NET with a hashed n-gram bag (``STUDENT_SPEC`` in ``SHIPPED_SHAPE``: tens of
thousands of strings a second, where the tower encodes a few hundred) that learns to put texts
where the title tower (``bench/title_tower.py``) puts them, in the tower's first 128 principal
directions. Its texts, as the product's own distillation takes them
(``distillation_texts``): every O*NET title, two augmented copies of each (job-ad words,
typos), and the unlabelled real vacancy titles of JobBERT's curator stream as the inputs a
taxonomy has received (dev-unseen titles never; no label is used). A fixed step count, so a
rebuild is the same work on every machine.

Measured by the embedding alone (a group scores as its nearest member), paired on the same
titles against the model shipped before and against its teacher: O*NET dev-unseen vacancy
titles through Nesta's crosswalk, and 2,000 clean O*NET alternate titles held out of the
members searched (``bench/title_tower.py``'s held-out set; the model shipped before was trained on
them with their labels, the tower and the student never were).

    .venv/bin/python bench/onet_student.py --write     # rebuild data/models/onet/ (~15 min)

Prints a table and writes bench/results/onet_student.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench.jobbert_data import SHARED_DATA  # noqa: E402
from bench.ranker import esco_taxonomy, onet_taxonomy, title_tower_encoder, unit  # noqa: E402
from bench.real_accuracy import paired  # noqa: E402
from bench.title_tower import (  # noqa: E402
    Measure,
    clean_held_out,
    metrics,
    without,
)
from models_app.siamese.artifacts import fsync_path  # noqa: E402
from models_app.siamese.baselines import EncoderMatcher  # noqa: E402
from models_app.siamese.distill import distill_encoder, distillation_texts  # noqa: E402
from models_app.siamese.encoders import load_encoder, parse_config  # noqa: E402
from models_app.siamese.evaluation import build_test_suite, evaluate  # noqa: E402
from models_app.siamese.exact_cosines import principal_directions  # noqa: E402
from models_app.siamese.specs import STUDENT_SPEC, DistillConfig  # noqa: E402
from models_app.siamese.title_tower import SHIPPED_FOLDER, read_card  # noqa: E402
from models_app.siamese.towers import TransformerEncoder  # noqa: E402

SHIPPED = ROOT / "data" / "models" / "onet"
OUT = ROOT / "bench" / "results" / "onet_student.json"
DISTILL = {"batch_size": 512, "max_steps": 12000, "max_minutes": 60.0, "seed": 0}
COMMAND = "bench/onet_student.py --write"
# The shipped student's shape (docs/models/onet.json): the tower's first 128 principal
# directions from a table 128 wide answer real titles as the 384-d student did, at a third of
# the search's work and half the bytes; a table 64 wide fell a point behind on vacancy titles
# (docs/benchmarks.md, "The title tower").
SHIPPED_SHAPE = {"output_dim": 128, "embedding_dim": 128}


class ProjectedTeacher:
    """The teacher's vectors in ``basis``'s directions, unit length: what a smaller student is
    measured against as its teacher."""

    def __init__(self, teacher, basis: np.ndarray) -> None:
        self.teacher, self.basis, self.dim = teacher, basis, basis.shape[1]

    def encode(self, texts: list[str]) -> np.ndarray:
        return unit(np.asarray(self.teacher.encode(texts), dtype=np.float32) @ self.basis)


def git_commit() -> str:
    found = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return found.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--steps", type=int, default=DISTILL["max_steps"])
    parser.add_argument("--write", action="store_true", help="replace data/models/onet/")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--dims",
        type=int,
        default=SHIPPED_SHAPE["output_dim"],
        help="the student's dimensions, distilled toward the teacher's vectors in their first "
        "principal directions (0: the teacher's own 384; with --embedding-dim 256, the student "
        "shipped before the 128-d one)",
    )
    parser.add_argument(
        "--embedding-dim",
        type=int,
        default=SHIPPED_SHAPE["embedding_dim"],
        help="the n-gram table's width",
    )
    args = parser.parse_args()
    shape = {"output_dim": args.dims, "embedding_dim": args.embedding_dim}
    if not 0 <= args.dims <= 384 or args.dims == 1 or args.embedding_dim < 2:
        parser.error("--dims is 0 or 2 to 384, --embedding-dim at least 2")
    if args.write and shape != SHIPPED_SHAPE:
        parser.error(f"--write ships the documented shape only ({SHIPPED_SHAPE})")

    # The strings the shipped student was distilled from: O*NET's own, as the tower read them.
    onet, esco = onet_taxonomy(args.data, short_forms=False), esco_taxonomy(args.data)
    teacher = TransformerEncoder.create([], parse_config({"kind": "transformer"}))
    card = read_card(SHIPPED_FOLDER)  # the title tower must be the one that serves
    members = [text for _, text in onet.members]
    # ESCO's stream holds every curator-stream title; the crosswalk keeps only some of them.
    stream = list(dict.fromkeys(text for text, _ in esco.stream))
    distill = DistillConfig(**{**DISTILL, "max_steps": args.steps})
    texts = distillation_texts(members, stream, copies=distill.augmented_copies, seed=distill.seed)
    print(f"{len(texts):,} texts: {len(members):,} O*NET titles, copies, {len(stream):,} stream")
    started = time.perf_counter()
    teacher_vectors = title_tower_encoder().vectors(texts)  # cached by the tower's digest
    encode_seconds = time.perf_counter() - started
    print(f"teacher encoded them in {encode_seconds:.0f} s", flush=True)
    student_config = {**STUDENT_SPEC["encoder"], "embedding_dim": args.embedding_dim}
    target, target_vectors, basis = teacher, teacher_vectors, None
    if args.dims:
        # The teacher's space in its first principal directions, as the index's first pass
        # reads it: the student learns those coordinates, and a search over a third of the
        # dimensions is a third of the work.
        basis = principal_directions(teacher_vectors, args.dims)
        target = ProjectedTeacher(teacher, basis)
        target_vectors = unit(teacher_vectors @ basis)
    result = distill_encoder(texts, target, student_config, distill, teacher_vectors=target_vectors)
    student = result.encoder
    student_config["output_dim"] = student.dim  # recorded as the student has it
    # The rows of n-grams only the augmented copies reach are zeroed, as the model shipped
    # before kept only its members' rows: stored int8 a row, every row of the 160,000 texts
    # made 68 MB, the members' and the titles' a fraction of it.
    student.after_training([*members, *stream])
    print(f"distilled: {result.steps} steps in {result.seconds:.0f} s, {result.metrics}")
    # What it adds to the repository, saved as --write saves it; measured as it loads from
    # there (int8 rows), as the model shipped before is, not as it left training.
    with tempfile.TemporaryDirectory() as folder:
        student.save(Path(folder))
        saved_bytes = sum(p.stat().st_size for p in Path(folder).iterdir())
        stored = load_encoder(Path(folder))
    print(f"saved, it takes {saved_bytes / 1e6:.1f} MB")

    # Measured by the embedding alone, against the model shipped before and the teacher.
    held, gone = clean_held_out(onet)
    sets = {
        "onet_dev_unseen": (onet.members, list(zip(*onet.dev, strict=True))),
        "onet_clean_held_out": (without(onet.members, gone), list(zip(*held, strict=True))),
    }
    before = load_encoder(SHIPPED)
    rows: dict = {}
    for key, (searched, (queries, gold)) in sets.items():
        measure = Measure(searched, len(onet.codes))
        gold = np.array(gold)
        found = {}
        for name, encoder in (("shipped_before", before), ("teacher", teacher),
                              ("student", stored)):  # fmt: skip
            vectors = encoder.encode(measure.texts), encoder.encode(list(queries))
            found[name] = metrics(measure.rank(*vectors), gold)
            if name == "teacher" and args.dims:
                projected = [unit(np.asarray(v, dtype=np.float32) @ basis) for v in vectors]
                found["teacher_projected"] = metrics(measure.rank(*projected), gold)
        rows[key] = {name: row for name, (row, _) in found.items()}
        rows[key]["student_against_shipped_before"] = paired(
            found["student"][1], found["shipped_before"][1]
        )
        rows[key]["student_against_teacher"] = paired(found["student"][1], found["teacher"][1])
        print(f"{key}: " + ", ".join(f"{n} {r['acc@1']:.3f}" for n, (r, _) in found.items()))
        for name in ("student_against_shipped_before", "student_against_teacher"):
            versus = rows[key][name]
            print(f"  {name}: {versus['difference']:+.3f} {versus['ci95']}")

    suite = build_test_suite(onet.members)
    matcher = EncoderMatcher(stored, members, [g for g, _ in onet.members])
    suite_metrics = evaluate(matcher, suite)
    report = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "texts": len(texts),
        "teacher_encode_seconds": round(encode_seconds, 1),
        "distill_seconds": round(result.seconds, 1),
        "steps": result.steps,
        "teacher_cosine": result.metrics["teacher_cosine"],
        "student": {"encoder": student_config, "saved_bytes": saved_bytes},
        "rows": rows,
        "suite": suite_metrics,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"frozen suite: {suite_metrics['mean_accuracy']:.3f}; wrote {args.out}")
    if not args.write:
        return
    staging = Path(tempfile.mkdtemp(prefix=".onet-", dir=SHIPPED.parent))
    try:
        student.save(staging)
        spec = {
            **STUDENT_SPEC,
            "encoder": student_config,
            "distill": {
                **STUDENT_SPEC["distill"],
                **{k: v for k, v in DISTILL.items() if k != "max_minutes"},
                "max_steps": args.steps,
                "teacher_version": f"title tower {card['layers_sha256'][:12]}",
            },
        }
        info = {
            "taxonomy": "onet",
            "version": "onet/v1",
            "command": COMMAND,
            "commit": git_commit(),
            "spec": spec,
            "metrics": {
                "distilled_texts": float(len(texts)),
                "steps": float(result.steps),
                "teacher_cosine": result.metrics["teacher_cosine"],
                "train_seconds": round(result.seconds, 1),
                "suite": suite_metrics,
            },
            # Not in the spec, which the product's own builds read: a build from it distils
            # from the live model as it is, not from the tower in these directions.
            "teacher_directions": args.dims,
            "data_sha256": hashlib.sha256("\n".join(texts).encode()).hexdigest(),
            "trained_on_members": len(members),
        }
        (staging / "shipped.json").write_text(json.dumps(info, indent=2, sort_keys=True))
        staging.chmod(0o755)  # mkdtemp's 0700 would keep whoever serves the checkout out
        for path in staging.iterdir():
            fsync_path(path)
        fsync_path(staging)
        old = SHIPPED.with_name(".onet-old")
        shutil.rmtree(old, ignore_errors=True)
        SHIPPED.replace(old)
        staging.replace(SHIPPED)
        fsync_path(SHIPPED.parent)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        old = SHIPPED.with_name(".onet-old")
        if not SHIPPED.exists() and old.exists():
            old.replace(SHIPPED)  # stopped between the two renames: the shipped model stays
        raise
    size = sum(p.stat().st_size for p in SHIPPED.iterdir())
    print(f"wrote {SHIPPED} ({size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
