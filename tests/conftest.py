"""Shared fixtures. Real-component tests use the real embedder and an on-disk
Chroma in a temporary folder; the embedder is loaded once per test session."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rag.config import DEFAULT_SEEDS, Settings

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def embedder(tmp_path_factory):
    from rag.embed import Embedder

    return Embedder(tmp_path_factory.mktemp("models"))


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(data_dir=tmp_path / "data")


@pytest.fixture
def seeds_copy(tmp_path) -> Path:
    """A private copy of the seed corpus that a test may edit."""
    dst = tmp_path / "corpus"
    shutil.copytree(DEFAULT_SEEDS, dst)
    return dst


@pytest.fixture(scope="session")
def seeded_index(tmp_path_factory, embedder):
    """One index of the bundled seeds shared by read-only tests."""
    from rag.index import Index

    index = Index(Settings(data_dir=tmp_path_factory.mktemp("seeded")), embedder=embedder)
    index.ingest()
    return index
