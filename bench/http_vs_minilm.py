"""Normalize over HTTP against all-MiniLM-L6-v2 in-process, in one run (issue #24's table).

Siamweb: gunicorn as deployed (``-c deploy/gunicorn.conf.py``, 2 workers x 2 threads) on
a scratch PostgreSQL database holding O*NET with the shipped model live; one client with
keep-alive sends real vacancy titles (JobBERT) one a request, then 500 a request; then two
such clients send the 500-text requests at once, as a bulk client with a connection per core
would. MiniLM: the same titles encoded in this process (PyTorch's threads: one a core) and
searched exactly (FAISS inner product) over the same 53,767 O*NET titles, one at a time and 500
at a time. Also the engine's own batch encoding.

    .venv/bin/python bench/http_vs_minilm.py [--single 300] [--batches 8] [--model FOLDER]

``--model``: serve another saved O*NET model than the shipped one (e.g. a distilled student);
its results go to http_vs_minilm_<folder name>.json.

Prints a table and writes bench/results/http_vs_minilm.json; the scratch database is dropped.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _pg
from bench._servers import NormalizeClient, free_port, start_gunicorn, stop_gunicorn

_pg.scratch_database(broker="memory://")

import faiss  # noqa: E402
from django.db import connections  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

from annotations.models import Member  # noqa: E402
from annotations.services.accounts import user_ensure  # noqa: E402
from bench.jobbert_data import SHARED_DATA  # noqa: E402
from models_app.siamese.encoders import load_encoder  # noqa: E402
from models_app.siamese.towers import (  # noqa: E402
    WHEEL_BASE,
    TransformerConfig,
    TransformerEncoder,
)

PATH = "/api/v1/taxonomies/onet/normalize"
SHIPPED = _pg.ROOT / "data" / "models" / "onet"
BATCH = 500


def vacancy_titles(count: int) -> list[str]:
    with (SHARED_DATA / "jobbert" / "validation_titles.csv").open(encoding="utf-8") as handle:
        titles = sorted({row["vacancyTitle"] for row in csv.DictReader(handle)})
    return random.Random(24).sample(titles, count)


def singles_and_batches(single: int, batches: int) -> tuple[list[str], list[list[str]]]:
    """``single`` titles to send one at a time, then ``batches`` requests of ``BATCH`` others."""
    titles = vacancy_titles(single + BATCH * batches)
    rest = titles[single:]
    return titles[:single], [rest[i * BATCH : (i + 1) * BATCH] for i in range(batches)]


def timed_calls(call, inputs) -> list[float]:
    ms = []
    for item in inputs:
        started = time.perf_counter()
        call(item)
        ms.append((time.perf_counter() - started) * 1000)
    return ms


def siamweb_rows(token: str, singles: list[str], batches: list[list[str]]) -> dict:
    port = free_port()
    server = start_gunicorn(
        port=port, workers=2, threads=2, torch_threads=1, config="deploy/gunicorn.conf.py"
    )
    try:
        client = NormalizeClient(port, token, PATH)
        timed_calls(client.normalize, [[text] for text in singles[:30]])  # warm both workers
        single = timed_calls(client.normalize, [[text] for text in singles])
        batch = timed_calls(client.normalize, batches)
        two_clients = texts_per_s_at_once(port, token, batches, clients=2)
    finally:
        stop_gunicorn(server)
    return {
        "single": _pg.summary(single),
        "batch_texts_per_s": round(BATCH * len(batch) / sum(batch) * 1000, 1),
        "batch_two_clients_texts_per_s": round(two_clients, 1),
    }


def texts_per_s_at_once(port: int, token: str, batches: list[list[str]], *, clients: int) -> float:
    """Texts a second when ``clients`` keep-alive clients send their shares of the batches at
    the same time (gunicorn hands each connection to whichever worker accepts it)."""
    shares = [batches[first::clients] for first in range(clients)]
    senders = [NormalizeClient(port, token, PATH) for _ in shares]
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(lambda sender, share: [sender.normalize(b) for b in share], senders, shares))
    return BATCH * len(batches) / (time.perf_counter() - started)


def minilm_rows(members: list[str], singles: list[str], batches: list[list[str]]) -> dict:
    encoder = TransformerEncoder.create([], TransformerConfig(kind="transformer", base=WHEEL_BASE))
    started = time.perf_counter()
    index = faiss.IndexFlatIP(encoder.dim)
    index.add(encoder.encode(members))
    print(f"MiniLM: {len(members):,} members encoded in {time.perf_counter() - started:.0f} s")

    def search(texts: list[str]) -> None:
        index.search(encoder.encode(texts), 40)

    timed_calls(search, [[text] for text in singles[:10]])
    single = timed_calls(search, [[text] for text in singles])
    batch = timed_calls(search, batches)
    return {
        "single": _pg.summary(single),
        "batch_texts_per_s": round(BATCH * len(batch) / sum(batch) * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--single", type=int, default=300, help="one-text requests")
    parser.add_argument("--batches", type=int, default=8, help=f"{BATCH}-text requests")
    parser.add_argument("--model", type=Path, default=SHIPPED, help="a saved model's folder")
    args = parser.parse_args()
    taxonomy = _pg.onet_live(args.model)
    members = list(Member.objects.filter(taxonomy=taxonomy).values_list("text", flat=True))
    user, _ = user_ensure(username="bench-http", password="bench-pass-123", admin=False)
    token = Token.objects.create(user=user).key
    machine = _pg.machine()
    connections.close_all()
    singles, batches = singles_and_batches(args.single, args.batches)

    served = load_encoder(args.model)
    started = time.perf_counter()
    served.encode(members[:20000])
    engine_rate = 20000 / (time.perf_counter() - started)

    siamweb = siamweb_rows(token, singles, batches)
    minilm = minilm_rows(members, singles, batches)
    rows = [
        ("one text per request, p50 ms", siamweb["single"]["p50_ms"], minilm["single"]["p50_ms"]),
        ("one text per request, p99 ms", siamweb["single"]["p99_ms"], minilm["single"]["p99_ms"]),
        (f"{BATCH} texts per request, texts/s", siamweb["batch_texts_per_s"],
         minilm["batch_texts_per_s"]),
        (f"{BATCH} a request, 2 clients, texts/s", siamweb["batch_two_clients_texts_per_s"],
         minilm["batch_texts_per_s"]),
    ]  # fmt: skip
    print(f"\nmachine: {machine}; load average {_pg.load_average()}")
    print(f"{'measure':36}{'Siamweb over HTTP':>20}{'MiniLM in-process':>20}")
    for name, ours, theirs in rows:
        print(f"{name:36}{ours:>20,.1f}{theirs:>20,.1f}")
    print(f"the engine's batch encoding: {engine_rate:,.0f} strings/s")
    _pg.write_results(
        "http_vs_minilm" if args.model == SHIPPED else f"http_vs_minilm_{args.model.name}",
        {
            "machine": machine,
            "server": "gunicorn 23, -c deploy/gunicorn.conf.py, 2 workers x 2 threads, "
            "one keep-alive client on the same machine (then two for batch_two_clients)",
            "taxonomy": f"O*NET, {len(members):,} members",
            "model": str(args.model.relative_to(_pg.ROOT))
            if args.model.is_relative_to(_pg.ROOT)
            else str(args.model),
            "inputs": "JobBERT vacancy titles (real), sampled with seed 24",
            "siamweb_http": siamweb,
            "minilm_in_process": minilm,
            "engine_encode_per_s": round(engine_rate, 1),
            "load_average_after": _pg.load_average(),
        },
    )


if __name__ == "__main__":
    main()
