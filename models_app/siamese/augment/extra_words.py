"""Extra words: a title inside job-ad noise (seniority, place, contract, perks), from pools
split once into a train half and a test half so the test's words are never trained on."""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Literal

# The paper mines its extra words from proprietary production inputs ("looking for C++ developers
# (urgent!)", "geography teacher 0.4 contract now"). These pools imitate such job-ad noise. Each
# is split in two by ``ExtraWords`` so that test inputs carry noise never seen in training.
# fmt: off
EXTRA_WORD_POOLS: dict[str, tuple[str, ...]] = {
    "seniority": (
        "Senior", "Sr.", "Junior", "Jr.", "Lead", "Principal", "Trainee", "Graduate", "Entry Level",
        "Experienced", "Staff", "Apprentice", "Intern", "Mid-Level", "Head", "Chief", "Associate",
        "Expert", "Student", "Deputy", "Snr", "Jnr", "Veteran", "Novice",
    ),
    "location": (
        "Berlin", "Munich", "Hamburg", "London", "Manchester", "Paris", "Lyon", "Amsterdam",
        "Rotterdam", "New York, NY", "Chicago, IL", "Austin, TX", "Seattle, WA", "Boston, MA",
        "Denver, CO", "Atlanta, GA", "Toronto", "Vancouver", "Sydney", "Melbourne", "Dublin",
        "Madrid", "Barcelona", "Zurich", "Vienna", "Remote", "Hybrid", "On-site", "Work from home",
        "Nationwide", "Anywhere in Europe", "Bay Area", "Downtown",
    ),
    "contract": (
        "full-time", "part-time", "contract", "temp", "temporary", "6 months", "12-month FTC",
        "permanent", "freelance", "seasonal", "per diem", "0.4 FTE", "interim", "zero hours",
        "fixed term", "weekends only", "night shift", "day shift", "PRN", "internship",
    ),
    "gender": (
        "(m/f/d)", "(m/w/d)", "(h/f)", "(f/m/x)", "(m/f)", "(w/m/d)", "(f/h)", "(all genders)",
    ),
    "company": (
        "Acme Corp", "Globex", "Initech", "Umbrella Health", "Stark Industries", "Wayne Logistics",
        "Northwind Traders", "Contoso", "Fabrikam", "Tailspin Toys", "Vandelay Imports", "Hooli",
        "Pied Piper", "Soylent Foods", "Cyberdyne Systems", "Wonka Industries", "Gringotts Bank",
        "Oceanic Airlines", "Dunder Mifflin", "Massive Dynamic", "Blue Sun Corp",
        "Monarch Solutions",
    ),
    "requirement": (
        "5+ years", "3 years experience", "CDL-A", "CPA preferred", "degree required",
        "degree holders only", "SAP", "Excel", "bilingual Spanish", "fluent German",
        "security clearance", "valid driver's license", "forklift certified", "ACLS/BLS",
        "no experience needed", "B2B", "b2c", "OSHA 30", "PMP a plus", "SQL", "own tools",
        "DBS check", "French speaker", "willing to travel",
    ),
    "urgency": (
        "urgent!", "immediate start", "hiring now", "start ASAP", "apply today", "!!!", "new",
        "hot job", "limited positions", "sign-on bonus", "interviews this week",
        "walk-in interviews", "now hiring!!", "quick hire",
    ),
    "salary": (
        "$25/hr", "€60k", "£35,000", "$80-95k", "up to $120k", "€45.000 p.a.", "$18.50 per hour",
        "DOE", "competitive salary", "£400/day", "CHF 110'000", "great benefits", "401k match",
        "commission", "tips", "OTE $150k",
    ),
    "separator": (
        " - ", " | ", " / ", ", ", " \u2013 ", " :: ", " · ", " > ", " ; ", " ~ ",
    ),
    "brackets": (
        "()", "[]", "{}", "<>", "**",
    ),
}


# How the pieces are arranged around the title. Patterns are split between train and test as
# well, so the fixed words in them ("is hiring", "wanted") are test noise or train noise, not both.
EXTRA_WORD_PATTERNS: tuple[str, ...] = (
    "{seniority} {title}",
    "{title}{separator}{location}",
    "{title} {gender}",
    "{seniority} {title} {gender}{separator}{location}",
    "{title}{separator}{contract}",
    "{company}{separator}{title}",
    "{title}{separator}{company}{separator}{location}",
    "{urgency} {title}",
    "{title}{separator}{salary}",
    "{title} {open}{requirement}{close}",
    "{title}{separator}{requirement}",
    "{title} {contract} {urgency}",
    "{seniority} {title}{separator}{salary}{separator}{contract}",
    "{company} is hiring: {title}",
    "{title} wanted{separator}{location}",
    "we are looking for a {title} {gender}",
    "{title} needed {open}{urgency}{close}",
    "{title} position at {company}",
    "job opening: {title} {open}{location}{close}",
    "{title} job in {location}",
    "{title} vacancy{separator}{contract}",
    "apply now{separator}{title}",
    "{title} join our team!",
    "{title} {location} {salary}",
    "career opportunity {title} {requirement}",
    "{title} role {open}{contract}, {location}{close}",
    "{location}{separator}{title}{separator}{requirement}",
    "{seniority} {title}{separator}{company}",
    "{title} {seniority} {requirement} {contract}",
    "seeking {title}{separator}{salary}",
)


_PATTERN_SLOT = re.compile(r"{(\w+)}")


# Noise vocabulary for the disjointness guarantee: alphabetic tokens of two letters or more.
# Digits and single letters ("5+ years", "(m/f/d)") are too generic to call vocabulary.
_NOISE_TOKEN = re.compile(r"[^\W\d_]{2,}")


def noise_tokens(text: str) -> set[str]:
    """The words of a piece of noise (or of a pattern, slots aside) that count as vocabulary."""
    return set(_NOISE_TOKEN.findall(_PATTERN_SLOT.sub(" ", text).casefold()))


def _split_pools(
    pools: Mapping[str, Sequence[str]], seed: int
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Split every pool (patterns included) in two with no shared item and no shared word.

    Items that share a vocabulary word ("3 years experience", "5+ years") are bound together by
    union-find and go to the same side, so no word of test noise was seen in training noise.
    Components are dealt to the side that has fewer items of their pools, largest first, in an
    order shuffled by ``seed``: the split is deterministic for a seed and roughly balanced.
    """
    items = [(pool, text) for pool, texts in pools.items() for text in dict.fromkeys(texts)]
    parent = list(range(len(items)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, (_, text) in enumerate(items):
        for token in sorted(noise_tokens(text)):
            if token in owner:
                parent[find(i)] = find(owner[token])
            else:
                owner[token] = i
    components: dict[int, list[int]] = defaultdict(list)
    for i in range(len(items)):
        components[find(i)].append(i)
    order = list(components.values())
    random.Random(seed).shuffle(order)
    order.sort(key=len, reverse=True)  # stable: equal sizes keep the shuffled order
    sides: tuple[dict[str, list[str]], dict[str, list[str]]] = (
        {pool: [] for pool in pools},
        {pool: [] for pool in pools},
    )
    for members in order:
        touched = Counter(items[i][0] for i in members)
        load = [sum(len(side[pool]) for pool in touched) for side in sides]
        side = sides[0] if load[0] <= load[1] else sides[1]
        for i in members:
            side[items[i][0]].append(items[i][1])
    return sides


class ExtraWords:
    """Job-ad noise around a title, from the ``train`` or the ``test`` half of every pool.

    The paper's Extra Words data are real inputs that contain a taxonomy title as a "complete and
    strict substring"; those are proprietary, so this generator imitates them: seniority,
    location, contract type, gender tags, company, requirements, urgency and salary, joined by
    varied separators in varied patterns. The two halves share no pool item, no pattern and no
    noise word, so the test measures invariance to noise the model has never seen.

    ``seed`` chooses the split, not the noise (that comes from the ``rng`` given to
    ``decorate``): the halves are disjoint only for the *same* seed. The test suite uses the
    default, so training must use ``ExtraWords("train")`` too, whatever its own seed.
    """

    def __init__(self, split: Literal["train", "test"], seed: int = 0) -> None:
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        pools = {**EXTRA_WORD_POOLS, "pattern": EXTRA_WORD_PATTERNS}
        halves = _split_pools(pools, seed)
        chosen = halves[0] if split == "train" else halves[1]
        empty = [pool for pool, items in chosen.items() if not items]
        if empty:
            raise ValueError(f"seed {seed} leaves no {split} items in pools {empty}")
        self.split = split
        self.seed = seed
        self.pools: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in chosen.items()}

    def vocabulary(self) -> set[str]:
        """Every noise word this half can produce (pattern words included)."""
        return {
            token for items in self.pools.values() for item in items for token in noise_tokens(item)
        }

    def decorate(self, title: str, rng: random.Random, *, nest: float = 0.3) -> str:
        """``title`` with noise around it; the title stays verbatim inside and something is added.

        With probability ``nest`` a second pattern wraps the first, for inputs with noise on
        several sides ("Sr. X (m/f/d) - Berlin | full-time").
        """
        decorated = self._fill(rng.choice(self.pools["pattern"]), title, rng)
        if rng.random() < nest:
            decorated = self._fill(rng.choice(self.pools["pattern"]), decorated, rng)
        return decorated

    def _fill(self, pattern: str, title: str, rng: random.Random) -> str:
        brackets = rng.choice(self.pools["brackets"])
        values = {"title": title, "open": brackets[0], "close": brackets[1]}
        for slot in _PATTERN_SLOT.findall(pattern):
            if slot not in values:
                values[slot] = rng.choice(self.pools[slot])
        return pattern.format(**values)
