"""Settings: one object, every field described, each readable from a `RAG_*`
environment variable and overridable by a CLI option."""

from __future__ import annotations

from pathlib import Path

import platformdirs
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The bundled corpus; a wheel install carries it as package data under rag/seeds.
DEFAULT_SEEDS = next(
    (p for p in (PROJECT_ROOT / "seeds", Path(__file__).parent / "seeds") if p.is_dir()),
    PROJECT_ROOT / "seeds",
)
PROMPTS_DIR = PROJECT_ROOT / "prompts"
MODELS_DIR = PROJECT_ROOT / "models"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAG_", extra="ignore")

    data_dir: Path = Field(
        default_factory=lambda: Path(platformdirs.user_data_dir("rag-abstracts")),
        description="Where the index (Chroma files, BM25 cache) lives.",
    )
    chroma_url: str = Field("", description="URL of a Chroma server; empty: embedded store.")
    chroma_token: SecretStr = Field(SecretStr(""), description="Token for a Chroma server that "
                                    "requires one (sent as a Bearer token; never printed).")
    collection: str = Field("abstracts", description="Name of the collection in the store.")
    seeds: Path = Field(DEFAULT_SEEDS, description="Corpus ingested when the index is empty.")
    model: str = Field("", description="Path to a GGUF chat model; empty: the first found.")
    llm_url: str = Field("", description="OpenAI-compatible server URL ending in /v1; "
                                         "empty: run the GGUF in-process.")
    llm_model: str = Field("", description="Model name to ask the server for.")
    llm_api_key: SecretStr = Field(SecretStr(""), description="Bearer token for the LLM server, "
                                   "when it needs one (never printed).")
    llm_ctx: int = Field(2048, ge=256, description="The server model's context window in tokens.")
    k: int = Field(5, ge=1, le=100, description="How many entries a search returns.")
    embed_quantized: bool = Field(
        False, description="Embed with the int8 MiniLM: about 2x faster, same retrieval on the "
                           "eval sets (bench/embed_int8.py); an index built with one must be "
                           "rebuilt to use the other.")
    chunk_tokens: int = Field(
        96, ge=32, le=254,
        description="Word pieces per chunk (MiniLM truncates at 256). Short windows of "
                    "2-4 sentences retrieve better than whole abstracts (bench/calibrate.py).")
    overlap_sentences: int = Field(1, ge=0, le=3, description="Sentences shared by neighbours.")
    ingest_batch: int = Field(
        512, ge=1, le=100_000,
        description="Chunks embedded and stored together; a killed ingest re-embeds at most "
                    "one batch.")
