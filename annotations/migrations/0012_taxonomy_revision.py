"""The taxonomy revision and the triggers that bump it (see ``TaxonomyRevision``)."""

from django.db import migrations, models

_REVISION = "annotations_taxonomyrevision"
_ITEM = "annotations_reviewitem"
_EVENTS = ("INSERT", "UPDATE", "DELETE")
# The writes that bump it, by table. A review item is written with every input sent and every
# move in the queue, none of which normalizing reads (its taxonomy and input never change):
# only its deletion, which deletes its verdicts, counts. A judgement names its taxonomy through
# its review item, the others directly.
_BUMPED_BY = {
    "annotations_member": _EVENTS,
    "annotations_group": _EVENTS,
    "annotations_reviewitem": ("DELETE",),
    "annotations_judgement": _EVENTS,
}


def _postgresql() -> list[str]:
    # Deferred to commit, once per taxonomy a transaction: a bulk import of 50,000 members
    # bumps the row once, and takes its lock last.
    function = """
CREATE OR REPLACE FUNCTION siamweb_revision_{name}() RETURNS trigger AS $$
DECLARE
    changed bigint;
    marker text;
BEGIN
    IF TG_OP = 'DELETE' THEN
        {from_old}
    ELSE
        {from_new}
    END IF;
    IF changed IS NULL THEN
        RETURN NULL;
    END IF;
    marker := 'siamweb.revision_' || changed;
    IF current_setting(marker, true) = txid_current()::text THEN
        RETURN NULL;
    END IF;
    PERFORM set_config(marker, txid_current()::text, true);
    INSERT INTO {revision} (taxonomy_id, revision) VALUES (changed, 1)
    ON CONFLICT (taxonomy_id) DO UPDATE SET revision = {revision}.revision + 1;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
"""
    through_item = "SELECT taxonomy_id INTO changed FROM {item} WHERE id = {row}.review_item_id;"
    statements = [
        function.format(name="direct", revision=_REVISION,
                        from_old="changed := OLD.taxonomy_id;",
                        from_new="changed := NEW.taxonomy_id;"),
        function.format(name="judgement", revision=_REVISION,
                        from_old=through_item.format(item=_ITEM, row="OLD"),
                        from_new=through_item.format(item=_ITEM, row="NEW")),
    ]  # fmt: skip
    for table, events in _BUMPED_BY.items():
        name = "judgement" if table == "annotations_judgement" else "direct"
        statements.append(
            f"CREATE CONSTRAINT TRIGGER siamweb_revision AFTER {' OR '.join(events)} "
            f"ON {table} DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
            f"EXECUTE FUNCTION siamweb_revision_{name}()"
        )
    return statements


def _sqlite() -> list[str]:
    # SQLite has no deferred triggers, nor a lock between writers to order: one writer at a time.
    statements = []
    upsert = "ON CONFLICT(taxonomy_id) DO UPDATE SET revision = revision + 1;"
    for table, events in _BUMPED_BY.items():
        for event in events:
            row = "OLD" if event == "DELETE" else "NEW"
            if table == "annotations_judgement":
                changed = (
                    f"SELECT taxonomy_id, 1 FROM {_ITEM} WHERE id = {row}.review_item_id "
                    "AND taxonomy_id IS NOT NULL"
                )
            else:
                changed = f"SELECT {row}.taxonomy_id, 1 WHERE {row}.taxonomy_id IS NOT NULL"
            statements.append(
                f"CREATE TRIGGER siamweb_revision_{table}_{event.lower()} AFTER {event} "
                f"ON {table} BEGIN INSERT INTO {_REVISION} (taxonomy_id, revision) {changed} "
                f"{upsert} END"
            )
    return statements


def create_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        statements = _postgresql()
    elif vendor == "sqlite":
        statements = _sqlite()
    else:
        raise RuntimeError(f"no revision triggers for {vendor}")
    for statement in statements:
        schema_editor.execute(statement)


def drop_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for table in _BUMPED_BY:
            schema_editor.execute(f"DROP TRIGGER IF EXISTS siamweb_revision ON {table}")
        for name in ("direct", "judgement"):
            schema_editor.execute(f"DROP FUNCTION IF EXISTS siamweb_revision_{name}()")
    else:
        for table, events in _BUMPED_BY.items():
            for event in events:
                schema_editor.execute(
                    f"DROP TRIGGER IF EXISTS siamweb_revision_{table}_{event.lower()}"
                )


class Migration(migrations.Migration):
    dependencies = [
        ("annotations", "0011_judgement_batch"),
    ]

    operations = [
        migrations.CreateModel(
            name="TaxonomyRevision",
            fields=[
                ("taxonomy_id", models.BigIntegerField(primary_key=True, serialize=False)),
                ("revision", models.BigIntegerField(default=0)),
            ],
        ),
        migrations.RunPython(create_triggers, drop_triggers),
    ]
