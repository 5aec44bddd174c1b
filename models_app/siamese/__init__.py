"""The Siamweb engine: encoders, the member index and ranking. Never imports Django.

A model turns short texts into L2-normalised vectors (``Encoder.encode``); a ``MemberIndex``
finds the nearest member strings of a taxonomy; ``rank_groups`` folds member hits into ranked
groups. The Django apps keep the rows and call these from services.
"""
