"""``field__any=[...]``: membership as one array parameter (PostgreSQL's ``= ANY(%s)``).

``__in`` sends one placeholder per value; a batch of texts looks up tens of thousands of member
ids, and building and parsing that many placeholders cost more than the lookup itself.
"""

from __future__ import annotations

from django.db.models import Field, Lookup


@Field.register_lookup
class AnyOf(Lookup):
    lookup_name = "any"
    prepare_rhs = False

    def get_db_prep_lookup(self, value, connection):
        return "%s", [list(value)]

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} = ANY({rhs})", (*lhs_params, *rhs_params)
