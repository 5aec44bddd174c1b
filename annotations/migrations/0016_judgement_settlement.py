from datetime import timedelta

from django.db import migrations, models


def mark_earlier_settlements(apps, schema_editor):
    """Settlements made before the mark existed, read back from their audit events: the verdicts
    each undid, and the admin's own verdict it recorded in the same transaction (by the event's
    admin, on that item, without a key, in the seconds before the event)."""
    AuditEvent = apps.get_model("annotations", "AuditEvent")
    Judgement = apps.get_model("annotations", "Judgement")
    events = AuditEvent.objects.filter(action="review_item.resolve_conflict").order_by("id")
    for event in events.iterator():
        undone = (event.before or {}).get("undone_judgements") or []
        Judgement.objects.filter(id__in=undone, undone_at__isnull=False).update(
            settlement="overruled"
        )
        if not event.object_id.isdigit() or event.actor_id is None:
            continue
        Judgement.objects.filter(
            review_item_id=int(event.object_id),
            user_id=event.actor_id,
            idempotency_key="",
            undone_at__isnull=True,
            created_at__lte=event.created_at,
            created_at__gte=event.created_at - timedelta(seconds=10),
        ).exclude(id__in=undone).update(settlement="settled")


class Migration(migrations.Migration):
    dependencies = [
        ("annotations", "0015_review_item_bulk_job"),
    ]

    operations = [
        migrations.AddField(
            model_name="judgement",
            name="settlement",
            field=models.CharField(
                blank=True,
                choices=[
                    ("overruled", "Overruled by an admin's settlement"),
                    ("settled", "An admin's settlement"),
                ],
                max_length=16,
            ),
        ),
        migrations.RunPython(mark_earlier_settlements, migrations.RunPython.noop),
    ]
