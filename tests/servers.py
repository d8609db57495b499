"""Real servers on loopback for the server-backed tests: a Chroma server and a
llama-cpp-python OpenAI-compatible server with the default GGUF. `.ci/run` starts
them and passes their URLs (RAG_TEST_CHROMA_URL, RAG_TEST_LLM_URL); without those,
the tests start their own on free ports and stop them afterwards."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(url: str, proc: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server for {url} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"server for {url} did not start in {seconds} s")


@contextmanager
def _server(cmd: list[str], probe: str):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait(probe, proc)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextmanager
def chroma_server(path: Path):
    if os.environ.get("RAG_TEST_CHROMA_URL"):
        yield os.environ["RAG_TEST_CHROMA_URL"]
        return
    chroma = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with _server([chroma, "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
                 f"{url}/api/v2/heartbeat"):
        yield url


@contextmanager
def llm_server():
    if os.environ.get("RAG_TEST_LLM_URL"):
        yield os.environ["RAG_TEST_LLM_URL"]
        return
    from rag.llm import find_model

    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    with _server([sys.executable, "-m", "llama_cpp.server", "--model", str(find_model()),
                  "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096"],
                 f"{url}/models"):
        yield url
