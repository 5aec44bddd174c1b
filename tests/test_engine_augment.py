from __future__ import annotations

import random
import re

import pytest

from models_app.siamese.augment.extra_words import (
    EXTRA_WORD_PATTERNS,
    EXTRA_WORD_POOLS,
    ExtraWords,
    noise_tokens,
)
from models_app.siamese.augment.synonyms import (
    MANUAL_SYNONYMS_PATH,
    GroupSynonyms,
    SynonymReplacer,
    apply_synonym,
    group_candidates,
    induce_synonyms,
    induce_synonyms_by_group,
    load_synonym_groups,
    load_synonyms,
)
from models_app.siamese.augment.typos import add_typos, add_typos_exact

LONG_TEXT = "Senior Java Developer for the Berlin office" * 3  # 129 characters


def test_typos_substitute_about_a_fifth_of_the_characters():
    rng = random.Random(1)
    changed = total = 0
    for _ in range(200):
        typo = add_typos(LONG_TEXT, rng, substitute=0.2, delete=0.0)
        assert len(typo) == len(LONG_TEXT)
        changed += sum(a != b for a, b in zip(typo, LONG_TEXT, strict=True))
        total += len(LONG_TEXT)
    assert changed / total == pytest.approx(0.20, abs=0.01)


def test_typos_delete_about_one_in_twenty_characters():
    rng = random.Random(2)
    kept = sum(len(add_typos(LONG_TEXT, rng, substitute=0.0, delete=0.05)) for _ in range(200))
    assert 1 - kept / (200 * len(LONG_TEXT)) == pytest.approx(0.05, abs=0.006)


def test_typos_with_the_papers_defaults_shorten_by_five_percent_and_change_a_quarter():
    rng = random.Random(3)
    typos = [add_typos(LONG_TEXT, rng) for _ in range(200)]
    mean_length = sum(map(len, typos)) / len(typos)
    assert mean_length / len(LONG_TEXT) == pytest.approx(0.95, abs=0.006)


def test_typos_are_the_same_for_the_same_seed_and_differ_across_seeds():
    first = [add_typos(LONG_TEXT, random.Random(7)) for _ in range(2)]
    assert first[0] == first[1]
    assert add_typos(LONG_TEXT, random.Random(8)) != first[0]


def test_a_substitution_always_changes_the_character_and_keeps_its_case():
    typo = add_typos("AbCdEf", random.Random(0), substitute=1.0, delete=0.0)
    assert all(a != b for a, b in zip(typo, "AbCdEf", strict=True))
    assert [c.isupper() for c in typo] == [True, False, True, False, True, False]


def test_keyboard_typos_hit_a_neighbouring_key():
    rng = random.Random(0)
    hits = {add_typos("s", rng, substitute=1.0, delete=0.0, keyboard=True) for _ in range(300)}
    assert hits == set("qweadzxc")


def test_typos_never_return_an_empty_string():
    assert add_typos("ab", random.Random(0), substitute=0.0, delete=1.0) == "ab"


def test_bad_typo_rates_are_refused():
    with pytest.raises(ValueError, match="substitute"):
        add_typos("x", random.Random(0), substitute=1.5)
    with pytest.raises(ValueError, match="exceed 1"):
        add_typos("x", random.Random(0), substitute=0.6, delete=0.6)


def test_exact_typos_make_five_percent_of_the_characters_into_edits():
    text = "x" * 20 + "abcdefghijklmnopqrst"  # 40 characters: 2 edits at 5%
    substituted = add_typos_exact(text, random.Random(0), rate=0.05, delete_share=0.0)
    assert sum(a != b for a, b in zip(substituted, text, strict=True)) == 2
    deleted = add_typos_exact(text, random.Random(0), rate=0.05, delete_share=1.0)
    assert len(deleted) == 38


def test_exact_typos_edit_even_a_short_title_and_never_empty_it():
    assert add_typos_exact("Cook", random.Random(0)) != "Cook"
    assert add_typos_exact("a", random.Random(0), delete_share=1.0) not in ("", "a")


# A hand-made taxonomy in which each pair of titles exercises one of the paper's rules.
TAXONOMY = {
    "software": [
        "Java Developer",
        "Java Programmer",  # shares "java": (developer, programmer)
        "C++ Developer",  # (c++, java) has a special character
        "C++ Programmer",  # shares "c++": (developer, programmer) a second time
        "Senior Java Developer",  # the complement of "java developer" in it is empty
    ],
    "sales": [
        "Sales Manager",
        "Sales Lead",  # (lead, manager): "lead" is a title on its own
        "Lead",
        "Sales Team Leader",  # (manager, team leader): two words are allowed
        "Head of Sales",  # (head of, manager): "sales" is not in the same place
    ],
    "machines": [
        "General Operator",
        "Buzz Saw Operator",  # (buzz saw, general)
        "Turret Punch Press Operator",  # three-word complement
        "R&D Operator",  # '&'
    ],
    "three shared": ["Senior Java Software Developer", "Senior Java Software Programmer"],
}


def test_synonyms_are_induced_from_titles_of_one_group_by_the_papers_rules():
    assert induce_synonyms(TAXONOMY) == [
        ("buzz saw", "general"),
        ("developer", "programmer"),
        ("manager", "team leader"),
    ]


def test_induced_synonyms_stay_with_the_group_they_came_from():
    assert induce_synonyms_by_group(TAXONOMY) == {
        "software": [("developer", "programmer")],
        "sales": [("manager", "team leader")],
        "machines": [("buzz saw", "general")],
    }


def test_induction_kept_per_group_answers_as_a_fresh_one_when_the_taxonomy_changes():
    induce_synonyms_by_group(TAXONOMY)  # every group's candidates now kept
    # One group gains a title that yields a pair; another gains the title "Programmer", which
    # makes the software group's pair a part that is a title on its own, so it must go.
    changed = {
        **TAXONOMY,
        "sales": [*TAXONOMY["sales"], "Sales Coordinator"],
        "machines": [*TAXONOMY["machines"], "Programmer"],
    }
    warm = induce_synonyms_by_group(changed)
    group_candidates.cache_clear()
    assert warm == induce_synonyms_by_group(changed)
    assert "software" not in warm
    assert ("coordinator", "manager") in warm["sales"]


def test_kept_candidates_belong_to_the_options_they_were_induced_with():
    induce_synonyms_by_group(TAXONOMY)
    assert "machines" in induce_synonyms_by_group(TAXONOMY, max_part_words=3)
    assert ("general", "turret punch press") in induce_synonyms(TAXONOMY, max_part_words=3)
    assert ("general", "turret punch press") not in induce_synonyms(TAXONOMY)


def test_runs_that_induce_the_same_pairs_share_one_compiled_table():
    first = GroupSynonyms.from_taxonomy(TAXONOMY)
    again = GroupSynonyms.from_taxonomy(TAXONOMY)
    assert again._induced["software"] is first._induced["software"]
    assert again.apply("Java Developer", "software", random.Random(0)) == "Java Programmer"


def test_parts_that_are_titles_on_their_own_are_accepted_only_when_asked():
    assert induce_synonyms(TAXONOMY, allow_standalone_parts=True) == [
        ("buzz saw", "general"),
        ("developer", "programmer"),
        ("lead", "manager"),
        ("lead", "team leader"),
        ("manager", "team leader"),
    ]


def test_shared_words_out_of_place_are_accepted_only_when_asked():
    assert induce_synonyms(TAXONOMY, aligned=False) == [
        ("buzz saw", "general"),
        ("developer", "programmer"),
        ("head of", "manager"),
        ("head of", "team leader"),
        ("manager", "team leader"),
    ]


def test_a_minimum_support_keeps_candidates_seen_in_enough_title_pairs():
    assert induce_synonyms(TAXONOMY, min_support=2) == [("developer", "programmer")]


def test_the_manual_synonym_file_has_over_a_hundred_groups_of_two_or_more_phrases():
    lines = [
        line.split("#", 1)[0].strip()
        for line in MANUAL_SYNONYMS_PATH.read_text(encoding="utf-8").splitlines()
    ]
    lines = [line for line in lines if line]
    assert len(lines) >= 100
    assert all(len([p for p in line.split(" | ") if p.strip()]) >= 2 for line in lines)
    assert len(load_synonym_groups()) == len(lines)
    pairs = load_synonyms()
    for pair in [
        ("senior", "sr."),
        ("registered nurse", "RN"),
        ("developer", "dev"),
        ("human resources", "HR"),
        ("quality assurance", "QA"),
    ]:
        assert pair in pairs


def test_a_synonym_line_with_one_phrase_is_an_error(tmp_path):
    path = tmp_path / "synonyms.txt"
    path.write_text("# comment\nsenior | sr.\n\nmanager |  \n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"synonyms.txt:4"):
        load_synonyms(path)


def test_a_synonym_replaces_a_whole_word_and_follows_its_case():
    rng = random.Random(0)
    assert apply_synonym("Senior Java Developer", [("senior", "sr.")], rng) == "Sr. Java Developer"
    assert apply_synonym("senior java developer", [("senior", "sr.")], rng) == "sr. java developer"
    assert (
        apply_synonym("RN, nights", [("registered nurse", "RN")], rng) == "Registered Nurse, nights"
    )
    assert apply_synonym("ICU rn", [("registered nurse", "RN")], rng) == "ICU registered nurse"


def test_a_synonym_does_not_match_inside_a_longer_word():
    assert apply_synonym("Seniority Analyst", [("senior", "sr.")], random.Random(0)) is None
    assert apply_synonym("Cook", [("senior", "sr.")], random.Random(0)) is None


def test_the_longest_phrase_wins_at_a_position():
    synonyms = [("senior", "sr"), ("senior", "sr.")]
    replaced = {apply_synonym("Sr. Developer", synonyms, random.Random(s)) for s in range(20)}
    assert replaced == {"Senior Developer"}


def test_one_matching_phrase_is_replaced_at_random_and_reproducibly():
    replacer = SynonymReplacer(load_synonyms())
    outcomes = {replacer.apply("Senior Software Engineer", random.Random(s)) for s in range(40)}
    assert len(outcomes) > 3
    assert all(o is not None and o != "Senior Software Engineer" for o in outcomes)
    same = {replacer.apply("Senior Software Engineer", random.Random(5)) for _ in range(3)}
    assert len(same) == 1


def test_induced_synonyms_apply_only_inside_their_group_and_manual_ones_everywhere():
    synonyms = GroupSynonyms.from_taxonomy(TAXONOMY, [("senior", "sr.")])
    rng = random.Random(0)
    assert synonyms.apply("Python Developer", "software", rng) == "Python Programmer"
    assert synonyms.apply("Real Estate Developer", "sales", rng) is None
    assert synonyms.apply("Senior Baker", "no such group", rng) == "Sr. Baker"


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_extra_words_train_and_test_halves_share_no_item_pattern_or_word(seed):
    train, test = ExtraWords("train", seed), ExtraWords("test", seed)
    for pool in [*EXTRA_WORD_POOLS, "pattern"]:
        assert train.pools[pool] and test.pools[pool]
        assert not set(train.pools[pool]) & set(test.pools[pool])
    everything = {*EXTRA_WORD_PATTERNS, *(item for p in EXTRA_WORD_POOLS.values() for item in p)}
    halves = {item for pools in (train, test) for items in pools.pools.values() for item in items}
    assert halves == everything  # nothing is lost in the split
    assert not train.vocabulary() & test.vocabulary()


def test_decorated_test_titles_hold_the_title_and_only_unseen_noise():
    train, test = ExtraWords("train"), ExtraWords("test")
    rng = random.Random(0)
    title = "Registered Nurse"
    for _ in range(300):
        decorated = test.decorate(title, rng)
        assert title in decorated and decorated != title
        assert not noise_tokens(decorated.replace(title, " ", 1)) & train.vocabulary()


def test_decorations_are_reproducible_and_varied():
    words = ExtraWords("train")
    first = [words.decorate("Welder", random.Random(3)) for _ in range(2)]
    assert first[0] == first[1]
    assert len({words.decorate("Welder", random.Random(s)) for s in range(50)}) > 30
    assert all(
        re.search(r"\bWelder\b", words.decorate("Welder", random.Random(s))) for s in range(50)
    )


def test_an_unknown_extra_words_split_is_refused():
    with pytest.raises(ValueError, match="split"):
        ExtraWords("validation")  # type: ignore[arg-type]
