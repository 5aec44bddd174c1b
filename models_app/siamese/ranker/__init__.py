"""The learnt ranker in three rooms: ``candidates`` (each text's candidate groups and their
features, one function for serving and fitting), ``model`` (the linear model, its fit and its
calibration, with ``residual``: the starter's fixed network beside the weights) and ``files`` (a
fitted ranker on disk)."""
