"""Finding GGUF models on the Hugging Face Hub: repositories for a query, and a repository's
GGUF files with their size and quantization (a split model's parts shown as one entry).

Qt-free; the launcher runs these on a worker thread (app/hub_client.py). Failures are
`ModelFileError` sentences (server/models/hub_request.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from server.models.files import SPLIT_PART
from server.models.hub_names import quants_in
from server.models.hub_request import hub_call

SEARCH_LIMIT = 50


@dataclass(frozen=True)
class RepoHit:
    repo: str
    downloads: int
    likes: int
    gated: bool


@dataclass(frozen=True)
class ModelFile:
    """One model in a repository: a single GGUF, or every part of a split one."""

    repo: str
    parts: tuple[str, ...]  # file names in the repository; the first is the one to load
    size: int  # bytes, all parts together
    quant: str

    @property
    def name(self) -> str:
        first = self.parts[0]
        if len(self.parts) == 1:
            return first
        return f"{SPLIT_PART.sub('', first)}.gguf ({len(self.parts)} parts)"


def search_repositories(query: str, token: str | None = None) -> list[RepoHit]:
    """GGUF repositories matching `query`, most downloaded first."""
    found = hub_call(
        query or "search",
        lambda api: list(
            api.list_models(
                search=query or None,
                filter="gguf",
                sort="downloads",
                limit=SEARCH_LIMIT,
                token=token,
            )
        ),
    )
    return [
        RepoHit(
            repo=str(model.id),
            downloads=int(getattr(model, "downloads", 0) or 0),
            likes=int(getattr(model, "likes", 0) or 0),
            gated=bool(getattr(model, "gated", False)),
        )
        for model in found
    ]


def repository_files(repo: str, token: str | None = None) -> list[ModelFile]:
    """The repository's GGUF models (projectors left out), smallest first."""
    entries = hub_call(
        repo, lambda api: list(api.list_repo_tree(repo, recursive=True, token=token))
    )
    sizes = {
        str(entry.path): int(getattr(entry, "size", 0) or 0)
        for entry in entries
        if str(getattr(entry, "path", "")).lower().endswith(".gguf")
        and "mmproj" not in str(entry.path).lower()
    }
    groups: dict[str, list[str]] = {}
    for name in sorted(sizes):
        groups.setdefault(SPLIT_PART.sub("", name), []).append(name)
    files = [
        ModelFile(
            repo=repo,
            parts=tuple(parts),
            size=sum(sizes[part] for part in parts),
            quant=(quants_in(parts[0]) or [""])[-1],
        )
        for parts in groups.values()
    ]
    return sorted(files, key=lambda file: (file.size, file.name))
