"""The same pipeline on real servers: a Chroma server instead of the embedded store,
and llama-cpp-python's OpenAI-compatible server instead of in-process generation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
from click.testing import CliRunner

from rag.answer import Answerer
from rag.config import DEFAULT_SEEDS, Settings
from rag.evaluate import load_questions
from rag.index import Index
from rag.prompts import load

from fakes import FakeModel
from servers import chroma_server, llm_server

SEED_FILES = sorted(DEFAULT_SEEDS.glob("*.txt"))


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory):
    with chroma_server(tmp_path_factory.mktemp("chroma-server")) as url:
        yield url


@pytest.fixture(scope="module")
def llm_url():
    with llm_server() as url:
        yield url


def _server_index(chroma_url, data_dir, embedder=None, collection=None) -> Index:
    settings = Settings(data_dir=data_dir, chroma_url=chroma_url,
                        collection=collection or f"t{uuid.uuid4().hex[:8]}")
    return Index(settings, embedder=embedder)


def test_server_store_gives_the_same_results_as_the_embedded_one(chroma_url, seeded_index, tmp_path, embedder):
    served = _server_index(chroma_url, tmp_path, embedder)
    report = served.ingest()
    assert (report.added, report.entries) == (57, 57)
    assert served.ingest().unchanged == 57  # incremental there too
    questions = [q.question for q in load_questions(DEFAULT_SEEDS.parent / "eval" / "questions.jsonl")][::6]
    for q in questions:
        local = [(h.entry.id, round(h.score, 4)) for h in seeded_index.search(q, 10)]
        remote = [(h.entry.id, round(h.score, 4)) for h in served.search(q, 10)]
        assert local == remote, q
    a = Answerer(seeded_index, FakeModel("Nothing verifiable."), load())
    b = Answerer(served, FakeModel("Nothing verifiable."), load())
    for q in questions[:6]:
        ja, jb = a.ask(q).to_json(), b.ask(q).to_json()
        assert ja["citations"] == jb["citations"] and ja["answer"] == jb["answer"]


def test_two_processes_ingesting_into_one_server_take_turns_and_lose_nothing(chroma_url, tmp_path):
    collection = f"t{uuid.uuid4().hex[:8]}"
    index = _server_index(chroma_url, tmp_path / "data", collection=collection)
    index.embedder.encode(["warm the ONNX export once for both processes"])
    index.store  # create the collection before the race: creation is not what is tested
    cmd = [sys.executable, "-m", "rag.cli", "ingest", "--wait", "--json", "--data-dir",
           str(tmp_path / "data"), "--chroma-url", chroma_url]
    env = {**os.environ, "RAG_COLLECTION": collection}
    # Overlapping halves: the middle file is ingested by both at once.
    procs = [subprocess.Popen(cmd + [str(p) for p in files], stdout=subprocess.PIPE, env=env)
             for files in (SEED_FILES[:2], SEED_FILES[1:])]
    outs = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    entries = index.store.entries()
    assert len(entries) == 57 == len({e.id for e in entries})
    assert index.store.chunk_count() == sum(len(index.chunks(e)) for e in entries)
    # One writer at a time: the second sees the shared file's entries as stored.
    assert sum(o["added"] for o in outs) == 57


def test_server_down_is_a_one_line_error(tmp_path):
    from rag.cli import main

    res = CliRunner().invoke(main, ["search", "--data-dir", str(tmp_path), "--chroma-url",
                                    "http://127.0.0.1:9", "bandits"])
    assert res.exit_code == 7  # a server error
    assert res.output.strip().count("\n") == 0 and "http://127.0.0.1:9" in res.output


@pytest.mark.model
def test_ask_through_the_llama_cpp_server(llm_url, seeded_index):
    from rag.cli import main

    res = CliRunner().invoke(main, ["ask", "--json", "--data-dir", str(seeded_index.settings.data_dir),
                                    "--llm-url", llm_url,
                                    "How does BiLLM achieve 1-bit post-training quantization of LLMs?"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert not data["refused"] and data["citations"][0]["label"] == "BiLLM"
    assert all(s["status"] in ("verified", "quoted") and s["cites"] for s in data["sentences"])
    assert {c["id"] for c in data["citations"]} <= {r["id"] for r in data["retrieved"]}
    assert data["model"]["path"].startswith(llm_url)
    refused = CliRunner().invoke(main, ["ask", "--json", "--data-dir", str(seeded_index.settings.data_dir),
                                        "--llm-url", llm_url, "What is the best sourdough bread recipe?"])
    assert json.loads(refused.stdout)["refused"]
