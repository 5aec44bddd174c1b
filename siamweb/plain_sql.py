"""Plain SQL for the few reads every API request makes: model instances, and a query prepared
once per connection.

Building an ORM query costs more than running it: on 2 cores the token's ``.get()`` took 0.63 ms
against 0.27 ms read this way, and each API request reads the token and its taxonomy. A row is
converted value by value as the ORM would convert it (a datetime from SQLite's text, say), so
the instance is the one ``.get()`` gives.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from django.db import DEFAULT_DB_ALIAS, NotSupportedError, connections
from django.db.models import Model
from django.db.models.sql import Query


class ModelColumns:
    """A model's columns as ``alias.column, …`` for a SELECT, and its instances from those
    values."""

    def __init__(self, model: type[Model], alias: str) -> None:
        self.model = model
        self.fields = list(model._meta.concrete_fields)
        self.names = [field.attname for field in self.fields]
        self.sql = ", ".join(f'{alias}."{field.column}"' for field in self.fields)
        self._converters: dict[str, list] = {}  # by database vendor

    def __len__(self) -> int:
        return len(self.fields)

    def instance(self, values: Sequence) -> Model:
        connection = connections[DEFAULT_DB_ALIAS]
        converters = self._converters.get(connection.vendor)
        if converters is None:
            compiler = connection.ops.compiler("SQLCompiler")(
                Query(self.model), connection, DEFAULT_DB_ALIAS
            )
            columns = [field.get_col(self.model._meta.db_table) for field in self.fields]
            converters = list(compiler.get_converters(columns).items())
            self._converters[connection.vendor] = converters
        values = list(values)
        for position, (functions, column) in converters:
            for function in functions:
                values[position] = function(values[position], column, connection)
        return self.model.from_db(DEFAULT_DB_ALIAS, self.names, values)


def prepared_rows(sql: str, params: Sequence) -> list[tuple]:
    """The rows of a query that a request runs each time and whose planning costs more than
    running it (normalize's rows: docs/decisions/performance-choices.md). On PostgreSQL
    it is prepared on its first run in a connection (unless SIAMWEB_DB_PREPARED_STATEMENTS is
    off) and planned again only by the server's own choice; elsewhere it runs as any query.
    Logged and counted as Django's queries are."""
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()
    try:
        return _server_bound_rows(connection, sql, params)
    except NotSupportedError:
        if connection.in_atomic_block:
            raise
        # "cached plan must not change result type": a migration altered a column it returns
        # while this connection held the statement, which PostgreSQL refuses from then on. A
        # new connection prepares it afresh.
        connection.close()
        return _server_bound_rows(connection, sql, params)


def _server_bound_rows(connection, sql: str, params: Sequence) -> list[tuple]:
    # What Django's own cursor() checks first: a connection that failed its health check or
    # belongs to another thread is not used.
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    # Server-side binding, which alone can prepare: Django's own cursors bind on the client and
    # never do, whatever ``prepare_threshold`` says (settings.py sets it).
    raw = psycopg.Cursor(connection.connection)
    wrap = connection.make_debug_cursor if connection.queries_logged else connection.make_cursor
    with wrap(raw) as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()
