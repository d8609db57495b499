"""Check synthetic judge records (training/judge/DATA_SPEC.md) and report every problem.

    python training/judge/check_data.py FILE.jsonl [FILE.jsonl ...]

Exits 1 when any record breaks the format, so a writer can fix it before going on.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROLES = {"background", "contribution", "method", "result", "other"}
QUESTION_TYPES = {"direct": 2, "paraphrase": 2, "near_miss": 2, "near_topic": 2}
UNSUPPORTED_KINDS = {"swapped_entity", "reversed", "number_relation", "merged", "negation",
                     "overclaim", "unsupported_detail"}
_WORD = re.compile(r"[a-z][a-z0-9-]+")
_STOP = set("the a an of to in and for on with is are by that this from as at be we our it its "
            "which what how does do can their than into or not".split())


def content(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2}


def check(rec: dict, where: str) -> list[str]:
    errs: list[str] = []
    sents = rec.get("sentences")
    if not isinstance(sents, list) or not 6 <= len(sents) <= 11 or not all(isinstance(s, str) and s.strip() for s in sents):
        return [f"{where}: sentences must be a list of 6-11 non-empty strings"]
    n_words = sum(len(s.split()) for s in sents)
    if not 130 <= n_words <= 330:
        errs.append(f"{where}: abstract has {n_words} words; write 150-300")
    roles = rec.get("roles")
    if not isinstance(roles, list) or len(roles) != len(sents) or set(roles) - ROLES:
        errs.append(f"{where}: roles must list one of {sorted(ROLES)} per sentence")
    for key in ("id", "field"):
        if not isinstance(rec.get(key), str) or not rec[key]:
            errs.append(f"{where}: missing {key}")

    def evidence(item: dict, what: str, least: int = 1) -> None:
        ev = item.get("evidence")
        if not isinstance(ev, list) or len(ev) < least or not all(isinstance(i, int) and 0 <= i < len(sents) for i in ev):
            errs.append(f"{where}: {what} needs evidence: at least {least} index(es) into sentences")

    counts = {t: 0 for t in QUESTION_TYPES}
    for q in rec.get("questions", []):
        t = q.get("type")
        if t not in QUESTION_TYPES or not isinstance(q.get("q"), str) or not q["q"].strip():
            errs.append(f"{where}: question {q!r} needs q and a type in {sorted(QUESTION_TYPES)}")
            continue
        counts[t] += 1
        if t in ("direct", "paraphrase"):
            evidence(q, f"{t} question {q['q']!r}")
        if t == "near_miss" and not q.get("missing"):
            errs.append(f"{where}: near_miss question {q['q']!r} needs 'missing'")
        if t == "paraphrase" and isinstance(q.get("evidence"), list):
            src = set().union(*(content(sents[i]) for i in q["evidence"] if isinstance(i, int) and 0 <= i < len(sents)))
            shared = content(q["q"]) & src
            if len(shared) > 3:
                errs.append(f"{where}: paraphrase question {q['q']!r} reuses {sorted(shared)}; "
                            "reword it without the abstract's terms")
    for t, need in QUESTION_TYPES.items():
        if counts[t] < need:
            errs.append(f"{where}: {counts[t]} {t} question(s); write at least {need}")

    claims = rec.get("claims", [])
    supported = [c for c in claims if c.get("label") == "supported"]
    unsupported = [c for c in claims if c.get("label") == "unsupported"]
    for c in claims:
        if not isinstance(c.get("claim"), str) or c.get("label") not in ("supported", "unsupported"):
            errs.append(f"{where}: claim {c!r} needs claim and label supported|unsupported")
    for c in supported:
        evidence(c, f"supported claim {c.get('claim')!r}", 2 if c.get("kind") == "join" else 1)
    for c in unsupported:
        if c.get("kind") not in UNSUPPORTED_KINDS:
            errs.append(f"{where}: unsupported claim {c.get('claim')!r} needs kind in {sorted(UNSUPPORTED_KINDS)}")
        e = c.get("edits")
        if not isinstance(e, int) or not (e == -1 or (0 <= e < len(claims) and claims[e].get("label") == "supported")):
            errs.append(f"{where}: unsupported claim {c.get('claim')!r}: edits must be -1 or the index of a supported claim")
    if len(supported) < 3 or not any(c.get("kind") == "join" for c in supported):
        errs.append(f"{where}: write at least 3 supported claims, one of kind 'join'")
    if len(unsupported) < 5 or len({c.get('kind') for c in unsupported}) < 4:
        errs.append(f"{where}: write at least 5 unsupported claims of at least 4 kinds")
    return errs


SEARCH_STYLES = {"is_there", "how_can", "keywords", "problem"}
QUERIES_PER_RECORD = 4  # searches, and as many siblings


def check_queries(item: dict, where: str, records: dict[str, dict]) -> list[str]:
    """A record's search questions and their minimally edited siblings (DATA_SPEC.md)."""
    rec = records.get(item.get("id"))
    if rec is None:
        return [f"{where}: id {item.get('id')!r} is not a record of the matching raw file"]
    errs: list[str] = []
    searches, siblings = item.get("searches"), item.get("siblings")
    if not isinstance(searches, list) or len(searches) != QUERIES_PER_RECORD:
        return [f"{where}: write {QUERIES_PER_RECORD} searches"]
    if not isinstance(siblings, list) or len(siblings) != QUERIES_PER_RECORD:
        return [f"{where}: write {QUERIES_PER_RECORD} siblings"]
    n = len(rec["sentences"])
    for j, s in enumerate(searches):
        if not isinstance(s.get("q"), str) or len(s["q"].split()) < 3:
            errs.append(f"{where}: search {j} needs a question of 3 words or more")
        if s.get("style") not in SEARCH_STYLES:
            errs.append(f"{where}: search {j} style must be one of {sorted(SEARCH_STYLES)}")
        ev = s.get("evidence")
        if not isinstance(ev, list) or not ev or not all(isinstance(i, int) and 0 <= i < n for i in ev):
            errs.append(f"{where}: search {j} evidence must list sentence indices 0-{n - 1}")
    for j, s in enumerate(siblings):
        if not isinstance(s.get("q"), str) or len(s["q"].split()) < 3:
            errs.append(f"{where}: sibling {j} needs a question of 3 words or more")
        if not isinstance(s.get("from"), int) or not 0 <= s["from"] < len(searches):
            errs.append(f"{where}: sibling {j} 'from' must be the index of the search it edits")
        elif s.get("q", "").strip().lower() == searches[s["from"]].get("q", "").strip().lower():
            errs.append(f"{where}: sibling {j} is the same text as the search it edits")
        if not isinstance(s.get("swap"), str) or "->" not in s.get("swap", ""):
            errs.append(f"{where}: sibling {j} swap must say 'what -> into what'")
    return errs


def main(paths: list[str]) -> int:
    bad, seen, n = 0, set(), 0
    for p in paths:
        # A queries file is checked against the raw records it adds to.
        raw = Path(p).parents[1] / "raw" / Path(p).name.replace(".queries", "")
        queries = p.endswith(".queries.jsonl")
        records = {r["id"]: r for r in map(json.loads, raw.read_text(encoding="utf-8").splitlines())
                   } if queries and raw.is_file() else {}
        for i, line in enumerate(Path(p).read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            where = f"{p}:{i}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                print(f"{where}: not JSON ({e})")
                bad += 1
                continue
            n += 1
            if rec.get("id") in seen:
                print(f"{where}: duplicate id {rec.get('id')}")
                bad += 1
            seen.add(rec.get("id"))
            for e in check_queries(rec, where, records) if queries else check(rec, where):
                print(e)
                bad += 1
    print(f"{n} records, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
