"""Where to set the pipeline's SUPPORTED threshold (rag/answer.py) for a judge: the
share of held-out supported and unsupported claims each judge keeps, per threshold.

    python training/judge/claim_threshold.py rag/judge_model/judge.int8.onnx OTHER.onnx ...
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from pairs import build, load_records  # noqa: E402
from rag.judge import Judge  # noqa: E402

_, val = build(load_records())
claims = [p for p in val if p.task.startswith("c-") and p.task != "c-other-window"]
y = np.array([p.answers for p in claims])
for path in sys.argv[1:]:
    s = Judge(Path(path)).score([p.first for p in claims], [p.second for p in claims])[:, 0]
    for t in (0.5, 0.4, 0.3, 0.25, 0.2):
        print(f"{path} >= {t:.2f}: supported kept {np.mean(s[y == 1] >= t):.3f}, "
              f"unsupported kept {np.mean(s[y == 0] >= t):.3f}")
