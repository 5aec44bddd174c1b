"""What the corrigibility benchmark measures after each round (bench/corrigibility_onet.py): served
top-1, the model by itself (a judged text's own curator member left out, or none at all, or
the embedding alone), and the frozen suite as the gate scores it.

Measured per round (round 0: the starting model, before any verdict, over the whole pool):
- *corrected, by itself*: the share of the corrected inputs whose top group is the gold one
  when the curator's own member for that exact text is left out. Served normalize puts a
  judged text in its curator's group whatever the model says, so the served answer cannot tell
  whether the model learnt anything. The benchmark searches with the live model's encoder and
  search config (``MemberSearch``, embedding plus trigram term, exact index) over every member
  but the query's own curator member (curator members of *other* corrected texts count: they
  are the member index's part of the fix). For this round's inputs, for all corrected so far,
  for the reassigned ones only (the inputs the model had wrong), and split by the fifth of
  verdicts the gate holds out of a fine-tune's first phase (learnt in its catch-up phase, see
  ``models_app.training.retraining.finetune_execute``) and the rest. Twice more (``ModelAlone``):
  with
  no curator member at all (*weights alone*, what the gate's "verdicts" share measures) and
  with the trigram term off too
  (*embedding alone*: what the fine-tuned embedding learnt).
- *variants*: a new input around each corrected title (fresh job-ad words), served: does a
  verdict reach similar inputs? Also over every pool title's variant, one fixed set of inputs
  nobody judges whose titles the curators correct round by round (a title comes back with new
  words around it, as job-ad titles do), served and by the weights alone: does each round make
  that later traffic better, by the member index and by the model?
- *never-seen*: top-1 accuracy on the never-seen set, served as the API serves it
  (``rank_taxonomy_groups``), by the weights alone (the taxonomy's members, no curator member) and
  by the embedding alone (no trigram term either). Its titles are ones nobody corrects.
- *unjudged inputs of every held-out title*: the never-seen set and the fixed variants of every
  pool title together, one input nobody judged for each held-out title, served and by the
  weights alone. This is the target's "never-seen inputs": held-out realistic inputs that no
  curator judged and no fine-tune trained on, over the same titles the curators work through
  (two thirds of them corrected by round 4, a sixth more each round), as later traffic would
  bring them. The never-seen set alone asks whether corrections carry over to titles nobody
  ever corrects (bench/never_seen_hindsight.py: about a point at most, here).
- *arrival*: top-1 accuracy of the round's inputs as predicted when they arrived (the model
  before the round's verdicts): more never-seen inputs, fresh each round.
- *frozen suite*: as the gate scores it (Typos, Composition, Extra Words from the taxonomy's
  own titles, seed 0, served search over the taxonomy's members), beside
  ``model_version_evaluate`` of the live version (embedding alone; its Annotations come from
  the product's held-out fifth of verdicts, which grows each round), plus the run's gate report.
- *last verdict → promoted*: wall seconds from the last verdict's response to the fine-tune run
  reaching PROMOTED (or REJECTED: reported as it is), split into the verdicts' queued runs and
  the fine-tune run itself. The target is read on promoted runs of one round's new verdicts; a
  run on a backlog (after a rejected or ``--skip-retrain`` round) trains longer and is listed
  beside it.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corrigibility_data import Example
from bench.corrigibility_report import FROZEN
from models_app.siamese.text import comparison_key

# --- measures --------------------------------------------------------------------------------


def live_version(taxonomy):
    from models_app.models import Deployment

    return (
        Deployment.objects.select_related("index_build__model_version__taxonomy")
        .get(taxonomy=taxonomy)
        .index_build.model_version
    )


def served_top1(taxonomy, examples: list[Example], gold: dict[str, int]) -> list[bool]:
    """Whether the served top group (``rank_taxonomy_groups``, as the API answers) is gold."""
    from models_app.serving.normalize import rank_taxonomy_groups

    hits = []
    for start in range(0, len(examples), 500):
        chunk = examples[start : start + 500]
        for example, result in zip(
            chunk, rank_taxonomy_groups(taxonomy, [e.text for e in chunk], k=1), strict=True
        ):
            hits.append(bool(result.groups) and result.groups[0].group_id == gold[example.code])
    return hits


class ModelAlone:
    """The live model's top group for inputs, without the served path's shortcut for judged
    texts (normalize puts a judged text in its curator's group whatever the model says).

    - ``beside_others``: the live engine's encoder and search config (embedding plus trigram
      term) over an exact index of the taxonomy's members, with the curator members scored the
      way the live engine scores members added since its build (``MemberSearch``'s extras),
      each query with every curator member but those whose normalized text is its own. A query
      is answered as if its own verdict had never put it in the index, while the fine-tuned
      weights and the other verdicts' members count;
    - ``weights_alone``: the same search over the taxonomy's members only, no curator member
      at all (what the gate's "verdicts" share measures);
    - ``embedding_alone``: as ``weights_alone`` with the trigram term off (lexical weight 0):
      what the fine-tuned embedding has learnt, by itself.
    """

    DEPTH = 8  # the top group is the best member's: a few hits are plenty

    def __init__(self, taxonomy, gold: dict[str, int]) -> None:
        import numpy as np

        from annotations.models import Member
        from models_app.serving.engines import live_engine
        from models_app.siamese.index import MemberIndex
        from models_app.siamese.search import MemberSearch, SearchConfig

        engine = live_engine(taxonomy)
        self.encoder, self.gold = engine.encoder, gold
        rows = list(
            Member.objects.filter(taxonomy=taxonomy)
            .order_by("id")
            .values_list("id", "group_id", "text", "normalized_text", "source")
        )
        self.group_of = {member_id: group_id for member_id, group_id, *_ in rows}
        curator = Member.Source.CURATOR
        base = [(m, text) for m, _, text, _, source in rows if source != curator]
        extra = [(m, text, key) for m, _, text, key, source in rows if source == curator]
        base_texts = [t for _, t in base]
        index = MemberIndex.build(
            self.encoder.encode(base_texts), np.array([m for m, _ in base], np.int64), kind="flat"
        )
        self.search = MemberSearch(index, base_texts, engine.search.config)
        self.embedding = MemberSearch(index, base_texts, SearchConfig(lexical_weight=0.0))
        self.extra_ids = np.array([m for m, _, _ in extra], dtype=np.int64)
        self.extra_texts = [t for _, t, _ in extra]
        self.extra_keys = np.array([key for _, _, key in extra], dtype=object)
        self.extra_vectors = (
            self.encoder.encode(self.extra_texts)
            if extra
            else np.zeros((0, self.encoder.dim), np.float32)
        )

    def _right(self, found, example: Example) -> bool:
        from models_app.siamese.group_hits import rank_groups

        ranked = rank_groups(found, self.group_of, k=1)
        return bool(ranked) and ranked[0].group_id == self.gold[example.code]

    def weights_alone(self, examples: list[Example]) -> list[bool]:
        return self._batch(self.search, examples)

    def embedding_alone(self, examples: list[Example]) -> list[bool]:
        return self._batch(self.embedding, examples)

    def _batch(self, search, examples: list[Example]) -> list[bool]:
        texts = [e.text for e in examples]
        found = search.search(texts, self.encoder.encode(texts), self.DEPTH)
        return [self._right(hits, e) for hits, e in zip(found, examples, strict=True)]

    def beside_others(self, examples: list[Example]) -> list[bool]:
        vectors = self.encoder.encode([e.text for e in examples])
        hits = []
        for example, vector in zip(examples, vectors, strict=True):
            keep = self.extra_keys != comparison_key(example.text)
            found = self.search.search(
                [example.text],
                vector[None, :],
                self.DEPTH,
                extra_ids=self.extra_ids[keep],
                extra_texts=[t for t, k in zip(self.extra_texts, keep, strict=True) if k],
                extra_vectors=self.extra_vectors[keep],
            )[0]
            hits.append(self._right(found, example))
        return hits


def share(hits: list[bool]) -> float | None:
    return sum(hits) / len(hits) if hits else None


def frozen_suite(taxonomy, version) -> dict[str, float]:
    """The frozen suite as the gate scores it, and the version's own evaluation beside it.

    The gate's way (``models_app.training.retraining``): the paper's tests built from the
    taxonomy's own
    strings (seed 0, ``SIAMWEB_GATE_SUITE_SIZE`` cases a set), answered by the product's search
    (embedding plus trigram term) over the taxonomy's members. ``model_version_evaluate``: the
    embedding alone over every member, with Annotations from the held-out fifth of verdicts.
    """
    from django.conf import settings

    from annotations.models import Member
    from models_app.serving.engines import encoder_for
    from models_app.siamese.evaluation import build_test_suite, evaluate
    from models_app.siamese.hybrid_matcher import HybridMatcher
    from models_app.siamese.specs import parse_search_config
    from models_app.training.services.builds import model_version_evaluate

    members = list(
        Member.objects.filter(taxonomy=taxonomy, source=Member.Source.TAXONOMY)
        .order_by("id")
        .values_list("group_id", "text")
    )
    suite = build_test_suite(members, seed=0, size=settings.SIAMWEB_GATE_SUITE_SIZE)
    matcher = HybridMatcher(
        encoder_for(version),
        [text for _, text in members],
        [group for group, _ in members],
        config=parse_search_config(version.config),
    )
    served = evaluate(matcher, suite)
    row = {name: served[f"{name}/accuracy"] for name in FROZEN}
    row["mrr"] = sum(served[f"{name}/mrr"] for name in FROZEN) / len(FROZEN)
    own = model_version_evaluate(model_version=version)
    row["embedding_only"] = {name: own[f"{name}/accuracy"] for name in FROZEN}
    row["annotations"] = own.get("verdicts/accuracy")
    row["annotations_n"] = int(own.get("verdicts/n", 0))
    return row
