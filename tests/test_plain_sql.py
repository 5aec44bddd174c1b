"""A query every request runs is prepared once per PostgreSQL connection, gives the rows a plain
cursor gives, and is logged and counted as any query is (on SQLite it runs as any query)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from siamweb.plain_sql import prepared_rows

SQL = "SELECT id, username FROM auth_user WHERE is_active = %s AND username LIKE %s ORDER BY id"


@pytest.mark.django_db
def test_a_prepared_query_gives_a_plain_querys_rows_and_is_counted():
    users = get_user_model()
    for name in ("ada", "alan", "grace"):
        users.objects.create_user(username=name, password="a-long-pass-123")
    users.objects.filter(username="alan").update(is_active=False)
    with connection.cursor() as cursor:
        cursor.execute(SQL, [True, "%a%"])
        plain = cursor.fetchall()
    with CaptureQueriesContext(connection) as queries:
        first = prepared_rows(SQL, [True, "%a%"])
        second = prepared_rows(SQL, [False, "%a%"])
    assert [tuple(row) for row in first] == [tuple(row) for row in plain]
    assert [name for _, name in first] == ["ada", "grace"]
    assert [name for _, name in second] == ["alan"]  # new values, the same statement
    assert len(queries) == 2
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement FROM pg_prepared_statements")
            prepared = [row[0] for row in cursor.fetchall()]
        # Once, with its values as parameters: the second run reused the first's statement.
        assert prepared == [SQL.replace("%s", "$1", 1).replace("%s", "$2", 1)]


@pytest.mark.django_db
def test_a_bad_prepared_query_raises_djangos_error_and_the_connection_goes_on():
    with pytest.raises(DatabaseError), transaction.atomic():
        prepared_rows("SELECT no_such_column FROM auth_user WHERE id = %s", [1])
    assert [tuple(row) for row in prepared_rows("SELECT %s", [7])] == [(7,)]
