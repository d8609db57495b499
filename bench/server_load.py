"""Past one machine: a Chroma server, several processes searching while one ingests.

    python bench/server_load.py [--base 2000] [--ingest 1000] [--searchers 4]

A Chroma server (``chroma run``, loopback, a free port) gets a base index of --base
synthetic abstracts (bench/scale.py's recipe: seed sentences recombined, each with a
unique term), ingested for real. Then, each in its own process, --searchers clients
run `Index.search` over eval questions and unique terms:

1. idle: a fixed number of searches each, nothing else running (the baseline);
2. loaded: searching until one more process (`rag ingest --chroma-url ...`) has
   ingested --ingest new abstracts with real embedding.

Printed: search latency p50/p95 idle and loaded (and their ratio), searches and
errors per phase (an error is any exception a search raised), the ingest's chunks/s,
and whether the final index is exact: the entry count is base + ingest, the ids are
distinct, every entry's chunks are all there, and each new abstract's unique term
finds it first. All processes share one data dir (the embedder's files and the BM25
cache, which every write makes stale), as clients on one machine would.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import _util  # noqa: E402
from scale import seed_pool, synthetic_texts, token, write_jsonl  # noqa: E402
from servers import chroma_server  # noqa: E402

IDLE_SEARCHES = 25


def searcher(url: str, data_dir: str, queries: list[str], stop: str, count: int, out: str) -> None:
    """Search until ``stop`` exists (or ``count`` times); latencies and errors to ``out``."""
    from rag.config import Settings
    from rag.index import Index

    index = Index(Settings(data_dir=Path(data_dir), chroma_url=url))
    index.search(queries[0], 5)  # warm: model, BM25 cache
    ms, errors, i = [], [], 0
    while (count and i < count) or (not count and not Path(stop).exists()):
        q = queries[i % len(queries)]
        i += 1
        t0 = time.perf_counter()
        try:
            index.search(q, 5)
            ms.append((time.perf_counter() - t0) * 1000)
        except Exception as e:  # counted, not fatal: the bench reports every one
            errors.append(f"{type(e).__name__}: {e}"[:200])
    Path(out).write_text(json.dumps({"ms": ms, "errors": errors}))


def run_searchers(url: str, data_dir: Path, queries: list[str], n: int, stop: Path, count: int,
                  work: Path, phase: str) -> list[dict]:
    ctx = mp.get_context("spawn")
    outs = [work / f"{phase}-{i}.json" for i in range(n)]
    procs = [ctx.Process(target=searcher, args=(url, str(data_dir), queries[i::n] + queries[:i], str(stop),
                                                 count, str(o))) for i, o in enumerate(outs)]
    for p in procs:
        p.start()
    return procs, outs


def collect(procs, outs) -> tuple[list[float], list[str]]:
    for p in procs:
        p.join()
    got = [json.loads(o.read_text()) for o in outs]
    return [m for g in got for m in g["ms"]], [e for g in got for e in g["errors"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", type=int, default=2000, help="abstracts in the index before the load")
    ap.add_argument("--ingest", type=int, default=1000, help="abstracts ingested during the load")
    ap.add_argument("--searchers", type=int, default=4)
    args = ap.parse_args()

    from rag.config import Settings
    from rag.index import Index

    work = Path(tempfile.mkdtemp(prefix="rag-bench-server-load-"))
    pool = seed_pool()
    base, extra = work / "base.jsonl", work / "extra.jsonl"
    write_jsonl(base, synthetic_texts(args.base, pool, 1, "zq"))
    write_jsonl(extra, synthetic_texts(args.ingest, pool, 2, "zr"))
    questions = [q["question"] for q in _util.questions()][::2]
    queries = [token(i * 7 % args.base, "zq") if i % 5 == 4 else q for i, q in enumerate(questions)]
    data_dir = work / "client"
    with chroma_server(work / "chroma-server") as url:
        index = Index(Settings(data_dir=data_dir, chroma_url=url))
        t0 = time.perf_counter()
        index.ingest([base])
        print(f"base: {index.store.count():,} entries ingested in {time.perf_counter() - t0:.0f} s", flush=True)
        chunks_before = index.store.chunk_count()

        stop = work / "stop"
        idle_ms, idle_err = collect(*run_searchers(url, data_dir, queries, args.searchers, stop,
                                                   IDLE_SEARCHES, work, "idle"))
        procs, outs = run_searchers(url, data_dir, queries, args.searchers, stop, 0, work, "loaded")
        t0 = time.perf_counter()
        rag = shutil.which("rag") or str(Path(sys.executable).parent / "rag")
        ing = subprocess.run([rag, "ingest", "--json", "--chroma-url", url,
                              "--data-dir", str(data_dir), str(extra)], capture_output=True, text=True)
        ingest_s = time.perf_counter() - t0
        stop.touch()
        load_ms, load_err = collect(procs, outs)

        report = json.loads(ing.stdout) if ing.returncode == 0 else {"error": ing.stderr[-300:]}
        final = Index(Settings(data_dir=data_dir, chroma_url=url))
        ids = final.store._get(final.store._entries)["ids"]
        repaired = final.store.repair()  # counts rows of partial entries or orphan chunks
        found = sum(final.search(token(i, "zr"), 1)[0].entry.text.endswith(f"Keyword {token(i, 'zr')}.")
                    for i in range(0, args.ingest, max(1, args.ingest // 50)))
        probes = len(range(0, args.ingest, max(1, args.ingest // 50)))

    print(f"\nServer under load ({args.searchers} searching processes; one `rag ingest` of "
          f"{args.ingest:,} abstracts, real embedding; base {args.base:,})")
    rows = [["search p50 ms", _util.pct(idle_ms, 50), _util.pct(load_ms, 50),
             _util.pct(load_ms, 50) / _util.pct(idle_ms, 50)],
            ["search p95 ms", _util.pct(idle_ms, 95), _util.pct(load_ms, 95),
             _util.pct(load_ms, 95) / _util.pct(idle_ms, 95)],
            ["searches", len(idle_ms), len(load_ms), ""],
            ["search errors", len(idle_err), len(load_err), ""]]
    _util.table("", ["figure", "idle", "while ingesting", "ratio"], rows)
    added = report.get("chunks", chunks_before) - chunks_before
    print(f"\n  ingest: {ingest_s:.0f} s, exit {ing.returncode}, added {report.get('added')} entries, "
          f"{added:,} chunks ({added / ingest_s:.0f} chunks/s while searched), errors {len(report.get('errors') or [])}")
    print(f"  final count {len(ids):,} (expected {args.base + args.ingest:,}), distinct ids "
          f"{len(set(ids)):,}, rows a repair would drop {repaired}")
    print(f"  new abstracts found first by their unique term: {found}/{probes}")
    for e in sorted(set(idle_err + load_err))[:5]:
        print(f"  error: {e}")
    print(json.dumps({"bench": "server_load", "idle_ms": [_util.pct(idle_ms, 50), _util.pct(idle_ms, 95)],
                      "loaded_ms": [_util.pct(load_ms, 50), _util.pct(load_ms, 95)],
                      "searches": [len(idle_ms), len(load_ms)], "errors": [len(idle_err), len(load_err)],
                      "ingest_s": ingest_s, "chunks_added": added, "count": len(ids), "expected": args.base + args.ingest,
                      "distinct": len(set(ids)), "repaired": repaired, "found": [found, probes]}))


if __name__ == "__main__":
    main()
