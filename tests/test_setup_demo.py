from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

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
    admin = authenticate(username="admin", password="admin-demo")
    assert admin is not None and admin.is_superuser
    curator = authenticate(username="curator", password="curator-demo")
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
    assert authenticate(username="cora", password="s3cret-words") is not None
