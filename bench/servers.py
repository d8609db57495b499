"""Servers against in-process: the same questions answered with generation in
llama-cpp-python's OpenAI-compatible server versus llama.cpp in-process, and the same
searches through a Chroma server versus the embedded store.

    python bench/servers.py

Both servers are started here on free loopback ports and stopped at the end. The
raw baselines are the in-process paths measured in the same run.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _util import median, questions, summary, table  # noqa: E402
from servers import chroma_server, llm_server  # noqa: E402

from rag.answer import Answerer  # noqa: E402
from rag.config import Settings  # noqa: E402
from rag.index import Index  # noqa: E402
from rag.llm import load_model  # noqa: E402
from rag.prompts import load  # noqa: E402


def time_answers(answerer: Answerer, qs: list[str]) -> tuple[list[float], list[float], list]:
    answerer.ask(qs[0])  # warm-up: model load, prompt cache, ONNX session
    first, total, cites = [], [], []
    for q in qs:
        a = answerer.ask(q)
        first.append(a.timings["first_token_s"])
        total.append(a.timings["total_s"])
        cites.append([c["id"] for c in a.to_json()["citations"]])
    return first, total, cites


def time_searches(index: Index, qs: list[str]) -> tuple[list[float], list]:
    index.search(qs[0])
    ms, ids = [], []
    for q in qs:
        t0 = time.perf_counter()
        hits = index.search(q, 5)
        ms.append((time.perf_counter() - t0) * 1000)
        ids.append([h.entry.id for h in hits])
    return ms, ids


def main() -> None:
    qs = [q["question"] for q in questions({"single", "single-paraphrase", "multi"})][::3]
    work = Path(tempfile.mkdtemp(prefix="rag-bench-servers-"))
    local = Index(Settings(data_dir=work / "local"))
    local.ensure_ingested()
    prompts = load()

    with llm_server() as llm_url:
        in_process = Answerer(local, load_model(), prompts)
        served = Answerer(local, load_model(url=llm_url, n_ctx=4096), prompts)
        f_local, t_local, c_local = time_answers(in_process, qs)
        f_srv, t_srv, c_srv = time_answers(served, qs)

    with chroma_server(work / "chroma-server") as chroma_url:
        remote = Index(Settings(data_dir=work / "remote", chroma_url=chroma_url))
        remote.ensure_ingested()
        s_local, ids_local = time_searches(local, qs)
        s_remote, ids_remote = time_searches(remote, qs)

    table(f"Answers: {len(qs)} questions, median seconds", ["backend", "first token", "total"],
          [["in-process llama.cpp (raw)", median(f_local), median(t_local)],
           ["llama-cpp-python server", median(f_srv), median(t_srv)]])
    table(f"Search: {len(qs)} queries, median ms", ["store", "search(q, 5)"],
          [["embedded Chroma (raw)", median(s_local)], ["Chroma server", median(s_remote)]])
    same_cites = sum(a == b for a, b in zip(c_local, c_srv)) / len(qs)
    same_hits = sum(a == b for a, b in zip(ids_local, ids_remote)) / len(qs)
    print(f"\nsame citations in-process vs server: {same_cites:.0%}; "
          f"same top-5 entries embedded vs Chroma server: {same_hits:.0%}")
    summary("servers", {
        "questions": len(qs),
        "first_token_s": {"in_process": round(median(f_local), 3), "server": round(median(f_srv), 3)},
        "total_s": {"in_process": round(median(t_local), 3), "server": round(median(t_srv), 3)},
        "server_total_overhead": round(sum(t_srv) / sum(t_local) - 1, 3),
        "search_ms": {"embedded": round(median(s_local), 2), "chroma_server": round(median(s_remote), 2)},
        "same_citations": same_cites, "same_search_results": same_hits,
    })


if __name__ == "__main__":
    main()
