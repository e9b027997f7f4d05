"""The model catalog (work in progress for model switching): what a model dir lists, broken
files reported and skipped, and how a request's model name is resolved."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from server.models.catalog import ModelCatalog


def same_bytes(target: Path, source: Path) -> None:
    """Another file with the model's bytes (a hard link when possible: no copy)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def model_dir(tmp_path: Path, bundled: Path) -> Path:
    folder = tmp_path / "models"
    (folder / "sub").mkdir(parents=True)
    same_bytes(folder / "Story-Writer.Q4_K_M.gguf", bundled)
    same_bytes(folder / "sub" / "helper (v2).gguf", bundled)
    same_bytes(folder / "big-00001-of-00002.gguf", bundled)
    (folder / "served.gguf").symlink_to(bundled)  # the served model again: listed once
    (folder / "big-00002-of-00002.gguf").write_bytes(b"part two")
    (folder / "mmproj-model-f16.gguf").write_bytes(b"a projector")
    (folder / "broken.gguf").write_bytes(b"GGUF but not really")
    (folder / "notes.txt").write_text("not a model")
    return folder


def test_a_model_dir_lists_every_gguf_and_skips_broken_ones(tmp_path: Path, bundled: Path) -> None:
    catalog = ModelCatalog.scan(bundled, model_dir(tmp_path, bundled))
    assert catalog.names == [
        "gemma-3-270m-q4_k_m",
        "Story-Writer.Q4_K_M",
        "big-00001-of-00002",
        "helperv2",
    ]
    assert [path.name for path, _ in catalog.problems] == ["broken.gguf"]
    assert all(entry.summary.architecture == "gemma3" for entry in catalog.entries)


def test_names_resolve_as_clients_send_them(tmp_path: Path, bundled: Path) -> None:
    catalog = ModelCatalog.scan(bundled, model_dir(tmp_path, bundled))
    served = catalog.entries[0]
    assert catalog.resolve(None) is served and catalog.resolve("") is served
    story = catalog.resolve("story-writer.q4_k_m:latest")
    assert story is not None and story.path.name == "Story-Writer.Q4_K_M.gguf"
    assert catalog.resolve("Story-Writer.Q4_K_M.gguf") is story
    assert catalog.resolve("gpt-4o") is None  # the dialect's 404
    with_default = ModelCatalog.scan(
        bundled, model_dir(tmp_path / "again", bundled), default="helperv2"
    )
    helper = with_default.resolve("gpt-4o")
    assert helper is not None and helper.name == "helperv2"


def test_without_a_model_dir_every_name_is_the_served_model(bundled: Path) -> None:
    catalog = ModelCatalog.scan(bundled)
    assert catalog.names == ["gemma-3-270m-q4_k_m"]
    assert catalog.resolve("gpt-4o") is catalog.entries[0]  # clients send fixed names


def test_no_name_or_an_unknown_one_follows_the_loaded_model(tmp_path: Path, bundled: Path) -> None:
    with_dir = ModelCatalog.scan(bundled, model_dir(tmp_path, bundled))
    helper = with_dir.resolve(None, loaded="helperv2")
    assert helper is not None and helper.name == "helperv2"  # a request without a name
    assert with_dir.resolve("gpt-4o", loaded="helperv2") is None  # strict with --modeldir
    admin_only = ModelCatalog.scan(bundled, admin_dir=model_dir(tmp_path / "admin", bundled))
    assert len(admin_only.names) == 4  # an admin folder lists its models...
    fixed_name = admin_only.resolve("gpt-4o", loaded="helperv2")  # ...without strict names
    assert fixed_name is not None and fixed_name.name == "helperv2"


def test_a_file_listed_twice_is_one_entry_with_two_names(tmp_path: Path, bundled: Path) -> None:
    hub_copy = tmp_path / "hub" / "gemma-3-270m-Q4_K_M.gguf"
    hub_copy.parent.mkdir()
    hub_copy.symlink_to(bundled)
    catalog = ModelCatalog.scan(
        bundled, tmp_path / "hub", downloaded=[("hf.co/google/gemma:Q4_K_M", hub_copy)]
    )
    assert catalog.names == ["gemma-3-270m-q4_k_m"]
    aliased = catalog.resolve("hf.co/google/gemma:Q4_K_M")
    assert aliased is catalog.entries[0]
