"""Parsing the corpus formats, labels, and errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.config import DEFAULT_SEEDS
from rag.corpus import CorpusFile, discover, method_name, read_file
from rag.errors import InputError


def _read(path: Path):
    return read_file(CorpusFile(path, path.name))


def test_seed_format_keeps_header_as_venue_and_numbers_from_one():
    files, errors = discover([DEFAULT_SEEDS])
    assert not errors and [f.key for f in files] == [
        "000_e37aa35e238d35ea.txt", "003_635826d5ffaa2f6c.txt", "004_97b00aa727c9fbe0.txt"]
    entries = read_file(files[1])
    assert len(entries) == 19
    assert [e.source.ordinal for e in entries] == list(range(1, 20))
    assert {e.venue for e in entries} == {"ICML 2024 Papers"}
    assert entries[0].text.startswith("Feedback Alignment (FA) methods")


def test_labels_name_the_method_the_abstract_introduces():
    labels = {e.label for f in discover([DEFAULT_SEEDS])[0] for e in read_file(f)}
    assert {"BiLLM", "AnyTool", "DiCo", "clawNOs", "MAgg", "RICE"} <= labels
    assert method_name("We study a thing in general.") == ""


def test_ids_are_stable_and_change_with_the_text():
    f = discover([DEFAULT_SEEDS])[0][0]
    a, b = read_file(f), read_file(f)
    assert [e.id for e in a] == [e.id for e in b]
    assert len({e.id for e in a}) == len(a)


def test_jsonl_csv_and_bibtex_records(tmp_path):
    (tmp_path / "a.jsonl").write_text(json.dumps(
        {"title": "Paper A", "abstract": "We do A.", "authors": ["X", "Y"], "year": 2024}) + "\n")
    (tmp_path / "b.csv").write_text('title,abstract,doi\n"Paper B","We do B, well.",10.1/b\n')
    (tmp_path / "c.bib").write_text(
        "@inproceedings{c24, title={Paper {C}}, author={Ada Lovelace and Alan Turing},\n"
        " booktitle={ICML}, year={2024}, abstract={We do C.}}\n")
    a, = _read(tmp_path / "a.jsonl")
    b, = _read(tmp_path / "b.csv")
    c, = _read(tmp_path / "c.bib")
    assert (a.label, a.authors, a.year) == ("Paper A", "X; Y", "2024")
    assert (b.label, b.text, b.doi) == ("Paper B", "We do B, well.", "10.1/b")
    assert (c.label, c.venue, c.authors, c.text) == ("Paper C", "ICML", "Ada Lovelace; Alan Turing", "We do C.")


@pytest.mark.parametrize("name,content,message", [
    ("empty.txt", b"   \n", "empty.txt: the file is empty"),
    ("bin.txt", b"\x00\x01\x02abc", "bin.txt: binary file"),
    ("latin.txt", "caf\xe9".encode("latin-1"), "latin.txt: byte 3: not UTF-8"),
    ("bad.jsonl", b'{"abstract": "ok"}\n{not json\n', "bad.jsonl:2: not valid JSON"),
    ("noabs.jsonl", b'{"title": "t"}\n', "noabs.jsonl:line 1: the record has no 'abstract'"),
    ("nocol.csv", b"title,summary\nA,B\n", "nocol.csv:1: the CSV header has no 'abstract' column"),
])
def test_bad_files_give_one_line_errors_naming_file_and_position(tmp_path, name, content, message):
    p = tmp_path / name
    p.write_bytes(content)
    with pytest.raises(InputError) as e:
        _read(p)
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)
