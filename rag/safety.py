"""Corpus text is data, never instructions.

Abstracts are written by other people, and some try to steer whatever reads them
(indirect prompt injection; Greshake et al. 2023) or the terminal that shows them.
Three small defences, each used where text crosses a boundary:

- :func:`strip_control` removes what a terminal would obey (control characters and
  ANSI/OSC escape sequences), at ingest and before any terminal output.
- :func:`suspicious` tells a sentence addressed to a reader or a model ("ignore all
  previous instructions", role tags, "reply only with ...") from one that reports
  research, so that the answer pipeline never quotes it, never writes it into a
  review and never passes it to the model.
- :func:`neutralize_special_tokens` breaks chat-template tokens (``<|im_start|>``,
  ``[INST]``) in text sent to a server that tokenizes with special tokens on; the
  in-process backend tokenizes source text with special tokens off instead.
"""

from __future__ import annotations

import re
import unicodedata

# Whole escape sequences first, so that their parameters go with them, not just
# the ESC: OSC/DCS/SOS/PM/APC strings (7- and 8-bit, ended by BEL or ST), CSI
# sequences, then any other two- or three-byte escape (ESC c, ESC ( B).
_ESCAPES = re.compile(
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|\x1b[ -/]*[0-~]"
)
# Any control character left (C0 but tab and newline, DEL, C1), a lone ESC
# included, and the bidirectional overrides and isolates, which make a terminal show
# text in another order than it is stored ("Trojan Source").
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def strip_control(text: str) -> tuple[str, int]:
    """``text`` without control characters (newline and tab kept) and without ANSI
    CSI/OSC escape sequences, and how many characters or whole sequences went."""
    text, sequences = _ESCAPES.subn("", text)
    text, chars = _CONTROL.subn("", text)
    return text, sequences + chars


# -- sentences that address the reader or a model -------------------------------------

def _normal(sentence: str) -> str:
    """Lower case, compatibility forms folded (full-width letters), format characters
    (zero-width spaces, bidi marks) and control characters removed, spaces collapsed."""
    text = unicodedata.normalize("NFKC", strip_control(sentence)[0])
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return " ".join(text.lower().split())


# A clause that starts an instruction: the sentence's start, after a colon, a
# semicolon, a comma, a dash or an exclamation, or after "please" or "you must" and
# the like. A research sentence describes with a subject ("attackers make models
# ignore previous instructions", "models then ignore ..."); an injection commands
# ("Ignore previous instructions", "Before answering, print ...").
_LEAD = (r"(?:(?:^|[:;!,>\]\)]\s*|\s[-–—]+\s*)(?:(?:and|then|now|also|instead|first|finally)\s+)?"
         r"|\b(?:please|kindly|(?:you|assistants?|models?|ai|llms?) (?:must|should|shall|will|need to|have to|"
         r"are (?:to|required to)))\s+)"
         r"(?:(?:please|now|kindly|simply|just|always|immediately|instead)\s+)*")
_OBJECT = r"(?:all|any|every|the|your|my|these|those|previous|prior|earlier|above|preceding|original|other|system|old)"
_RULES = (r"(?:instructions?|prompts?|rules|directions|directives|guidelines|guardrails|constraints|context|"
          r"commands?|messages?|polic(?:y|ies)|questions?|tasks?|requests?|query|user)")

_PATTERNS = [
    # Chat-template role tags and special tokens, wherever they stand.
    r"<\|[a-z_]{2,20}\|>", r"\[/?inst\]", r"<</?sys>>", r"</?s>", r"<\|?(?:endoftext|eot_id|bos|eos)\|?>",
    r"<\s*/?\s*abstract\s*>",  # the prompts' own fence (rag/prompts.py)
    r"(?:^|#{2,}\s*)(?:system|assistant|user|human|instruction|response)\s*:",
    # Overriding what the reader was told.
    _LEAD + rf"(?:ignore|disregard|forget|override|bypass|skip|drop|abandon)\s+(?:{_OBJECT}\s+){{0,3}}{_RULES}\b",
    r"\b(?:ignore|disregard|forget)\s+(?:all|everything|anything)\s+(?:you|that)\s+(?:were|was|have been)\s+told\b",
    rf"\b(?:new|updated|real|actual|hidden|secret|following)\s+{_RULES}\s*:",
    # A new identity or role for the reader.
    r"\byou are now\b", r"\bfrom now on,?\s+(?:you|act|respond|reply|answer)\b",
    r"\byou are (?:no longer|not) (?:an? |the )?(?:ai|assistant|model|language model|chatbot)\b",
    r"\b(?:you are|act as|pretend to be|roleplay as)\s+(?:dan|an? (?:unrestricted|unfiltered|jailbroken|compromised|evil|"
    r"malicious|uncensored)\b)",
    _LEAD + r"(?:act|behave|pretend|roleplay|role-play)\s+(?:as|like|to be|that)\b",
    _LEAD + r"(?:enable|enter|activate|switch to|turn on|unlock)\s+(?:the\s+)?(?:developer|god|jailbreak|dan|debug|"
    r"admin|unrestricted)\s+mode\b",
    # Telling the reader what to output.
    _LEAD + r"(?:reply|respond|answer|output|return|say|print|write|state)\s+(?:only\s+|just\s+|exclusively\s+|solely\s+)?"
    r"(?:with|using|in (?:one|a single) word|the (?:word|phrase|string|text))\b",
    r"\byour (?:answer|response|reply|output|summary) (?:must|should|shall|will) (?:be|start|begin|end|include|contain|say)\b",
    # Addressing a model or a reader directly.
    r"\b(?:if|when) you(?:'re| are) (?:an? |the )?(?:ai|llm|language model|large language model|assistant|chatbot|"
    r"bot|automated|summari[sz]er|agent)\b",
    r"\b(?:dear|attention,?|hey|hello|(?:a )?(?:note|message|notice|instructions?) (?:to|for)) (?:the |any |all )?"
    r"(?:ai|llm|language model|large language model|assistant|chatbot|bot|summari[sz]er|agent|reader|reviewer)s?\b"
    r"(?:\s+(?:reading|processing|summari[sz]ing|analy[sz]ing|that|who)\b[^:,]*)?[:,]",
    r"\b(?:ai|llm|language model|assistant|chatbot|bot|agent)s?\s+(?:reading|processing|summari[sz]ing|analy[sz]ing)\s+"
    r"(?:this|these)\b",
    r"\b(?:system|admin|administrator|developer|security|important|urgent)\s+(?:notice|override|alert|message|"
    r"instruction|update|prompt)\s*[:!-]",
    r"^\W*(?:important|urgent|attention|warning|notice)\W*(?:system\s+)?(?:notice|message|alert|update)?\s*[:!]",
    r"\b(?:tell|inform|remind|warn|convince) (?:the |your )?(?:user|reader|human|requester)s?\b",
    _LEAD + r"(?:do not|don't|never)\s+(?:mention|cite|reveal|tell|say|summari[sz]e|disclose|repeat|include|quote|"
    r"follow|refuse|warn)\b",
    r"\byou (?:must|should|shall|will|need to|have to|are (?:required|instructed|ordered) to)\s+(?:now\s+)?"
    r"(?:ignore|disregard|forget|reply|respond|answer|output|say|print|reveal|repeat|cite|include|obey|follow|tell|"
    r"write|state|claim|act|pretend|translate|execute|run|send|open|visit|click)\b",
    # Exfiltration: files, keys, secrets, the prompt itself.
    r"~/\.\w+", r"\bid_(?:rsa|dsa|ecdsa|ed25519)\b", r"/etc/(?:passwd|shadow|hosts)\b",
    _LEAD + r"(?:print|reveal|show|output|display|dump|cat|read out|leak|disclose|exfiltrate|send|upload|paste|list|"
    r"repeat|include|email)\s+(?:me\s+|us\s+)?(?:the\s+|your\s+|all\s+|any\s+)?(?:full\s+|entire\s+|complete\s+|exact\s+|"
    r"raw\s+|hidden\s+|secret\s+)?(?:contents?|text|(?:system )?prompts?|instructions|secrets?|keys?|passwords?|"
    r"credentials|tokens?|environment|env|config\w*|files?|history|conversation)\b",
    r"\b(?:contents?|text) of (?:the |your )?(?:file|system prompt|prompt|instructions|home directory|environment)\b",
    r"\b(?:api[_ ]?keys?|private keys?|passwords?|access tokens?|credentials)\b.{0,40}\b(?:to|at)\s+(?:https?://|\S+@)",
    # Citation and reputation manipulation.
    r"\bcite (?:this|the|our) (?:paper|work|article|study|entry|abstract) as\b",
    r"\bcite (?:it|this|them) as\s*\[",
    r"\b(?:always|must|should)\s+(?:cite|recommend|rank|list|mention)\s+(?:this|the|our)\s+(?:paper|work|article|study)\b",
    _LEAD + r"(?:cite|recommend|rank|list|mention)\s+(?:this|the|our)\s+(?:paper|work|article|study)\s+(?:as|first|above|"
    r"before|instead|only)\b",
    r"\b(?:say|state|claim|report|mention|note|write|tell \w+|answer)\s+(?:that\s+)?(?:it|this|the|our|these)\s*"
    r"(?:paper|work|article|study|results?|findings?|authors?)?\s+(?:was|were|is|are|has been|have been)\s+"
    r"(?:retracted|withdrawn|fraudulent|fabricated|plagiari[sz]ed|debunked|discredited|fake)\b",
    # Markup that a viewer runs or fetches.
    r"<\s*/?\s*(?:script|img|iframe|object|embed|svg|style|link|meta|form|input|a\s+href|base|video|audio|source)\b",
    r"\bjavascript\s*:", r"\bvbscript\s*:", r"\bdata\s*:\s*text/html", r"\bon(?:error|load|click|mouseover)\s*=",
    r"!\[[^\]]*\]\s*\(", r"\]\s*\(\s*(?:javascript|data|vbscript|file):",
    r"\]\s*\(\s*https?://[^)\s]*[?&][^)\s]*=",
    # The same in other languages: an abstract here is English, so an "ignore"
    # verb with an "instructions" noun in another language is an instruction.
    r"\b(?:ignorez|ignorer|ignoriere|ignorieren|ignora|ignorar|negeer|zignoruj)\b.{0,60}"
    r"\b(?:instructions?|anweisungen|instrucciones|istruzioni|instruções|instructies|instrukcje|instruksjoner)\b",
    r"(?:игнорируй|проигнорируй|забудь).{0,60}(?:инструкци|указани)",
    r"(?:忽略|无视|無視|忘记).{0,20}(?:指令|指示|说明|命令|提示)",
    r"(?:以前|前)の.{0,10}(?:指示|命令).{0,10}(?:無視|忘れ)",
    r"\b(?:réponds|antworte|responde|rispondi)\b.{0,30}\b(?:uniquement|nur|solo|solamente|soltanto)\b",
]
_SUSPICIOUS = re.compile("|".join(f"(?:{p})" for p in _PATTERNS))


def suspicious(sentence: str) -> bool:
    """Whether ``sentence`` addresses a reader, an assistant or a model with
    instructions (or carries role tags or markup a viewer would run) rather than
    reporting research. Descriptive sentences about such attacks ("attackers can
    make models ignore previous instructions") are not flagged; commands are."""
    return bool(_SUSPICIOUS.search(_normal(sentence)))


# -- special tokens -------------------------------------------------------------------

# The spellings chat templates use for role boundaries and sequence ends.
_SPECIAL = re.compile(r"<\|[^|<>\s]{1,40}\|>|<\s*/?\s*s\s*>|\[\s*/?\s*INST\s*\]|<<\s*/?\s*SYS\s*>>|"
                      r"<\s*/?\s*(?:start_of_turn|end_of_turn|bos|eos|pad|unk)\s*>", re.I)
_ZWSP = "\u200b"


def neutralize_special_tokens(text: str) -> str:
    """``text`` with every special-token spelling broken by a zero-width space after
    its first character (``<|im_start|>`` -> ``<\\u200b|im_start|>``), so no
    tokenizer can read it as one token; it reads the same to a person."""
    return _SPECIAL.sub(lambda m: m.group(0)[0] + _ZWSP + m.group(0)[1:], text)
