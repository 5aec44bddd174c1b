"""An admin's edits to a taxonomy: groups created, renamed and merged; members added, moved and
removed.

Each edit records an audit event with the values before and after, in the transaction that makes
the change. Searches see a change at once (new members are searched live from the engine's
delta, removed ones are dropped at query time, and a member's group is read from its row), so
an edit queues no run: the scheduled check folds changed members into the next index build.

Every function raises ``TaxonomyEditError`` for bad input, naming the field, and changes nothing
when it does.

By subject: ``groups``, ``members``, and ``checks`` (the error and the input checks they
share). Callers import from the module that defines what they need.
"""
