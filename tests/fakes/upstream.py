"""``upstream_files`` / ``serve_upstream``: a fake τ-bench repository for the download commands."""

from __future__ import annotations

import pathlib
from types import ModuleType
from typing import Any


def upstream_files(
    upstream_dir: str, folder: pathlib.Path, tables: tuple[str, ...], tasks: dict[str, bytes]
) -> dict[str, bytes]:
    """A fake τ-bench repository by raw URL: a domain's tables and wiki (``policy.md``) from ``folder``, its task
    files and the licence."""
    from josh.envs.retail.download import raw_url

    files = {f"data/{name}.json": (folder / f"{name}.json").read_bytes() for name in tables}
    files["wiki.md"] = (folder / "policy.md").read_bytes()
    out = {raw_url(f"{upstream_dir}/{path}"): data for path, data in {**files, **tasks}.items()}
    out[raw_url("LICENSE")] = b"MIT"
    return out


def serve_upstream(monkeypatch: Any, download: ModuleType, upstream: dict[str, bytes]) -> None:
    """``download.http_fetch`` answers from ``upstream``, and a 404 ``DownloadError`` for any other URL."""

    def fetch(url: str) -> bytes:
        if url not in upstream:
            raise download.DownloadError(f"cannot fetch {url}: 404")
        return upstream[url]

    monkeypatch.setattr(download, "http_fetch", fetch)
