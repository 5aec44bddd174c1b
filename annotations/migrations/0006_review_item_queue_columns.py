import django.db.models.deletion
from django.db import migrations, models


def copy_queue_columns(apps, schema_editor):
    """Fill the queue's copied columns on items created before they existed."""
    ReviewItem = apps.get_model("annotations", "ReviewItem")
    for item in ReviewItem.objects.select_related("input", "prediction").iterator():
        item.taxonomy_id = item.input.taxonomy_id
        item.top_group_id = item.prediction.top_group_id
        item.top_score = item.prediction.top_score
        item.save(update_fields=["taxonomy", "top_group", "top_score"])


class Migration(migrations.Migration):
    # Separate from 0005: PostgreSQL refuses to alter a table whose rows this transaction
    # updated while deferred foreign-key checks are pending.
    dependencies = [("annotations", "0005_review_leases_audit_undo")]

    operations = [
        migrations.RunPython(copy_queue_columns, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="reviewitem",
            name="taxonomy",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="review_items",
                to="annotations.taxonomy",
            ),
        ),
    ]
