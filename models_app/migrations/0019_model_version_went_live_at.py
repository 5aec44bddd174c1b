from django.db import migrations, models


def live_ones_went_live(apps, schema_editor):
    """What is live now went live at some point: its time is not known, the build's is near."""
    Deployment = apps.get_model("models_app", "Deployment")
    ModelVersion = apps.get_model("models_app", "ModelVersion")
    for deployment in Deployment.objects.select_related("index_build"):
        ModelVersion.objects.filter(id=deployment.index_build.model_version_id).update(
            went_live_at=deployment.index_build.created_at
        )


class Migration(migrations.Migration):
    dependencies = [
        ("models_app", "0018_bulk_job_ranker_pinned"),
    ]

    operations = [
        migrations.AddField(
            model_name="modelversion",
            name="went_live_at",
            field=models.DateTimeField(
                blank=True, help_text="When an index build of it first went live", null=True
            ),
        ),
        migrations.RunPython(live_ones_went_live, migrations.RunPython.noop),
    ]
