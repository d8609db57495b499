"""The int8-quantized embedder against the fp32 one: speed, retrieval, vector drift.

    python bench/embed_int8.py [--rounds 5] [--texts 2000] [--variants]

Both models run in this one process, with the same onnxruntime thread settings.

(a) Throughput: ``Embedder.encode`` chunks/s over the real chunks of the bundled seeds
    (``Index.chunks`` of every seed entry), repeated to about ``--texts`` texts; the
    two models alternate over ``--rounds`` rounds (the first of each round swaps) and
    the median round counts; per-round ratios are shown too. Target: int8/fp32 >= 1.7.
(b) Retrieval on every question set in eval/ (questions.jsonl, holdout*.jsonl; the
    topics-*.jsonl files are review topics, which ``rag eval`` does not read): a fresh
    index of the seeds per model in a temporary data dir, then exactly what
    ``rag eval --retrieval-only`` computes (search with k=10, ``retrieval_metrics``,
    ``Scores``), per set and per question kind, fp32 and int8 side by side.
(c) Verdict: adopt int8 only if, on every set, paraphrased R@1 (kind
    single-paraphrase) and multi-paper R@5 (kind multi) are at most 0.01 below fp32,
    and the speed ratio is >= 1.7.
(d) Cosine between the fp32 and int8 vectors of the same seed chunks.

``--variants`` also scores, on retrieval and cosine alone, every quantization
recipe tried (QInt8/QUInt8 weights, per tensor/per channel, all ops or MatMuls
only), as the choice of ``rag.embed.QUANTIZATION`` was made; their speed is one
fp32/variant pair of passes over the unique chunks (rough).
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import numpy as np

import _util
from rag import corpus
from rag.answer import REFUSE_BELOW
from rag.config import Settings
from rag.embed import QUANTIZATION, Embedder, quantize_onnx
from rag.evaluate import Scores, load_questions, retrieval_metrics
from rag.index import Index

TARGET_RATIO = 1.7
TOLERANCE = 0.01
# (kind, metric) that must hold on every set.
GATES = [("single-paraphrase", "recall@1"), ("multi", "recall@5")]
EVAL_SETS = sorted(p for p in (_util.ROOT / "eval").glob("*.jsonl") if not p.name.startswith("topics"))
# Every recipe tried (quantize_dynamic arguments); the last but one is QUANTIZATION.
VARIANTS = [{"weight_type": w, "per_channel": pc} for w in ("QInt8", "QUInt8") for pc in (False, True)] + [
    {"weight_type": w, "per_channel": True, "op_types_to_quantize": ["MatMul"]} for w in ("QInt8", "QUInt8")]


def seed_chunks(index: Index) -> list[str]:
    files, _, _ = corpus.discover([index.settings.seeds])
    return [c.text for cf in files for e in corpus.read_file(cf).entries for c in index.chunks(e)]


def throughput(embedders: dict[str, Embedder], texts: list[str], rounds: int) -> dict[str, list[float]]:
    """Seconds per encode of ``texts``, per model; rounds interleaved."""
    for emb in embedders.values():
        emb.encode(texts[:64])  # warm-up: session load, first runs
    out: dict[str, list[float]] = {k: [] for k in embedders}
    names = list(embedders)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            t0 = time.perf_counter()
            embedders[name].encode(texts)
            out[name].append(time.perf_counter() - t0)
    return out


def evaluate(index: Index, path: Path) -> dict[str, dict[str, float]]:
    """What `rag eval PATH --retrieval-only` computes (split all, k default)."""
    table = Scores()
    for q in load_questions(path, "all"):
        hits = index.search(q.question, 10)
        metrics = {"declined": float(not hits or hits[0].score < REFUSE_BELOW)}
        if q.gold:
            metrics |= retrieval_metrics(q, hits)
        table.add(q, metrics)
    return table.summary()


def retrieval(embedder: Embedder) -> dict[str, dict[str, dict[str, float]]]:
    index = Index(Settings(data_dir=_util.fresh_dir("bench-int8-index-")), embedder=embedder)
    index.ingest()
    return {p.name: evaluate(index, p) for p in EVAL_SETS}


def gate_failures(base: dict, other: dict) -> list[str]:
    """Gated figures of ``other`` more than TOLERANCE below ``base``."""
    return [f"{s} {kind} {m}: {other[s][kind][m]:.3f} vs {base[s][kind][m]:.3f}"
            for s in base for kind, m in GATES
            if other[s][kind][m] < base[s][kind][m] - TOLERANCE - 1e-9]


def cosines(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    cos = (a * b).sum(axis=1)  # both unit length
    return float(cos.min()), float(cos.mean()), float(cos.max())


def metrics_table(name: str, fp: dict, q8: dict) -> None:
    rows = []
    for kind, row in fp.items():
        other = q8[kind]

        def d(m):
            return f"{other[m] - row[m]:+.3f}" if m in row else ""

        def v(r, m):
            return r[m] if m in r else ""

        rows.append([kind, int(row["n"]), v(row, "recall@1"), v(other, "recall@1"), d("recall@1"),
                     v(row, "recall@5"), v(other, "recall@5"), d("recall@5"),
                     d("recall@10"), d("mrr"), v(row, "declined"), d("declined")])
    _util.table(f"(b) {name}", ["kind", "n", "R@1 fp32", "R@1 int8", "d", "R@5 fp32", "R@5 int8", "d",
                                "d R@10", "d MRR", "declined fp32", "d"], rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timed rounds per model")
    ap.add_argument("--texts", type=int, default=2000, help="about how many texts per timed encode")
    ap.add_argument("--variants", action="store_true", help="also score every quantization recipe")
    args = ap.parse_args()
    contention = _util.Contention()

    # A private model cache holding a copy of the fp32 export (made first if the user
    # cache has none), so that deriving the int8 file is timed here and nothing is left.
    cache = _util.fresh_dir("bench-int8-models-")
    fp32 = Embedder(cache)
    user_fp32 = Embedder().fp32_file
    if user_fp32.exists():
        shutil.copy2(user_fp32, fp32.fp32_file)
    t0 = time.perf_counter()
    fp32.encode(["warm-up"])
    export_s = time.perf_counter() - t0
    q8 = Embedder(cache, quantized=True)
    t0 = time.perf_counter()
    q8.encode(["warm-up"])
    quantize_s = time.perf_counter() - t0
    models = {"fp32": fp32, "int8": q8}
    print(f"int8 recipe {QUANTIZATION}:\n  derived in {quantize_s:.1f} s; files "
          f"{fp32.onnx_file.stat().st_size / 1e6:.0f} MB fp32, {q8.onnx_file.stat().st_size / 1e6:.0f} MB int8"
          f"{'' if user_fp32.exists() else f' (fp32 exported in {export_s:.0f} s)'}")

    # (a) throughput
    unique = seed_chunks(Index(Settings(data_dir=cache / "unused"), embedder=fp32))
    texts = unique * max(1, round(args.texts / len(unique)))
    secs = throughput(models, texts, args.rounds)
    cps = {k: len(texts) / _util.median(v) for k, v in secs.items()}
    ratio = cps["int8"] / cps["fp32"]
    threads = fp32._encoder.session.get_session_options().intra_op_num_threads
    _util.table(f"(a) throughput: {len(texts)} texts ({len(unique)} seed chunks x {len(texts) // len(unique)}), "
                f"batch {fp32.batch_size}, {threads} onnxruntime threads, {args.rounds} interleaved rounds",
                ["model", "chunks/s (median)", "min s", "median s", "max s"],
                [[k, cps[k], min(v), _util.median(v), max(v)] for k, v in secs.items()])
    print(f"  ratio int8/fp32 = {ratio:.2f} on medians (per round: "
          f"{', '.join(f'{a / b:.2f}' for a, b in zip(secs['fp32'], secs['int8']))}); "
          f"target >= {TARGET_RATIO}: {'met' if ratio >= TARGET_RATIO else 'NOT met'}")

    # (d) vector drift, on the unique chunks
    ref = fp32.encode(unique)
    lo, mean, hi = cosines(ref, q8.encode(unique))
    print(f"\n(d) cosine fp32 vs int8 over {len(unique)} seed chunks: min {lo:.4f}  mean {mean:.4f}  max {hi:.4f}")

    # (b) retrieval
    scores = {k: retrieval(emb) for k, emb in models.items()}
    for s in scores["fp32"]:
        metrics_table(s, scores["fp32"][s], scores["int8"][s])

    # (c) verdict
    failed = gate_failures(scores["fp32"], scores["int8"])
    reasons = ([f"speed ratio {ratio:.2f} < {TARGET_RATIO}"] if ratio < TARGET_RATIO else []) + failed
    print(f"\n(c) verdict: {'ADOPT int8' if not reasons else 'KEEP fp32'}: "
          + ("speed and retrieval both hold" if not reasons else "; ".join(reasons)))

    variants = []
    if args.variants:
        for n, recipe in enumerate(VARIANTS):
            emb = Embedder(cache, quantized=True)
            emb.onnx_file = cache / f"variant-{n}.onnx"
            quantize_onnx(fp32.fp32_file, emb.onnx_file, recipe)
            got = retrieval(emb)
            vecs = emb.encode(unique)  # also the warm-up of the timed pass
            pair = throughput({"fp32": fp32, "variant": emb}, unique, 2)
            worst = {f"{k} {m}": min(got[s][k][m] - scores["fp32"][s][k][m] for s in got) for k, m in GATES}
            label = (f"{recipe['weight_type']} {'per-channel' if recipe['per_channel'] else 'per-tensor'}"
                     f" {'MatMul only' if 'op_types_to_quantize' in recipe else 'all ops'}")
            variants.append([label + (" (chosen)" if recipe == QUANTIZATION else ""), *cosines(ref, vecs)[:2],
                             *worst.values(), len(gate_failures(scores["fp32"], got)),
                             sum(pair["fp32"]) / sum(pair["variant"])])
        _util.table("variants (worst set's difference to fp32)",
                    ["recipe", "cos min", "cos mean", "worst d para R@1", "worst d multi R@5",
                     "gates failed", "speed x fp32"], variants)

    others = contention.report()
    _util.summary("embed_int8", {
        "texts": len(texts),
        "threads": threads,
        "fp32_chunks_per_s": round(cps["fp32"], 1),
        "int8_chunks_per_s": round(cps["int8"], 1),
        "ratio": round(ratio, 3),
        "target_ratio": TARGET_RATIO,
        "cos_min": round(lo, 4),
        "cos_mean": round(mean, 4),
        "gates": {s: {f"{k} {m}": [scores["fp32"][s][k][m], scores["int8"][s][k][m]] for k, m in GATES}
                  for s in scores["fp32"]},
        "adopt": not reasons,
        "failed": reasons,
        "other_cpu_share": round(others, 3),
    })


if __name__ == "__main__":
    main()
