"""The sentence-role tagger: the shipped model on real sentences, and its training
script end to end (seconds), so neither rots."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rag.roles import Tagger, tagger

ROOT = Path(__file__).resolve().parents[1]


def test_shipped_tagger_reads_what_each_sentence_does():
    sents = ["Large language models have recently attracted wide attention across many tasks.",
             "However, existing quantization methods fail below 2 bits.",
             "We propose BitSqueeze, a post-training method that binarizes salient weights.",
             "BitSqueeze reaches a perplexity of 8.4 on LLaMA2-70B, outperforming GPTQ by 12 points.",
             "Our code is available at https://github.com/example/bitsqueeze."]
    assert tagger().tag(sents) == ["background", "background", "contribution", "result", "other"]


def test_other_needs_a_link_or_code():
    # A result is never dropped as "other" for want of a link.
    got = tagger().tag(["We study a bandit problem.", "We provide empirical simulations to justify our findings."])
    assert "other" not in got


def test_outlook_and_praise_are_other():
    # Closing sentences a careful reader found quoted as the last, irrelevant quote.
    got = tagger().tag(["We propose BitSqueeze, a post-training method that binarizes salient weights.",
                        "BitSqueeze reaches a perplexity of 8.4 on LLaMA2-70B.",
                        "BitSqueeze is a key advance in efficient inference.",
                        "We hope this work will help motivate a new generation of compression techniques."])
    assert got[2:] == ["other", "other"] and "other" not in got[:2]


def test_on_the_hand_labelled_seed_sentences():
    right = n = aside_right = aside = 0
    for line in (ROOT / "eval" / "roles.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        got = tagger().tag(rec["sentences"])
        right += sum(a == b for a, b in zip(got, rec["roles"]))
        n += len(got)
        for a, b in zip(got, rec["roles"]):
            if a in ("background", "other"):
                aside += 1
                aside_right += b in ("background", "other")
    assert right / n >= 0.62  # 67% when shipped (model card)
    assert aside_right / aside >= 0.85  # what answers leave out is background or a link


def test_training_script_writes_a_model_that_loads(tmp_path):
    out = tmp_path / "roles.json"
    run = subprocess.run([sys.executable, str(ROOT / "training" / "roles" / "train.py"), "--out", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    model = json.loads(out.read_text())
    assert model["validation"]["accuracy"] >= 0.9
    assert Tagger(out).tag(["We propose a new method."]) == ["contribution"]
