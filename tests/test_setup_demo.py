from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import RequestFactory

from annotations.models import Group, Input, Member, ReviewItem
from models_app.models import IndexBuild, ModelVersion

pytestmark = pytest.mark.django_db

OCCUPATIONS = (
    "O*NET-SOC Code\tTitle\tDescription\n"
    "15-1252.00\tSoftware Developers\tBuild software\n"
    "29-1141.00\tRegistered Nurses\tCare for patients\n"
)
ALTERNATES = (
    "O*NET-SOC Code\tAlternate Title\tShort Title\tSource(s)\n"
    "15-1252.00\tJava Developer\tn/a\t08\n"
    "15-1252.00\tApplication Developer\tn/a\t08\n"
    "29-1141.00\tICU Nurse\tn/a\t08\n"
    "29-1141.00\tStaff Nurse\tn/a\t08\n"
)


def sign_in(username: str, password: str):
    """The user these credentials sign in, as the login page asks (with its request: the login
    lockout's backend counts failures per request's address)."""
    request = RequestFactory().post("/accounts/login/")
    return authenticate(request, username=username, password=password)


@pytest.fixture
def data_dir(tmp_path):
    onet = tmp_path / "data" / "onet"
    onet.mkdir(parents=True)
    (onet / "Occupation Data.txt").write_text(OCCUPATIONS)
    (onet / "Alternate Titles.txt").write_text(ALTERNATES)
    (tmp_path / "data" / "demo_inputs.txt").write_text("Sr. Java Dev (m/f/d)\nnight nurse\n\n")
    config = tmp_path / "model.json"
    config.write_text(json.dumps({"encoder": {"dim": 8, "min_df": 1}}))
    return tmp_path / "data", config


def setup(data_dir) -> str:
    data, config = data_dir
    out = io.StringIO()
    call_command("setup_demo", "--data-dir", str(data), "--config", str(config), stdout=out)
    return out.getvalue()


def state():
    return (
        Group.objects.count(),
        Member.objects.count(),
        ModelVersion.objects.count(),
        IndexBuild.objects.count(),
        Input.objects.count(),
        ReviewItem.objects.count(),
    )


def test_it_sets_up_taxonomy_model_users_and_queue(data_dir, monkeypatch):
    monkeypatch.delenv("SIAMWEB_DEMO_ADMIN_PASSWORD", raising=False)
    out = setup(data_dir)
    assert state() == (2, 6, 1, 1, 2, 2)
    assert "curator: username 'curator', password 'curator-demo'" in out
    admin = sign_in("admin", "admin-demo")
    assert admin is not None and admin.is_superuser
    curator = sign_in("curator", "curator-demo")
    assert curator is not None and not curator.is_staff
    assert list(curator.groups.values_list("name", flat=True)) == ["curators"]
    item = ReviewItem.objects.get(input__text="Sr. Java Dev (m/f/d)")
    assert item.prediction.top_group.code == "15-1252.00"


def test_running_it_again_duplicates_and_rebuilds_nothing(data_dir):
    setup(data_dir)
    before = state()
    out = setup(data_dir)
    assert state() == before
    assert "unchanged since the last import" in out
    assert "live model and index are up to date" in out
    assert "password unchanged" in out


def test_credentials_can_come_from_the_environment(data_dir, monkeypatch):
    monkeypatch.setenv("SIAMWEB_DEMO_CURATOR_USER", "cora")
    monkeypatch.setenv("SIAMWEB_DEMO_CURATOR_PASSWORD", "s3cret-words")
    setup(data_dir)
    assert sign_in("cora", "s3cret-words") is not None


def test_a_shipped_model_is_used_instead_of_training(data_dir):
    from models_app.siamese.artifacts import atomic_directory
    from models_app.siamese.sampling import prepare_data
    from models_app.siamese.specs import TrainConfig
    from models_app.siamese.train import train_encoder

    data, _ = data_dir
    members = [
        (0, "Java Developer"),
        (0, "Application Developer"),
        (1, "ICU Nurse"),
        (1, "Staff Nurse"),
    ]
    config = TrainConfig(batch_size=4, max_steps=3, eval_every=3, validation_share=0.0)
    encoder = {"kind": "ngram_bag", "buckets": 1024, "embedding_dim": 8, "output_dim": 8}
    trained = train_encoder(prepare_data(members, config=config), encoder, config).encoder
    with atomic_directory(data / "models" / "onet") as folder:
        trained.save(folder)
        (folder / "shipped.json").write_text(
            json.dumps(
                {
                    "spec": {"encoder": encoder},
                    "metrics": {"suite": {"mean_accuracy": 0.5}},
                    "data_sha256": "abc",
                    "version": "onet/v1",
                }
            )
        )
    out = io.StringIO()
    call_command("setup_demo", "--data-dir", str(data), stdout=out)
    assert "onet: shipped model onet/v1 is live" in out.getvalue()
    version = ModelVersion.objects.get()
    assert (version.encoder_kind, version.data_sha256) == ("ngram_bag", "abc")
    assert version.metrics == {"suite": {"mean_accuracy": 0.5}}
    assert IndexBuild.objects.get().size == Member.objects.count() == 6
    assert ReviewItem.objects.count() == 2


def test_a_corrupt_shipped_model_stops_setup_with_a_clear_error(data_dir):
    data, _ = data_dir
    (data / "models" / "onet").mkdir(parents=True)
    (data / "models" / "onet" / "manifest.json").write_text("{not json")
    with pytest.raises(CommandError, match="unreadable"):
        call_command("setup_demo", "--data-dir", str(data), stdout=io.StringIO())
    assert not ModelVersion.objects.exists()


def test_the_bundled_demo_gives_batch_review_groups_with_many_inputs():
    """The demo's own queue lets a new user try batch review: several groups hold a grid's
    worth of pending inputs (it used to hold at most two a group)."""
    from annotations.selectors.queue import review_groups_pending
    from annotations.services.accounts import user_ensure

    call_command("setup_demo", stdout=io.StringIO())
    curator, _ = user_ensure(username="carla", password="carla-pass-123", admin=False)
    taxonomy = Group.objects.first().taxonomy
    pending = [row["pending"] for row in review_groups_pending(taxonomy=taxonomy, user=curator)]
    assert sum(count >= 6 for count in pending) >= 4
