"""The ranker's feature set: the names of the features each (text, group) candidate gets, in the
order of their columns, and the set's name a stored ranker carries.

A candidate's features say how well each matcher's best member of the group scores and ranks,
how far it is behind the text's best, the words and trigrams the text shares with it, the
description's similarity, and what verdicts said of the group before
(``candidates.candidates_of_texts`` computes them).
"""

from __future__ import annotations

import hashlib

FEATURES: tuple[str, ...] = (
    # The group's best member of any source: what a group scored before the ranker.
    "best",
    # Taxonomy and admin members in the served embedding's hits.
    "member",
    "member_gap",
    "member_second",
    "member_count",
    "member_rank",
    "member_missing",
    "member_dice",
    "member_words_query",
    "member_words_member",
    "member_exact",
    # Curators' members: texts judged before, put in this group.
    "judged",
    "judged_gap",
    "judged_count",
    "judged_rank",
    "judged_missing",
    "judged_dice",
    "judged_vote",
    # The group's description, in the served embedding.
    "description",
    "description_gap",
    "description_missing",
    # The group's name, by string overlap.
    "name_dice",
    "name_words",
    # The text itself.
    "query_words",
    # What verdicts said of the group before the ranker was fitted.
    "verdicts",
    "verdict_share",
    "rejections",
    "rejected_near",
)
# What a stored ranker names to say which features it reads: the names, and a revision to move
# when a feature keeps its name but is computed differently. A ranker of another set is never
# served; it is due for a refit at once.
FEATURE_REVISION = 1
FEATURE_SET = f"r{FEATURE_REVISION}-" + hashlib.sha256(",".join(FEATURES).encode()).hexdigest()[:12]
