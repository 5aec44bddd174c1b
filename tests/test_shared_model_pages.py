"""Two processes that load the same model and index share their pages: each big array is a
mapping of one file, resident once in the page cache, whichever process loaded it first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from models_app.siamese.artifacts import atomic_directory
from models_app.siamese.encoders import encoder_class, parse_config
from models_app.siamese.index import MemberIndex
from models_app.siamese.search import MemberSearch, SearchConfig

ROOT = Path(__file__).resolve().parent.parent
# Loads the model and index as serving does, reads every page of them, says so, and on a line
# from its parent reports how much of each mapped file it shares with another process.
LOADER = """
import json, sys
from pathlib import Path
from models_app.siamese.encoders import load_encoder
from models_app.siamese.index import MemberIndex
from models_app.siamese.search import MemberSearch, SearchConfig

model, index_folder = Path(sys.argv[1]), Path(sys.argv[2])
texts = json.loads(Path(sys.argv[3]).read_text())
encoder = load_encoder(model, mapped=True)
index = MemberIndex.load(index_folder, mapped=True)
search = MemberSearch(index, texts, SearchConfig(lexical_weight=0.3), tables=index_folder)
touched = [float(tensor.float().sum()) for tensor in encoder.state_dict().values()]
touched += [float(index.vectors().sum()), float(search.exact.rough.sum())]
print("ready", flush=True)
sys.stdin.readline()
shared, current = {}, None
for line in Path("/proc/self/smaps").read_text().splitlines():
    fields = line.split()
    if "-" in fields[0] and len(fields) >= 6:
        current = fields[5]
    elif fields[0] in ("Shared_Clean:", "Rss:") and current:
        shared.setdefault(current, {}).setdefault(fields[0][:-1], 0)
        shared[current][fields[0][:-1]] += int(fields[1])
print(json.dumps(shared), flush=True)
"""


def test_two_processes_share_the_pages_of_one_model_and_index(tmp_path):
    torch.manual_seed(0)
    texts = [f"title {n} of {n % 97}" for n in range(20_000)]
    config = parse_config({"kind": "ngram_bag", "buckets": 2**16, "embedding_dim": 64,
                           "output_dim": 64})  # fmt: skip
    encoder = encoder_class("ngram_bag").create(texts, config)  # a 16 MiB n-gram table
    with atomic_directory(tmp_path / "model") as folder:
        encoder.save(folder)
    vectors = np.random.default_rng(0).standard_normal((len(texts), 64)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = MemberIndex.build(vectors, np.arange(len(texts), dtype=np.int64))
    with atomic_directory(tmp_path / "index") as folder:
        index.save(folder)
        MemberSearch(index, texts, SearchConfig(lexical_weight=0.3), tables=folder)

    (tmp_path / "texts.json").write_text(json.dumps(texts))
    command = [sys.executable, "-c", LOADER, str(tmp_path / "model"), str(tmp_path / "index"),
               str(tmp_path / "texts.json")]  # fmt: skip
    first, second = (
        subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
        for _ in range(2)
    )  # fmt: skip
    try:
        assert first.stdout.readline().strip() == "ready"
        assert second.stdout.readline().strip() == "ready"
        second.stdin.write("report\n")
        second.stdin.flush()
        seen = json.loads(second.stdout.readline())
    finally:
        for process in (first, second):
            process.kill()
            process.wait()

    for path in [
        tmp_path / "model" / "mapped-weights" / "bag.weight.npy",  # 16 MiB
        tmp_path / "index" / "members.faiss",  # 5 MiB
        tmp_path / "index" / "exact-cosines" / "rough.npy",  # 5 MiB
    ]:
        assert str(path) in seen, f"{path} is not mapped"
        # Every page read is also in the other process: shared, not copied (KiB; the header's
        # page may not have been read).
        size_kib = path.stat().st_size // 1024
        assert seen[str(path)]["Shared_Clean"] >= size_kib - 8, (path, seen[str(path)])
    trigram_tables = [name for name in seen if "/trigrams-" in name]
    assert trigram_tables, "the trigram tables are not mapped"
