"""Which projector goes with which model, without loading anything: llama-server's `-hf` rule
for a repository's files, the rule for a `--modeldir` folder (names, several projectors, a
folder per model, a file that is not a projector), the catalog keeping each pairing, and the
start model's projector (--mmproj, --no-mmproj, --hf, its neighbour in the folder)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from server.models.catalog import ModelCatalog
from server.models.fetch import ModelFiles
from server.models.projector_files import (
    pick_neighbour,
    pick_repo_projector,
    projector_beside,
    quant_bits,
)
from server.process.start import start_projector
from server.settings.config import HearthSettings


def same_bytes(target: Path, source: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
    return target


def test_quantization_bits_are_read_as_llama_cpp_reads_them() -> None:
    assert quant_bits("gemma-3-4b-it-Q4_K_M.gguf") == 4
    assert quant_bits("mmproj-Q8_0.gguf") == 8
    assert quant_bits("mmproj-model-f16.gguf") == 16
    assert quant_bits("mmproj-BF16.gguf") == 16
    assert quant_bits("sub/mmproj.F32.gguf") == 32
    assert quant_bits("big-Q6_K-00001-of-00003.gguf") == 6  # the split suffix is not the tag
    assert quant_bits("mmproj.gguf") == 0 and quant_bits("model-Instruct.gguf") == 0


def test_a_repository_projector_is_picked_as_llama_server_picks_it() -> None:
    files = [
        "README.md",
        "gemma-3-4b-it-Q4_K_M.gguf",
        "gemma-3-4b-it-F16.gguf",
        "gemma-3-4b-it-BF16.gguf",
        "mmproj-F16.gguf",
        "mmproj-Q8_0.gguf",
        "mmproj-F32.gguf",
    ]
    # The closest quantization to the model's: 8 bits is nearer 4 than 16 is.
    assert pick_repo_projector(files, "gemma-3-4b-it-Q4_K_M.gguf") == "mmproj-Q8_0.gguf"
    assert pick_repo_projector(files, "gemma-3-4b-it-F16.gguf") == "mmproj-F16.gguf"
    # BF16 and F16 are both 16 bits: the first by name.
    both = ["m-BF16.gguf", "mmproj-model-f16.gguf", "mmproj-model-bf16.gguf"]
    assert pick_repo_projector(both, "m-BF16.gguf") == "mmproj-model-bf16.gguf"
    assert pick_repo_projector(["m-Q4_K_M.gguf", "notes.txt"], "m-Q4_K_M.gguf") is None
    assert pick_repo_projector(["m.gguf", "MMPROJ-f16.GGUF"], "m.gguf") == "MMPROJ-f16.GGUF"


def test_a_repository_projector_comes_from_the_models_folder_or_one_above() -> None:
    files = [
        "mmproj-F16.gguf",
        "4b/gemma-4b-Q4_K_M.gguf",
        "4b/mmproj-4b-F16.gguf",
        "12b/gemma-12b-Q4_K_M.gguf",
        "12b/mmproj-12b-Q4_K_M.gguf",
        "12b/deeper/mmproj-Q4_K_M.gguf",
    ]
    assert pick_repo_projector(files, "4b/gemma-4b-Q4_K_M.gguf") == "4b/mmproj-4b-F16.gguf"
    assert pick_repo_projector(files, "12b/gemma-12b-Q4_K_M.gguf") == "12b/mmproj-12b-Q4_K_M.gguf"
    assert pick_repo_projector(files, "other/m-Q4_K_M.gguf") == "mmproj-F16.gguf"  # one above
    assert pick_repo_projector(files[1:], "m-Q4_K_M.gguf") is None  # never one below


def test_in_a_folder_a_projector_pairs_with_the_model_it_is_named_after() -> None:
    models = ["gemma-3-4b-it-Q4_K_M.gguf", "Qwen2.5-VL-7B-Instruct-Q4_K_M.gguf", "llama-3-8b.gguf"]
    projectors = ["mmproj-gemma-3-4b-it-f16.gguf", "Qwen2.5-VL-7B-Instruct-mmproj-f16.gguf"]
    assert pick_neighbour(models[0], projectors, models) == projectors[0]
    assert pick_neighbour(models[1], projectors, models) == projectors[1]
    assert pick_neighbour(models[2], projectors, models) is None  # text only: none is its own
    # Of two named after the model, the quantization closest to the model's.
    quants = ["mmproj-gemma-3-4b-it-F16.gguf", "mmproj-gemma-3-4b-it-Q8_0.gguf"]
    assert pick_neighbour(models[0], quants, models) == quants[1]
    # The longest shared start wins over a shorter one.
    sizes = ["mmproj-gemma-3-12b-it-f16.gguf", "mmproj-gemma-3-4b-it-f16.gguf"]
    assert pick_neighbour(models[0], sizes, models) == sizes[1]


def test_a_projector_named_after_no_model_serves_its_whole_folder() -> None:
    # A folder per model (LM Studio's, llama-server's --models-dir): generic names.
    quants = ["gemma-3-4b-it-Q4_K_M.gguf", "gemma-3-4b-it-Q8_0.gguf"]
    assert pick_neighbour(quants[0], ["mmproj-model-f16.gguf"], quants) == "mmproj-model-f16.gguf"
    assert pick_neighbour(quants[1], ["mmproj-F16.gguf"], quants) == "mmproj-F16.gguf"
    mixed = ["llama-3-8b.gguf", "gemma-3-4b-it-Q4_K_M.gguf"]
    both = ["mmproj-gemma-3-4b-it-f16.gguf", "mmproj-F16.gguf"]
    assert pick_neighbour(mixed[0], both, mixed) == "mmproj-F16.gguf"
    assert pick_neighbour(mixed[1], both, mixed) == both[0]
    assert pick_neighbour(mixed[0], [], mixed) is None


def test_projector_beside_reads_headers_and_skips_what_is_not_a_projector(
    tmp_path: Path, bundled: Path, tiny_projector: Path
) -> None:
    folder = tmp_path / "gemma"
    model = same_bytes(folder / "gemma-3-270m-Q4_K_M.gguf", bundled)
    (folder / "mmproj-gemma-3-270m-Q4_K_M.gguf").write_bytes(b"GGUF but broken")
    same_bytes(folder / "mmproj-gemma-3-270m-f16.gguf", bundled)  # a text model by mistake
    same_bytes(folder / "mmproj-F16.gguf", tiny_projector)
    paired = projector_beside(model)
    assert paired is not None and paired.path == folder / "mmproj-F16.gguf"
    assert paired.modalities == ("vision",) and paired.takes == "vision"
    assert projector_beside(same_bytes(tmp_path / "alone" / "m.gguf", bundled)) is None


def test_the_catalog_keeps_each_models_projector(
    tmp_path: Path, bundled: Path, tiny_projector: Path
) -> None:
    folder = tmp_path / "models"
    seeing = same_bytes(folder / "vision" / "seeing.gguf", bundled)
    same_bytes(folder / "vision" / "mmproj-F16.gguf", tiny_projector)
    blind = same_bytes(folder / "text" / "blind.gguf", bundled)
    catalog = ModelCatalog.scan(bundled, folder)
    assert catalog.names == ["gemma-3-270m-q4_k_m", "blind", "seeing"]  # no projector listed
    assert catalog.projector_for(seeing) == folder / "vision" / "mmproj-F16.gguf"
    paired = catalog.projector_of(seeing)
    assert paired is not None and paired.modalities == ("vision",)
    assert catalog.projector_for(blind) is None and catalog.projector_for(bundled) is None
    given = ModelCatalog.scan(bundled, folder, served_projector=tiny_projector)
    assert given.projector_for(bundled) == tiny_projector  # the served model's, as the start chose
    assert ModelCatalog.scan(bundled, folder, pair_projectors=False).projectors == {}


def test_the_start_model_keeps_mmproj_else_its_download_else_its_neighbour(
    tmp_path: Path, bundled: Path, tiny_projector: Path
) -> None:
    folder = tmp_path / "models"
    model = same_bytes(folder / "vision" / "seeing.gguf", bundled)
    beside = same_bytes(folder / "vision" / "mmproj-F16.gguf", tiny_projector)
    plain = ModelFiles(model)
    assert start_projector(HearthSettings(modeldir=str(folder)), plain) == beside
    assert start_projector(HearthSettings(), plain) is None  # not started from a folder
    chosen = HearthSettings(modeldir=str(folder), mmproj=str(tiny_projector))
    assert start_projector(chosen, plain) == tiny_projector
    assert start_projector(HearthSettings(modeldir=str(folder), no_mmproj=True), plain) is None
    fetched = ModelFiles(model, tiny_projector)
    assert start_projector(HearthSettings(hf="o/r"), fetched) == tiny_projector
    assert start_projector(HearthSettings(hf="o/r", modeldir=str(folder)), plain) is None
