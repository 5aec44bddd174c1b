"""What normalizing reads is kept per process behind the taxonomy's revision: every committed
write of members, groups or verdicts moves it, and the next request reads afresh."""

from __future__ import annotations

import itertools
import threading

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from annotations.models import Group, Member, TaxonomyRevision
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.undo import judgement_undo
from annotations.services.review.verdicts import judgement_create
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.serving.reads import taxonomy_revision
from models_app.siamese.text import comparison_key

pytestmark = pytest.mark.django_db(transaction=True)


def revision(taxonomy) -> int:
    found = TaxonomyRevision.objects.filter(taxonomy_id=taxonomy.id).first()
    return found.revision if found else 0


def in_another_connection(work) -> None:
    """Run ``work`` in a thread of its own: its own connection and transactions, committed."""
    failures = []

    def run():
        try:
            work()
        except Exception as exc:  # pragma: no cover - reported below
            failures.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert not failures, failures


def test_every_committed_write_moves_the_revision(tiny_taxonomy, curator):
    seen = [revision(tiny_taxonomy)]
    group = Group.objects.filter(taxonomy=tiny_taxonomy).first()
    member = Member.objects.create(taxonomy=tiny_taxonomy, group=group, text="Ice Road Trucker",
                                   normalized_text=comparison_key("Ice Road Trucker"))  # fmt: skip
    seen.append(revision(tiny_taxonomy))
    Group.objects.filter(id=group.id).update(name="Renamed")
    seen.append(revision(tiny_taxonomy))
    member.delete()
    seen.append(revision(tiny_taxonomy))
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Wizard"], source="api")
    judgement = judgement_create(review_item=item, user=curator, verdict="false_match")
    seen.append(revision(tiny_taxonomy))
    judgement_undo(judgement=judgement, user=curator)
    seen.append(revision(tiny_taxonomy))
    assert all(after > before for before, after in itertools.pairwise(seen))


def test_sending_inputs_to_the_queue_leaves_it(tiny_taxonomy):
    # Every input sent writes a review item and its prediction: none of it is read by
    # normalizing, and the kept rows stay good.
    before = revision(tiny_taxonomy)
    inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Wizard", "Night Nurse"], source="api")
    assert revision(tiny_taxonomy) == before


def test_a_transaction_bumps_it_once_at_commit(tiny_taxonomy):
    before = revision(tiny_taxonomy)
    group = Group.objects.filter(taxonomy=tiny_taxonomy).first()
    with transaction.atomic():
        for number in range(20):
            Member.objects.create(taxonomy=tiny_taxonomy, group=group, text=f"Clerk {number}",
                                  normalized_text=f"clerk {number}")  # fmt: skip
    assert revision(tiny_taxonomy) == before + 1


def test_a_verdict_committed_elsewhere_is_seen_by_the_next_request(tiny_taxonomy, curator):
    first = rank_taxonomy_groups(tiny_taxonomy, ["Java Wizard"], k=3)[0]
    assert first.source == "model"
    target = Group.objects.get(taxonomy=tiny_taxonomy, code="35-3023")
    assert first.groups[0].group_id != target.id

    def reassign():
        (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Wizard"], source="api")
        judgement_create(review_item=item, user=curator, verdict="reassign", group=target)

    in_another_connection(reassign)

    after = rank_taxonomy_groups(tiny_taxonomy, ["Java Wizard"], k=3)[0]
    assert after.source == "curator" and after.groups[0].group_id == target.id


def test_a_rejected_group_committed_elsewhere_is_never_offered_again(tiny_taxonomy, curator):
    top = rank_taxonomy_groups(tiny_taxonomy, ["Charge Nurse Lead"], k=3)[0].groups[0].group_id

    def reject():
        (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Charge Nurse Lead"], source="api")
        judgement_create(review_item=item, user=curator, verdict="false_match")

    in_another_connection(reject)

    groups = rank_taxonomy_groups(tiny_taxonomy, ["Charge Nurse Lead"], k=3)[0].groups
    assert top not in [group.group_id for group in groups]


def test_at_an_unchanged_revision_a_request_reads_one_row(tiny_taxonomy):
    rank_taxonomy_groups(tiny_taxonomy, ["icu nurse", "java dev"], k=3)
    with CaptureQueriesContext(connection) as queries:
        rank_taxonomy_groups(tiny_taxonomy, ["icu nurse", "java dev"], k=3)
    # The live pointer with the revision: no members, verdicts or groups.
    assert len(queries) == 1, [query["sql"] for query in queries]


def test_inside_a_transaction_nothing_is_kept(tiny_taxonomy):
    assert taxonomy_revision(tiny_taxonomy.id) is not None
    with transaction.atomic():
        assert taxonomy_revision(tiny_taxonomy.id) is None
