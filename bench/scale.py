"""How the costs grow with the corpus: synthetic collections of 10k, 100k (, 1M) entries.

    python bench/scale.py [--sizes 10000,100000] [--embed-entries 2000] [--queries 50]
                          [--ask 2] [--work DIR] [--keep] [--reuse] [--skip-ingest]

For each size N, a synthetic corpus is made by recombining the seed sentences: each
entry is 3-5 random sentences of the seed abstracts (seeds/*.txt, read with
rag.corpus) plus a sentence naming a unique term ("Keyword zq0004d2."), so BM25 and
the dense side both have real work. The corpus is written as JSONL (abstracts only;
entry ids are the ones `rag ingest FILE` would give) and recorded as the index's
source, so the CLI never falls back to ingesting the seeds.

Per size, each in its own process so peak RSS is that step's alone:

1. build   DIRECT WRITES, not embedding: every distinct seed sentence is embedded
           once for real (rag.embed.Embedder); each chunk (Index.chunks(entry), as
           ingest cuts them) gets the normalised mean of its sentences' vectors plus
           small noise; Index.store.add(...) in batches of 5,000 entries. Wall time
           and peak RSS of that process.
2. disk    the data dir without models/ (Chroma files + BM25 cache), bytes per entry;
           measured after the first `rag search`, which writes the BM25 cache.
3. cold    `rag search --json --data-dir D -k 5 QUERY` in a new process: the first run
           (the one-time integrity probe in a child, rag/store.py, and the BM25 build
           + cache write, rag/lexical.py) on its own, then the median of 3. Raw
           baselines: `python -c "import chromadb"`, and a new process that opens the
           same Chroma collection and queries one stored vector.
4. warm    in one process: Index(...).search(q, 5) over ~50 varied queries (eval
           questions; every 5th is the unique term of an existing entry alone), p50/p95,
           next to a raw `collection.query` of one vector (n_results=40, the dense pool
           search asks for), one query embedding, and the BM25 scoring alone. Also
           the BM25 load of a new process and the first search. Optionally (--ask N)
           `Answerer.ask` time to first token, next to the same chat model's first
           token on the bare question.
5. ingest  REAL embedding: `rag ingest --json --data-dir D slice.jsonl` of
           --embed-entries new synthetic entries (default 2,000; 20,000 is what the
           issue asks, ~7 min each at ~128 chunks/s) into the size-N index: chunks/s
           from the ingest report, peak RSS of the process. Also into an empty data
           dir (column "empty"), and the raw baseline: Embedder.encode of the same
           chunk texts in this process.

With --reuse, an index kept by an earlier --keep/--reuse run (work/index-N with its
build.json) is measured again without being rebuilt (its build figures are the stored
ones), so that a code change can be measured before and after on the same index;
--skip-ingest leaves out step 5 (which adds entries to the index) and the raw ingest.

The table ends with the ratio of the last size to the first. A size whose direct-write
build is projected (from the previous size, linearly) to take longer than
--max-build-s is skipped and only the projection printed.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import numpy as np  # noqa: E402

import _util  # noqa: E402

BUILD_BATCH = 5_000  # entries per store.add
SEED = 18
NOISE = 0.005  # per-dimension sd of the noise added to a chunk vector (|noise| ~ 0.1)
COLD_QUERY = "1-bit quantization of large language models"
TOKEN = re.compile(r"\bz[qr][0-9a-f]{6}\b")


def token(i: int, prefix: str = "zq") -> str:
    return f"{prefix}{i:06x}"


# -- the synthetic corpus -----------------------------------------------------------
def seed_pool() -> list[str]:
    """Every distinct sentence of the seed abstracts, sorted."""
    from rag import corpus
    from rag.config import Settings
    from rag.text import sentences

    files, _, _ = corpus.discover([Settings().seeds])
    return sorted({s for cf in files for e in corpus.read_file(cf).entries for s in sentences(e.text)})


def synthetic_texts(n: int, pool: list[str], seed: int, prefix: str = "zq"):
    rng = random.Random(seed)
    for i in range(n):
        yield " ".join(rng.sample(pool, rng.randint(3, 5))) + f" Keyword {token(i, prefix)}."


def write_jsonl(path: Path, texts) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"abstract": t}) + "\n")
    tmp.replace(path)


# -- child: build an index by direct writes -----------------------------------------
def child_build(data_dir: Path, corpus_file: Path, pool_file: Path) -> dict:
    from rag import corpus
    from rag.config import Settings
    from rag.embed import Embedder
    from rag.index import Index
    from rag.text import sentences

    pool = json.loads(pool_file.with_suffix(".json").read_text())
    vec_of = dict(zip(pool, np.load(pool_file)))
    embedder = Embedder(data_dir / "models")
    index = Index(Settings(data_dir=data_dir), embedder=embedder)
    # Chunks are cut from the same seed sentences over and over: count tokens once each.
    embedder.count_tokens = functools.lru_cache(maxsize=None)(embedder.count_tokens)
    rng = np.random.default_rng(SEED)
    key = str(corpus_file.resolve())
    t_chunk = t_vec = t_add = 0.0
    n_entries = n_chunks = n_real = 0
    t0 = time.perf_counter()

    def flush(batch):
        nonlocal t_chunk, t_vec, t_add, n_chunks, n_real
        a = time.perf_counter()
        chunks = [c for e in batch for c in index.chunks(e)]
        b = time.perf_counter()
        parts = [[s for s in sentences(c.text) if not TOKEN.search(s)] or sentences(c.text)
                 for c in chunks]
        # A piece the chunker cut from an over-long sentence (or a chunk that is only
        # the keyword sentence) is not in the pool: embed it for real, once.
        missing = sorted({s for p in parts for s in p} - vec_of.keys())
        if missing:
            vec_of.update(zip(missing, embedder.encode(missing)))
            n_real += len(missing)
        vectors = np.stack([np.mean([vec_of[s] for s in p], axis=0) for p in parts])
        vectors += rng.normal(0, NOISE, vectors.shape)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        c = time.perf_counter()
        index.store.add(batch, chunks, vectors.astype(np.float32))
        d = time.perf_counter()
        t_chunk += b - a
        t_vec += c - b
        t_add += d - c
        n_chunks += len(chunks)

    batch = []
    with corpus_file.open(encoding="utf-8") as f:
        for ordinal, line in enumerate(f, 1):
            # corpus._entry: the id and label `rag ingest FILE` gives an abstract-only record.
            batch.append(corpus._entry(key, ordinal, json.loads(line)["abstract"]))
            if len(batch) == BUILD_BATCH:
                flush(batch)
                n_entries += len(batch)
                batch = []
                print(f"\r  build {data_dir.name}: {n_entries:,} entries, {n_chunks:,} chunks, "
                      f"{time.perf_counter() - t0:.0f} s", end="", file=sys.stderr, flush=True)
    if batch:
        flush(batch)
        n_entries += len(batch)
    index.sources.record({key: corpus_file})
    print(file=sys.stderr)
    return {"entries": index.store.count(), "written": n_entries, "chunks": n_chunks,
            "seconds": time.perf_counter() - t0, "chunk_s": t_chunk, "vectors_s": t_vec,
            "add_s": t_add, "embedded_for_real": n_real}


# -- child: warm search (and ask) in one process ------------------------------------
def child_warm(data_dir: Path, n: int, n_queries: int, n_ask: int) -> dict:
    from rag.config import Settings
    from rag.index import Index
    from rag.lexical import terms  # noqa: F401  (imported with the index anyway)

    rng = random.Random(SEED)
    questions = [q["question"] for q in _util.questions()]
    picks = [questions[int(i)] for i in np.linspace(0, len(questions) - 1, n_queries)]
    # Every 5th query is an entry's unique term alone: an exact-name lookup ("BiLLM").
    queries = [token(rng.randrange(n)) if i % 5 == 4 else q for i, q in enumerate(picks)]

    out: dict = {}
    t = time.perf_counter()
    index = Index(Settings(data_dir=data_dir))
    index.store
    out["open_s"] = time.perf_counter() - t
    t = time.perf_counter()
    lexical = index.lexical()  # the BM25 cache the first cold run wrote
    out["bm25_load_s"] = time.perf_counter() - t
    index.embedder.encode(["warm-up"])
    t = time.perf_counter()
    index.search(COLD_QUERY, 5)
    out["first_search_s"] = time.perf_counter() - t
    collection = index.store._chunks  # the underlying Chroma collection (raw baseline)
    vectors = index.embedder.encode(queries)
    collection.query(query_embeddings=[vectors[0].tolist()], n_results=40)
    lat: dict[str, list[float]] = {"ours": [], "raw_query": [], "embed": [], "bm25": []}
    token_rank1 = token_top5 = 0
    for q, v in zip(queries, vectors):  # interleaved: outside load hits all alike
        t = time.perf_counter()
        hits = index.search(q, 5)
        lat["ours"].append(time.perf_counter() - t)
        if TOKEN.search(q):  # is the entry that holds the unique term found?
            found = [TOKEN.search(q).group(0) in h.entry.text for h in hits]
            token_rank1 += bool(found and found[0])
            token_top5 += any(found)
        t = time.perf_counter()
        collection.query(query_embeddings=[v.tolist()], n_results=40)
        lat["raw_query"].append(time.perf_counter() - t)
        t = time.perf_counter()
        index.embedder.encode([q])
        lat["embed"].append(time.perf_counter() - t)
        t = time.perf_counter()
        lexical.scores(q)
        lat["bm25"].append(time.perf_counter() - t)
    out.update({f"{k}_p50_ms": _util.pct(v, 50) * 1000 for k, v in lat.items()})
    out.update({f"{k}_p95_ms": _util.pct(v, 95) * 1000 for k, v in lat.items()})
    out["queries"] = len(queries)
    out["token_queries"] = sum(1 for q in queries if TOKEN.search(q))
    out["token_top1"] = token_rank1
    out["token_top5"] = token_top5

    if n_ask:
        from rag import prompts
        from rag.answer import Answerer
        from rag.llm import load_model

        t = time.perf_counter()
        model = load_model()
        out["model_load_s"] = time.perf_counter() - t
        answerer = Answerer(index, model, prompts.load())
        asks = [q for q in picks if not TOKEN.search(q)][:n_ask]
        first, raw_first = [], []
        for q in asks:
            got: list[float] = []
            t = time.perf_counter()
            answerer.ask(q, on_token=lambda tok: got.append(time.perf_counter()) if not got else None)
            first.append((got[0] if got else time.perf_counter()) - t)
            t = time.perf_counter()
            for _ in model.stream("Answer briefly.", q, 8):
                break
            raw_first.append(time.perf_counter() - t)
        out["ask_first_token_s"] = statistics.median(first)
        out["raw_first_token_s"] = statistics.median(raw_first)
        out["asks"] = len(asks)
    return out


# -- the parent ----------------------------------------------------------------------
RAW_COLD = """
import sys
import chromadb
from chromadb.config import Settings
c = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False))
col = c.get_collection(sys.argv[2])
v = col.get(limit=1, include=["embeddings"])["embeddings"][0]
col.query(query_embeddings=[list(v)], n_results=40)
"""


def child(args: list[str], what: str, timeout: float = 7200) -> tuple[dict, _util.Run]:
    """Run this script's child step ``args`` in a measured process; its JSON result."""
    run = _util.check(_util.run_measured([sys.executable, __file__, *args], timeout), what)
    sys.stderr.write(run.stderr)
    return json.loads(run.stdout.strip().splitlines()[-1]), run


def du(path: Path, skip: str = "models") -> int:
    total = 0
    for p in path.rglob("*"):
        if p.is_file() and skip not in p.relative_to(path).parts[:1]:
            total += p.stat().st_blocks * 512
    return total


def fresh_data_dir(path: Path, onnx: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    (path / "models").mkdir(parents=True)
    shutil.copy2(onnx, path / "models" / onnx.name)  # no ONNX export (torch) per dir
    return path


def real_ingest(data_dir: Path, slice_file: Path, chunks_before: int) -> dict:
    run = _util.check(_util.run_measured(_util.rag_command() + [
        "ingest", "--json", "--data-dir", str(data_dir), str(slice_file)], 7200), "rag ingest")
    rep = json.loads(run.stdout.strip().splitlines()[-1])
    new = rep["chunks"] - chunks_before
    return {"added": rep["added"], "chunks": new, "seconds": rep["seconds"], "wall_s": run.seconds,
            "chunks_per_s": new / rep["seconds"], "peak_rss_mb": run.max_rss_mb}


def cold(data_dir: Path, repeats: int = 3) -> dict:
    rag = _util.rag_command() + ["search", "--json", "--data-dir", str(data_dir), "-k", "5", COLD_QUERY]
    first = _util.run_timed(rag)
    if first.returncode not in (0, 1):
        _util.check(first, "rag search")
    runs = [_util.check(_util.run_timed(rag), "rag search").seconds for _ in range(repeats)]
    chroma = [_util.check(_util.run_timed([sys.executable, "-c", "import chromadb"]), "import").seconds
              for _ in range(repeats)]
    raw = [_util.check(_util.run_timed([sys.executable, "-c", RAW_COLD, str(data_dir / "chroma"),
                                        "abstracts_chunks"]), "raw chroma").seconds
           for _ in range(repeats)]
    return {"first_s": first.seconds, "median_s": statistics.median(runs),
            "import_chromadb_s": statistics.median(chroma), "raw_open_query_s": statistics.median(raw)}


def fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if isinstance(v, int) or (isinstance(v, float) and v >= 1000):
        return f"{v:,.0f}"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}" if v >= 0.1 else f"{v:.3f}"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1].startswith("_"):
        step, *rest = sys.argv[1:]
        if step == "_build":
            res = child_build(Path(rest[0]), Path(rest[1]), Path(rest[2]))
        else:
            res = child_warm(Path(rest[0]), int(rest[1]), int(rest[2]), int(rest[3]))
        print(json.dumps(res))
        return

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated entry counts")
    ap.add_argument("--embed-entries", type=int, default=2000,
                    help="entries ingested with real embedding per size (issue: 20000)")
    ap.add_argument("--queries", type=int, default=50, help="warm-search queries per size")
    ap.add_argument("--ask", type=int, default=2, help="questions timed to first token (0: skip)")
    ap.add_argument("--work", type=Path, default=_util.CACHE / "scale", help="where the corpora and indexes go")
    ap.add_argument("--keep", action="store_true", help="keep the indexes (default: delete each after use)")
    ap.add_argument("--reuse", action="store_true",
                    help="measure an index kept by an earlier --keep/--reuse run again, unbuilt (implies --keep)")
    ap.add_argument("--skip-ingest", action="store_true",
                    help="skip the real-embedding ingests (they add entries to the index)")
    ap.add_argument("--max-build-s", type=float, default=1800,
                    help="skip a size whose build is projected to take longer")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    contention = _util.Contention()

    from rag.embed import Embedder

    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    embedder = Embedder()  # the user cache's ONNX file (exported once if missing)
    pool = seed_pool()
    pool_vecs = embedder.encode(pool)
    pool_file = work / "pool.npy"
    np.save(pool_file, pool_vecs)
    pool_file.with_suffix(".json").write_text(json.dumps(pool))
    onnx = embedder.onnx_file
    print(f"seed sentences: {len(pool)} distinct, embedded for real in {time.perf_counter() - t0:.1f} s "
          f"(model {embedder.name})", flush=True)

    # The real-embedding slice: other unique terms ("zr..."), so no id collides.
    slice_file = work / f"slice-{args.embed_entries}.jsonl"
    write_jsonl(slice_file, synthetic_texts(args.embed_entries, pool, SEED + 1, "zr"))
    # Raw baseline of the slice's embedding: the same chunk texts, Embedder.encode.
    from rag import corpus
    from rag.config import Settings
    from rag.index import Index

    cut = Index(Settings(data_dir=work / "unused"), embedder=embedder)
    slice_chunks = [c.text for e in corpus.read_file(corpus.CorpusFile(slice_file, str(slice_file))).entries
                    for c in cut.chunks(e)]
    raw_encode = None
    if not args.skip_ingest:
        t = time.perf_counter()
        embedder.encode(slice_chunks)
        raw_encode = len(slice_chunks) / (time.perf_counter() - t)
    if args.skip_ingest:
        empty = {"chunks_per_s": None, "peak_rss_mb": None}
    else:
        empty = real_ingest(fresh_data_dir(work / "empty", onnx), slice_file, 0)
        shutil.rmtree(work / "empty", ignore_errors=True)
        print(f"real ingest of {args.embed_entries:,} entries ({empty['chunks']:,} chunks) into an empty "
              f"index: {empty['chunks_per_s']:.0f} chunks/s; raw Embedder.encode {raw_encode:.0f} chunks/s",
              flush=True)

    results: dict[int, dict] = {}
    prev = None
    for n in sizes:
        if prev is not None:
            projected = results[prev]["build"]["seconds"] * n / prev
            if projected > args.max_build_s:
                print(f"\n{n:,}: SKIPPED, build projected at {projected / 60:.0f} min "
                      f"(linear from {prev:,}) > --max-build-s {args.max_build_s:.0f}", flush=True)
                results[n] = {"skipped": projected}
                continue
        print(f"\n== {n:,} entries ==", flush=True)
        corpus_file = work / f"corpus-{n}.jsonl"
        data = work / f"index-{n}"
        r: dict = {}
        if args.reuse and (data / "build.json").exists():
            r["build"] = json.loads((data / "build.json").read_text())
            print(f"  reused {data} (built earlier: {r['build']['seconds']:.0f} s)", flush=True)
        else:
            write_jsonl(corpus_file, synthetic_texts(n, pool, SEED))
            data = fresh_data_dir(data, onnx)
            r["build"], run = child(["_build", str(data), str(corpus_file), str(pool_file)], "build")
            r["build"]["peak_rss_mb"] = run.max_rss_mb
            (data / "build.json").write_text(json.dumps(r["build"]))
            print(f"  build {r['build']['seconds']:.0f} s, {r['build']['chunks']:,} chunks, "
                  f"peak RSS {run.max_rss_mb:.0f} MB", flush=True)
        r["cold"] = cold(data)
        print(f"  cold: first {r['cold']['first_s']:.2f} s, median {r['cold']['median_s']:.2f} s", flush=True)
        r["disk"] = {"chroma": du(data / "chroma"), "bm25": du(data / "cache"), "total": du(data)}
        r["warm"], run = child(["_warm", str(data), str(n), str(args.queries), str(args.ask)], "warm search")
        r["warm"]["peak_rss_mb"] = run.max_rss_mb
        print(f"  warm p50 {r['warm']['ours_p50_ms']:.1f} ms", flush=True)
        if args.skip_ingest:
            r["ingest"] = {"chunks_per_s": None, "peak_rss_mb": None}
        else:
            r["ingest"] = real_ingest(data, slice_file, r["build"]["chunks"])
            print(f"  real ingest {r['ingest']['chunks_per_s']:.0f} chunks/s", flush=True)
        results[n] = r
        prev = n
        if not (args.keep or args.reuse):
            shutil.rmtree(data, ignore_errors=True)
            corpus_file.unlink(missing_ok=True)

    done = [n for n in sizes if "build" in results.get(n, {})]
    E = args.embed_entries

    def row(label, get):
        vals = [get(results[n]) for n in done]
        ratio = (f"{vals[-1] / vals[0]:.2f}" if len(vals) > 1 and isinstance(vals[0], (int, float))
                 and isinstance(vals[-1], (int, float)) and vals[0] else "")
        return [label, *[fmt(v) for v in vals], ratio]

    w = lambda k: (lambda r: r["warm"].get(k))  # noqa: E731
    rows = [
        row("entries", lambda r: r["build"]["entries"]),
        row("chunks  [direct writes]", lambda r: r["build"]["chunks"]),
        row("build s  [direct writes]", lambda r: r["build"]["seconds"]),
        row("  of which store.add s", lambda r: r["build"]["add_s"]),
        row("  of which Index.chunks s", lambda r: r["build"]["chunk_s"]),
        row("build peak RSS MB  [direct writes]", lambda r: r["build"]["peak_rss_mb"]),
        row(f"ingest chunks/s, real embed, +{E:,} entries", lambda r: r["ingest"]["chunks_per_s"]),
        row("  raw: Embedder.encode chunks/s (same chunks)", lambda r: raw_encode),
        row("  raw: same ingest into an empty index", lambda r: empty["chunks_per_s"]),
        row("ingest peak RSS MB (rag ingest)", lambda r: r["ingest"]["peak_rss_mb"]),
        row("  raw: same ingest into an empty index", lambda r: empty["peak_rss_mb"]),
        row("disk MB, data dir without models/", lambda r: r["disk"]["total"] / 2**20),
        row("  of which Chroma MB", lambda r: r["disk"]["chroma"] / 2**20),
        row("  of which BM25 cache MB", lambda r: r["disk"]["bm25"] / 2**20),
        row("disk bytes/entry", lambda r: r["disk"]["total"] / r["build"]["entries"]),
        row("cold rag search, first run s (probe+BM25 build)", lambda r: r["cold"]["first_s"]),
        row("cold rag search, median of 3 s", lambda r: r["cold"]["median_s"]),
        row('  raw: python -c "import chromadb" s', lambda r: r["cold"]["import_chromadb_s"]),
        row("  raw: new process, open Chroma + 1 query s", lambda r: r["cold"]["raw_open_query_s"]),
        row("new process: BM25 cache load s", w("bm25_load_s")),
        row("new process: first search s", w("first_search_s")),
        row("warm search p50 ms", w("ours_p50_ms")),
        row("warm search p95 ms", w("ours_p95_ms")),
        row("  raw: collection.query(1 vector, n=40) p50 ms", w("raw_query_p50_ms")),
        row("  raw: embed one query p50 ms", w("embed_p50_ms")),
        row("  part: BM25 scores p50 ms", w("bm25_p50_ms")),
        row("warm process peak RSS MB", w("peak_rss_mb")),
    ]
    if args.ask:
        rows += [row(f"ask first token s (median of {args.ask})", w("ask_first_token_s")),
                 row("  raw: same model, bare question s", w("raw_first_token_s"))]
    k = lambda n: f"{n / 1000:g}k"  # noqa: E731
    header = ["figure", *[f"{n:,}" for n in done],
              f"ratio {k(done[-1])}/{k(done[0])}" if len(done) > 1 else ""]
    _util.table(f"Scale (synthetic corpora; [direct writes] = vectors written straight into the store, "
                f"not embedded; real-embedding ingest of {E:,} entries)", header, rows)
    for n in sizes:
        if "skipped" in results.get(n, {}):
            print(f"  {n:,}: not built (projected build {results[n]['skipped'] / 60:.0f} min)")
    for n in done:
        w_ = results[n]["warm"]
        print(f"  {n:,}: {w_['token_queries']} queries carry an entry's unique term: that entry ranked 1st in "
              f"{w_['token_top1']}, in the top 5 in {w_['token_top5']}; "
              f"{results[n]['build']['embedded_for_real']} chunk pieces embedded for real in the build")
    others = contention.report()
    _util.summary("scale", {"sizes": done, "embed_entries": E, "raw_encode_chunks_per_s": raw_encode,
                            "empty_ingest": empty, "results": {str(n): results[n] for n in done},
                            "other_cpu_share": round(others, 3)})


if __name__ == "__main__":
    main()
