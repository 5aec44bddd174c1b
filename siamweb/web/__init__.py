"""What the HTTP of both apps builds on: the API's base views, errors, pagination, schema and
shared fields (``api``, ``fields``, ``api_schema``), the access rules of pages and API
(``decorators``, ``permissions``), the forms' shared fields (``forms``) and the pages' template
filters (``template_filters``). It knows no app's views; each app's views and API subclass and
call it."""
