"""The frozen suite's fourth set, the curators' held-out verdicts, was stored as "annotations"
(the paper's name, and the app's): its metrics keys become "verdicts/…"."""

from django.db import migrations

OLD, NEW = "annotations/", "verdicts/"


def rename_keys(apps, old: str, new: str) -> None:
    ModelVersion = apps.get_model("models_app", "ModelVersion")
    for version in ModelVersion.objects.filter(metrics__has_key="suite").iterator():
        suite = version.metrics.get("suite")
        if not isinstance(suite, dict) or not any(key.startswith(old) for key in suite):
            continue
        version.metrics["suite"] = {
            (new + key.removeprefix(old) if key.startswith(old) else key): value
            for key, value in suite.items()
        }
        version.save(update_fields=["metrics"])


def forwards(apps, schema_editor):
    rename_keys(apps, OLD, NEW)


def backwards(apps, schema_editor):
    rename_keys(apps, NEW, OLD)


class Migration(migrations.Migration):
    dependencies = [("models_app", "0008_ranker_version")]

    operations = [migrations.RunPython(forwards, backwards)]
