"""REST API, version 1: thin views around selectors and services.

One view per URL; each method is one operation with its own nested serializers (``Filter…`` for
query parameters, ``…InputSerializer`` for the body, ``…OutputSerializer`` for the answer).
Bad input is a 400 whose body names the field: ``{"<field>": ["what is wrong"]}``. Writes go
through the services; a service's own refusal (``VerdictError``, ``TaxonomyEditError``) is
answered the same way, 409 when it is about the state of things rather than the request.

Lists are paginated: page numbers (``count``/``next``/``previous``/``results``) where the list is
bounded by a taxonomy's size, keyset cursors (``next``/``previous``/``results``) for the lists
that grow with every input and verdict (review items, inputs, judgements, feedback pairs), so a
deep page costs what the first one does.

The base views, pagination, errors and shared fields every app's API uses are in
``siamweb.web``. By resource: ``base`` (what curation's views add: the queue's pagination, a
refused verdict or edit, curation's choice fields), ``serializers`` (shared by several views),
``reads`` (queries beside ``annotations.selectors``), ``taxonomies`` (taxonomies, groups,
members), ``inputs`` (normalize, inputs in), ``review`` (the queue, verdicts, feedback pairs).
Callers import from the module that defines what they need.
"""
