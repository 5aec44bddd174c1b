"""The one seeded split of the real labelled titles, and refusals of files it cannot use."""

from __future__ import annotations

import pytest

from bench.jobbert_data import (
    DataError,
    LabelledTitle,
    check_labels,
    consistently_labelled,
    jobbert_split,
)

URI = "http://data.europa.eu/esco/occupation/"


def write(tmp_path, rows: list[str], header: str = ",vacancyTitle,conceptUri") -> None:
    (tmp_path / "jobbert").mkdir()
    lines = [header] + [f"{i},{row}" for i, row in enumerate(rows)]
    (tmp_path / "jobbert" / "validation_titles.csv").write_text("\n".join(lines) + "\n")


def test_the_split_is_seeded_disjoint_by_title_and_keeps_every_row(tmp_path):
    titles = [f"Title {i % 7},{URI}c{i % 3}" for i in range(30)] + [f"TITLE 1,{URI}c1"]
    write(tmp_path, titles)
    dev, stream = jobbert_split(tmp_path, dev_titles=3)
    assert len({row.text.casefold() for row in dev}) == 3
    assert not {r.text.casefold() for r in dev} & {r.text.casefold() for r in stream}
    assert len(dev) + len(stream) == 31
    assert (dev, stream) == jobbert_split(tmp_path, dev_titles=3)  # the same every time
    assert all(row.code.startswith("c") for row in dev + stream)


@pytest.mark.parametrize(
    "rows, header, message",
    [
        (["Nurse,"], ",vacancyTitle,conceptUri", "'Nurse' has no conceptUri"),
        (["Nurse,x"], ",title,uri", "lacks the column(s) conceptUri, vacancyTitle"),
        (['"Nurse,x'], ",vacancyTitle,conceptUri", "cannot be read"),
    ],
)
def test_a_file_it_cannot_use_is_refused_by_name(tmp_path, rows, header, message):
    write(tmp_path, rows, header)
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        jobbert_split(tmp_path)


def test_titles_labelled_outside_the_taxonomy_are_named():
    with pytest.raises(DataError, match="not in ESCO's occupations: nope"):
        check_labels([LabelledTitle("Nurse", "nope")], {"c1"})


def test_consistently_labelled_titles_occur_more_than_once_always_with_one_label():
    texts = ["Java Dev", "java  dev", "Nurse", "nurse", "Chef", "Baker", "Baker", "Baker"]
    labels = ["a", "a", "b", "c", "d", "e", "e", "e"]
    # "Nurse" disagrees with itself and "Chef" occurs once: neither is trusted.
    assert consistently_labelled(texts, labels) == [0, 5]
