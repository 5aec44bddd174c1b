"""Bulk jobs: a file normalized by workers in chunks, its pages, API and result files.

By step: ``jobs`` (a job created, cancelled, retried, deleted), ``files`` (the file cut into
records, the result written), ``run`` (a job started, its chunks run on every worker, finished),
``selectors``, ``download``; its HTTP: ``api``, ``views``, ``forms``, ``urls``."""
