"""Parsing the corpus formats, labels, and errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.config import DEFAULT_SEEDS
from rag.corpus import CorpusFile, discover, read_file
from rag.errors import InputError
from rag.labels import label, method_name, subject


def _read(path: Path):
    return read_file(CorpusFile(path, path.name)).entries


def test_seed_format_keeps_header_as_venue_and_numbers_from_one():
    files, errors, skipped = discover([DEFAULT_SEEDS])
    assert not errors and not skipped and [f.key for f in files] == [
        "000_e37aa35e238d35ea.txt", "003_635826d5ffaa2f6c.txt", "004_97b00aa727c9fbe0.txt"]
    entries = read_file(files[1]).entries
    assert len(entries) == 19
    assert [e.source.ordinal for e in entries] == list(range(1, 20))
    assert {e.venue for e in entries} == {"ICML 2024 Papers"}
    assert entries[0].text.startswith("Feedback Alignment (FA) methods")


def test_labels_name_the_method_the_abstract_introduces():
    labels = {e.label for f in discover([DEFAULT_SEEDS])[0] for e in read_file(f).entries}
    assert {"BiLLM", "AnyTool", "DiCo", "clawNOs", "MAgg", "RICE", "BLO-SAM"} <= labels
    assert method_name("We study a thing in general.") == ""
    # An acronym in brackets names the method, unless it stands for a part of a
    # method named in a clause before it.
    assert method_name("We introduce Cross-Task Linearity (CTL), a phenomenon.") == "CTL"
    assert method_name("We propose TinyEval, which fits an item response theory (IRT) model.") == "TinyEval"


def test_untitled_entries_are_labelled_by_their_subject_never_opening_words():
    entries = [e for f in discover([DEFAULT_SEEDS])[0] for e in read_file(f).entries]
    assert not [e.label for e in entries if e.label.endswith("…")]
    labels = {e.label: e for e in entries}
    assert {"watermark stealing", "online cascade learning", "Feedback Alignment",
            "Restless multi-armed bandits", "Classifier-Free Guidance"} <= set(labels)
    # Not cut by an aside in brackets ("on *online* (i.e., single epoch) learning") or
    # inside a trailing phrase ("... strategy on 3D"); not a phrase pointing elsewhere.
    assert {"SGD noise on online learning", "span mask pre-training strategy"} <= set(labels)
    assert "sources of these disparities" not in labels
    assert "testing feasibility assumptions" in labels  # not "testing such ..."
    # A subject is not a name: sentences say "this paper", not "watermark stealing shows …".
    assert labels["watermark stealing"].name == "this paper" and labels["BiLLM"].name == "BiLLM"
    assert subject("Prior works focused on *offline learning*, while we study *online "
                   "cascade learning* here.") == "online cascade learning"
    assert subject("We optimize pipeline parallelism for inference by partitioning graphs. "
                   "Pipeline parallelism is hard.") == "pipeline parallelism for inference"
    assert label("Short.") == "Short" and label("One two three four five six seven.").endswith("…")


def test_ids_are_stable_and_change_with_the_text():
    f = discover([DEFAULT_SEEDS])[0][0]
    a, b = read_file(f).entries, read_file(f).entries
    assert [e.id for e in a] == [e.id for e in b]
    assert len({e.id for e in a}) == len(a)


def test_jsonl_csv_and_bibtex_records(tmp_path):
    (tmp_path / "a.jsonl").write_text(json.dumps(
        {"title": "Paper A", "abstract": "We do A.", "authors": ["X", "Y"], "year": 2024}) + "\n")
    (tmp_path / "b.csv").write_text('title,abstract,doi\n"Paper B","We do B, well.",https://doi.org/10.1234/B\n')
    (tmp_path / "c.bib").write_text(
        "@inproceedings{c24, title={Paper {C}}, author={Ada Lovelace and Alan Turing},\n"
        " booktitle={ICML}, year={2024}, abstract={We do C.}}\n")
    a, = _read(tmp_path / "a.jsonl")
    b, = _read(tmp_path / "b.csv")
    c, = _read(tmp_path / "c.bib")
    assert (a.label, a.authors, a.year) == ("Paper A", "X; Y", "2024")
    assert (b.label, b.text, b.doi) == ("Paper B", "We do B, well.", "10.1234/b")
    assert (c.label, c.venue, c.authors, c.text) == ("Paper C", "ICML", "Lovelace, Ada; Turing, Alan",
                                                     "We do C.")


def test_records_without_an_abstract_are_skipped_with_a_warning(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text('{"title": "No abstract here"}\n{"title": "B", "abstract": "We do B."}\n')
    parsed = read_file(CorpusFile(p, "a.jsonl"))
    assert [e.label for e in parsed.entries] == ["B"]
    assert parsed.warnings == ["a.jsonl line 1 (No abstract here): no abstract; skipped"]


def test_a_file_in_an_unknown_format_is_refused_never_read_as_text(tmp_path):
    p = tmp_path / "notes.docx"
    p.write_text("TY  - CONF\nTI  - Something\nER  - \n")
    with pytest.raises(InputError, match="notes.docx: not a format rag reads; give BibTeX"):
        _read(p)
    files, errors, skipped = discover([tmp_path])
    assert files == [] and skipped == ["notes.docx: not a format rag reads; skipped"]


@pytest.mark.parametrize("text,names", [
    ("Jonathan Ho, Ajay Jain, Pieter Abbeel", ["Ho, Jonathan", "Jain, Ajay", "Abbeel, Pieter"]),
    ("Edward J. Hu, Yelong Shen and Zeyuan Allen-Zhu", ["Hu, Edward J.", "Shen, Yelong", "Allen-Zhu, Zeyuan"]),
    ("Hu, Edward J. and Shen, Yelong", ["Hu, Edward J.", "Shen, Yelong"]),
    ("Ho, J., Jain, A.", ["Ho, J.", "Jain, A."]),
    ("Laurens van der Maaten; Hinton, Geoffrey", ["van der Maaten, Laurens", "Hinton, Geoffrey"]),
])
def test_author_lists_are_split_into_family_given_names(text, names):
    from rag.formats import people

    assert people(text) == names


def test_latex_is_decoded_including_zotero_escaped_math():
    from rag.formats import delatex

    assert delatex(r"4\$\textbackslash times\$ faster, Gr{\"o}ber --- 80\% of 50%") == \
        "4× faster, Gröber — 80% of 50%"


def test_openalex_inverted_index_is_read_back_in_order():
    from rag.formats import inverted_to_text

    assert inverted_to_text({"We": [0], "study": [1], "we": [3], "what": [2], "can.": [4]}) == \
        "We study what we can."


@pytest.mark.parametrize("name,content,message", [
    ("empty.txt", b"   \n", "empty.txt: the file is empty"),
    ("bin.txt", b"\x00\x01\x02abc", "bin.txt: binary file"),
    ("latin.txt", "caf\xe9".encode("latin-1"), "latin.txt: byte 3: not UTF-8"),
    ("bad.jsonl", b'{"abstract": "ok"}\n{not json\n', "bad.jsonl:2: not valid JSON"),
    ("noabs.jsonl", b'{"title": "t"}\n', "noabs.jsonl: no abstracts found"),
    ("nocol.csv", b"title,summary\nA,B\n", "nocol.csv:1: the CSV header has no 'abstract' column"),
])
def test_bad_files_give_one_line_errors_naming_file_and_position(tmp_path, name, content, message):
    p = tmp_path / name
    p.write_bytes(content)
    with pytest.raises(InputError) as e:
        _read(p)
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


def test_an_entry_far_longer_than_an_abstract_is_cut_with_a_warning(tmp_path):
    import time

    p = tmp_path / "huge.jsonl"
    p.write_text(json.dumps({"title": "Huge", "abstract": "We study things. " * 300_000}) + "\n")  # 5 MB
    t0 = time.monotonic()
    parsed = read_file(CorpusFile(p, "huge.jsonl"))
    assert time.monotonic() - t0 < 30
    assert len(parsed.entries[0].text) <= 20_000
    assert parsed.warnings == ["huge.jsonl line 1: 5,099,999 characters, far longer than an "
                               "abstract; cut at 20,000"]


def test_control_characters_are_stripped_from_every_field_and_counted(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"title": "T\u001b]0;HIJACK\u0007itle", "abstract": "We\u0000 study\u001b[2J x."}) + "\n")
    parsed = read_file(CorpusFile(p, "c.jsonl"))
    e, = parsed.entries
    assert (e.title, e.text) == ("Title", "We study x.")
    assert parsed.control == 3 and "3 control characters" in parsed.warnings[-1]
