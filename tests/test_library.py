"""A researcher's own library: reference-manager exports and bulk downloads, read
with the real embedder into a real on-disk store, then listed, shown, removed,
rebuilt, cited and rendered by pandoc.

tests/data/library/ is made as the exporters write (library.manifest.json says what each
file holds): Better BibTeX with a record without an abstract and LaTeX, RIS,
CSL-JSON, an arXiv snapshot slice, OpenAlex works, and a file of no known format.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import bibtexparser
import pytest
from click.testing import CliRunner

from rag.cli import main
from rag.config import Settings
from rag.index import Index

LIBRARY = Path(__file__).parent / "data" / "library"
MANIFEST = json.loads((LIBRARY.parent / "library.manifest.json").read_text())


@pytest.fixture(scope="module")
def library(tmp_path_factory, embedder):
    """The library ingested once (a copy, so that tests may remove files)."""
    root = tmp_path_factory.mktemp("lib")
    shutil.copytree(LIBRARY, root / "library")
    index = Index(Settings(data_dir=root / "data"), embedder=embedder)
    report = index.ingest([root / "library"])
    return index, report


def _rag(index, *args, input=None):
    return CliRunner().invoke(main, [args[0], "--data-dir", str(index.settings.data_dir), *args[1:]],
                              input=input)


def test_every_paper_is_ingested_once_and_duplicates_are_reported(library):
    index, report = library
    assert report.errors == []
    assert report.entries == report.added == MANIFEST["unique_papers"] == 11
    assert len(report.duplicates) == len(MANIFEST["duplicates"]) == 4
    for dup in MANIFEST["duplicates"]:
        line, = [d for d in report.duplicates if d.startswith(dup["duplicate_in"]) and
                 dup["paper"][:20].lower() in d.lower()]
        assert f"as {dup['kept_from']} #" in line
    assert "zotero.bib @goodfellow_deep_2016 (Deep Learning): no abstract; skipped" in report.warnings
    assert "notes.docx: not a format rag reads; skipped" in report.warnings
    # Ingesting again changes nothing and reports the same duplicates.
    again = index.ingest([index.sources.paths()["zotero.bib"].parent])
    assert (again.added, again.unchanged, len(again.duplicates)) == (0, 11, 4)


def test_metadata_is_kept_and_cited(library):
    index, _ = library
    by_title = {e.title: e for e in index.store.entries()}
    qlora = by_title["QLoRA: Efficient Finetuning of Quantized LLMs"]
    assert qlora.key == "dettmers_qlora_2023" and qlora.year == "2023"
    assert qlora.author_list[0] == "Dettmers, Tim"
    assert MANIFEST["expected_decoded_fragment"] in qlora.text and "\\" not in qlora.text
    ddpm = by_title["Denoising Diffusion Probabilistic Models"]  # kept from the arXiv snapshot
    assert ddpm.author_list == ["Ho, Jonathan", "Jain, Ajay", "Abbeel, Pieter"]
    assert ddpm.reference(1).startswith("[1] Ho et al. 2020, Denoising Diffusion Probabilistic "
                                        "Models (arXiv) doi:10.48550/arxiv.2006.11239")
    resnet = by_title["Deep Residual Learning for Image Recognition"]
    assert (resnet.doi, resnet.pages) == ("10.1109/cvpr.2016.90", "770–778")
    lora = next(e for e in by_title.values() if e.title.startswith("LoRA"))
    assert lora.text.startswith("An important paradigm")  # the inverted index, read back

    from rag.bibtex import citation_keys, to_bibtex

    entries = [qlora, ddpm, resnet]
    bib = bibtexparser.parse_string(to_bibtex(entries, citation_keys(entries)))
    fields = {e.key: {k: f.value for k, f in e.fields_dict.items()} for e in bib.entries}
    assert "dettmers_qlora_2023" in fields  # the source's own key, unchanged
    assert fields["dettmers_qlora_2023"]["author"].startswith("Dettmers, Tim and Pagnoni")
    assert "99.3\\%" in fields["dettmers_qlora_2023"]["abstract"]
    resnet_fields = next(f for f in fields.values() if f.get("doi") == "10.1109/cvpr.2016.90")
    assert resnet_fields["pages"] == "770--778" and resnet_fields["year"] == "2016"


def test_search_json_carries_bibliographic_metadata(library):
    index, _ = library
    res = _rag(index, "search", "--json", "-k", "2", "low-rank adaptation of large language models")
    assert res.exit_code == 0, res.output
    top = json.loads(res.stdout)["results"][0]
    assert top["title"].startswith("LoRA") and top["label_is_title"]
    assert top["authors"][0] == "Hu, Edward J." and top["year"] == "2021"
    assert top["doi"] == "10.48550/arxiv.2106.09685"
    # Piped plain output: the reference line, never wrapped.
    plain = _rag(index, "search", "-k", "1", "low-rank adaptation of large language models")
    assert "1. Hu et al. 2021, LoRA: Low-Rank Adaptation of Large Language Models" in plain.stdout
    assert all(not line.endswith(" ") for line in plain.stdout.splitlines())


def test_list_show_and_remove(library, tmp_path):
    index, _ = library
    listed = json.loads(_rag(index, "list", "--json").stdout)
    assert {r["source"]: r["entries"] for r in listed["sources"]} == {
        "arxiv.jsonl": 3, "mendeley.ris": 3, "openalex.jsonl": 1, "zotero.bib": 2, "zotero.json": 2}
    assert listed["embedder"].endswith("all-MiniLM-L6-v2")

    shown = _rag(index, "show", "dettmers_qlora_2023")
    assert shown.exit_code == 0 and "Dettmers, Tim; Pagnoni, Artidoro" in shown.stdout
    assert _rag(index, "show", "mendeley.ris#2").stdout.count("BERT") >= 1
    missing = _rag(index, "show", "no_such_key")
    assert missing.exit_code == 1 and "matches no entry" in missing.output

    removed = _rag(index, "remove", "openalex.jsonl")
    assert removed.exit_code == 0 and "removed 1 entries" in removed.stdout
    assert index.store.count() == 10
    assert _rag(index, "remove", "openalex.jsonl").exit_code == 1
    index.ingest([index.sources.paths()["zotero.bib"].parent])  # back as it was
    assert index.store.count() == 11


def test_unknown_format_named_on_the_command_line_is_refused(tmp_path):
    res = CliRunner().invoke(main, ["ingest", "--data-dir", str(tmp_path / "d"),
                                    str(LIBRARY / "notes.docx")])
    assert res.exit_code == 3
    assert "notes.docx: not a format rag reads; give BibTeX (.bib), RIS (.ris)" in res.output
    assert len(res.output.strip().splitlines()) == 2  # the error and the summary


def test_rebuild_rereads_the_recorded_sources_not_the_seeds(library, tmp_path, embedder):
    index, _ = library
    settings = Settings(data_dir=tmp_path / "data")
    fresh = Index(settings, embedder=embedder)
    fresh.ingest([index.sources.paths()["zotero.bib"].parent])
    report = Index(settings, embedder=embedder).ingest(rebuild=True)
    assert report.entries == 11 and len(report.duplicates) == 4
    paths = {e.source.path for e in Index(settings, embedder=embedder).store.entries()}
    assert paths == {"arxiv.jsonl", "mendeley.ris", "openalex.jsonl", "zotero.bib", "zotero.json"}


@pytest.mark.model
def test_review_pipes_the_same_markdown_and_pandoc_renders_author_year(library, tmp_path):
    import pypandoc

    index, _ = library
    md, bib = tmp_path / "r.md", tmp_path / "r.bib"
    table = tmp_path / "t.csv"
    res = _rag(index, "review", "diffusion models for image synthesis", "--cite-style", "pandoc",
               "-o", str(md), "-b", str(bib), "--csv", str(table))
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == md.read_text().strip()  # piped stdout is the file's Markdown
    assert "## Research table" in md.read_text()
    rows = table.read_text().splitlines()
    assert rows[0].startswith("paper,authors,year,doi,key,Problem,Approach,Main result")
    assert any(r.startswith("Denoising Diffusion Probabilistic Models,") for r in rows)
    html = subprocess.run([pypandoc.get_pandoc_path(), str(md), "--citeproc", "--bibliography",
                           str(bib), "-t", "plain"], capture_output=True, text=True, check=True).stdout
    assert "Ho, Jain, and Abbeel 2020" in html or "Rombach et al. 2022" in html, html
    assert "Jonathan Ho 2020" not in html


@pytest.mark.model
def test_declined_review_writes_no_files_and_exits_1(library, tmp_path):
    index, _ = library
    md, bib = tmp_path / "r.md", tmp_path / "r.bib"
    res = _rag(index, "review", "protein folding with graph neural networks", "-o", str(md),
               "-b", str(bib))
    assert res.exit_code == 1, res.output
    assert not md.exists() and not bib.exists()
