"""The files an index was built from, recorded next to it.

`rag ingest` with no paths and `rag ingest --rebuild` re-read exactly these files
under the same keys (so entry ids stay the same), and an index that turns up empty
while this record lists files is reported instead of being refilled with the seeds.
The record lives beside the store, not inside it, so that it survives a damaged
store.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .corpus import CorpusFile


class Sources:
    def __init__(self, path: Path):
        self.path = path

    def exists(self) -> bool:
        return self.path.is_file()

    def _read(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def _write(self, data: dict[str, str]) -> None:
        # Write then rename: a kill mid-write leaves the old record, never half of one.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.path)

    def paths(self) -> dict[str, Path]:
        """Source key -> the file it was read from."""
        return {k: Path(p) for k, p in self._read().items()}

    def files(self) -> list[CorpusFile]:
        return [CorpusFile(p, k) for k, p in sorted(self.paths().items())]

    def record(self, files: dict[str, Path]) -> None:
        data = self._read()
        data.update({k: str(p.expanduser().resolve()) for k, p in files.items()})
        self._write(data)

    def forget(self, keys: list[str]) -> None:
        data = self._read()
        for k in keys:
            data.pop(k, None)
        self._write(data)
