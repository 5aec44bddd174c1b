"""How two texts compare: the characters that show nothing and count as absent, and the key
by which two texts are the same string (case, width and spacing folded).

What a person may type at all is curation's rule (``annotations/text_rule.py``); it drops the
same characters this module ignores, so a text compares as it was accepted.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

_WHITESPACE = re.compile(r"\s+")
# Dropped: the soft hyphen, zero-width space, word joiner, byte-order mark and the direction
# marks (LRM, RLM, ALM). A reader sees the same letters without them (a real ESCO label holds a
# zero-width space; right-to-left text pasted from other software carries marks), and they
# compare as absent. The joiners (ZWNJ, ZWJ) are dropped too, except where they do a job: between
# two letters of a script they shape (Arabic, Persian, the Indic scripts), and a ZWJ inside an
# emoji sequence (woman, ZWJ, cooking is one emoji: a cook).
# Marks that show nothing are dropped too: the combining grapheme joiner and Khmer's two
# invisible vowel signs always; variation selectors except after the character they select a
# form of (an emoji for U+FE00-FE0F, a Mongolian letter for the Mongolian ones), where they
# make look-alike texts that compare apart.
ZERO_WIDTH_JOINERS = "\u200c\u200d"
VARIATION_SELECTORS = "\ufe00-\ufe0f\u180b-\u180d\u180f"
ALWAYS_DROPPED = "\u00ad\u200b\u2060\ufeff\u200e\u200f\u061c\u034f\u17b4\u17b5"
DROPPED = ALWAYS_DROPPED + ZERO_WIDTH_JOINERS
_DROP = {
    **dict.fromkeys(map(ord, DROPPED)),
    **dict.fromkeys(range(0xFE00, 0xFE10)),
    **dict.fromkeys((0x180B, 0x180C, 0x180D, 0x180F)),
}


def comparison_key(text: str) -> str:
    """The key two texts are compared by when deciding they are the same string."""
    folded = unicodedata.normalize("NFKC", text.translate(_DROP))
    return _WHITESPACE.sub(" ", folded).strip().casefold()


def char_ngram_strings(text: str, ngram_min: int, ngram_max: int) -> Iterator[str]:
    """Character n-grams of the normalized text, with a space marking both word edges, shortest
    first and in reading order, repeats included."""
    padded = f" {comparison_key(text)} "
    for n in range(ngram_min, ngram_max + 1):
        for i in range(len(padded) - n + 1):
            yield padded[i : i + n]


# "Long Form (Abbreviation)" or "Short (Long Form) Rest": one parenthesis holding another way to
# write the title, as O*NET writes 2,238 of its alternate titles.
_PARENTHESIS = re.compile(r"^(?P<before>[^()]*)\((?P<inside>[^()]+)\)(?P<after>[^()]*)$")


def spelled_out_forms(text: str) -> list[str]:
    """The two ways a member with one parenthesis writes its title, each alone: "Chief Executive
    Officer (CEO)" is also "Chief Executive Officer" and "CEO", "Technical Surveillance
    Countermeasures (TSCM) Specialist" also "TSCM Specialist". Pulled to their group like any
    member, they teach the title tower the abbreviations a taxonomy spells out, and the shorter
    one is a member of its own in an O*NET import; none for a text without exactly one
    parenthesis."""
    found = _PARENTHESIS.match(text)
    if found is None:
        return []
    before, inside, after = (found.group(name).strip() for name in ("before", "inside", "after"))
    forms = [" ".join(f"{before} {after}".split()), " ".join(f"{inside} {after}".split())]
    return [form for form in forms if form and form.casefold() != text.casefold()]
