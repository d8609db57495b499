"""A shipped int8 ONNX judge -> a torch checkpoint that ``train.py --init`` starts from.

    python training/judge/from_onnx.py rag/judge_model/questions.int8.onnx training/judge/work-s2/init.pt

The torch checkpoints of the shipped judges are not kept (they are large, and the
history every clone downloads holds only the ONNX files), so a second stage that
continues training a shipped judge rebuilds its weights from the ONNX file: each
int8 matrix dequantized ((q - zero point) x scale) and transposed back into the
Linear layer named by its node, the float tensors (biases, layer norms) copied by
name. The word-piece embeddings were frozen in training, so they are the
package's MiniLM weights exactly. Prints how far the rebuilt model's scores are from
the ONNX file's on a few validation pairs (int8 rounding: about 0.01).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train import CrossEncoder, predict_torch  # noqa: E402  (sets the offline env first)
from transformers import BertModel  # noqa: E402

from pairs import build, load_records  # noqa: E402
from rag.embed import model_dir  # noqa: E402
from rag.judge import Judge  # noqa: E402


def state_from_onnx(path: Path, model: CrossEncoder) -> dict[str, torch.Tensor]:
    graph = onnx.load(str(path)).graph
    init = {i.name: numpy_helper.to_array(i) for i in graph.initializer}

    def dequant(base: str) -> np.ndarray:
        q = init[f"{base}_quantized"].astype(np.float32)
        return (q - init[f"{base}_zero_point"].astype(np.float32)) * init[f"{base}_scale"]

    state = {k: v.clone() for k, v in model.state_dict().items()}
    done = set()
    for name, value in init.items():
        if name in state:
            state[name] = torch.from_numpy(np.array(value, dtype=np.float32)).reshape(state[name].shape)
            done.add(name)
    for node in graph.node:
        if node.op_type == "MatMulInteger":
            # "/bert/encoder/layer.0/attention/self/query/MatMul_quant" -> that layer's weight
            key = node.name.rsplit("/", 1)[0].strip("/").replace("/", ".") + ".weight"
            base = node.input[1].removesuffix("_quantized")
            state[key] = torch.from_numpy(dequant(base).T.copy())
            done.add(key)
    for emb in ("position_embeddings", "token_type_embeddings"):
        key = f"bert.embeddings.{emb}.weight"
        state[key] = torch.from_numpy(dequant(key))
        done.add(key)
    missing = set(state) - done - {"bert.embeddings.word_embeddings.weight"}
    if missing:
        raise SystemExit(f"not found in {path}: {sorted(missing)}")
    return state


def main() -> None:
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    model = CrossEncoder(BertModel.from_pretrained(str(model_dir()), add_pooling_layer=False))
    model.load_state_dict(state_from_onnx(src, model))
    model.eval()
    val = build(load_records())[1][:200]
    ours = predict_torch(model, val)
    theirs = Judge(src).score([p.first for p in val], [p.second for p in val])
    print(f"rebuilt vs ONNX on {len(val)} validation pairs: mean |difference| "
          f"{np.abs(ours - theirs).mean():.4f}, max {np.abs(ours - theirs).max():.4f}")
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": model.state_dict()}, out)


if __name__ == "__main__":
    main()
