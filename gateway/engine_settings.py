"""Settings of the model the engine serves and how vLLM runs it (part of ``Settings``).

Which model, under which name, where its converted weights and everything else persisted live
(``data_dir``), and the vLLM engine's own knobs: device, context length, memory, dtype, batching,
tensor parallelism and the tool parser.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class EngineSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGBLEND_", extra="ignore")

    model: str = Field(
        "qwen2.5-coder-0.5b-instruct",
        description="Model to serve: a known model name or a local Hugging Face model directory.",
    )
    served_model_name: str | None = Field(
        None, description="Name clients use in `model`; defaults to the model name."
    )
    data_dir: Path = Field(
        Path("data"), description="Root of everything persisted: models, vLLM cache, documents."
    )
    models_dir: Path = Field(
        Path(),
        description=(
            "Where converted models are cached, with vLLM's records of their classes that spare "
            "a server on a new data directory 10 s of start (`.vllm-model-records`); defaults to "
            "`<data_dir>/models`."
        ),
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="Where the engine runs; `auto` picks CUDA when a GPU is visible."
    )
    max_model_len: int = Field(
        8192, ge=256, description="Longest prompt plus completion, in tokens."
    )
    kv_cache_gib: float = Field(
        4.0, gt=0, description="CPU only: memory for vLLM's paged KV cache, in GiB."
    )
    gpu_memory_utilization: float = Field(
        0.85, gt=0, le=1, description="CUDA only: share of GPU memory vLLM may use."
    )
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "auto",
        description="Weights and activations dtype. `auto`: bfloat16 where the hardware "
        "multiplies it (CUDA GPUs that support it, else float16; CPUs with AVX512-BF16, AMX "
        "or Arm BF16), float32 on other CPUs, where bf16 is emulated and about 5x slower.",
    )
    enable_prefix_caching: bool = Field(True, description="vLLM's own exact-prefix KV reuse.")
    cpu_compile: bool = Field(
        False,
        description="On CPU, compile the model (torch.compile, as `vllm serve` does by default): "
        "decoding about 1.2x faster on 2 cores (docs/benchmarks.md), for a minute or more of "
        "compiling at the first start on a data directory; the compiled code is kept under "
        "`<data_dir>/vllm/inductor` and a restart loads it. Off: eager. GPUs always compile. "
        "Compiled, blending and full prefills answer as eager ones do "
        "(`tests/integration/test_cpu_compile.py`).",
    )
    max_num_seqs: int = Field(16, ge=1, description="Sequences the engine batches at once.")
    max_num_batched_tokens: int | None = Field(
        None,
        ge=1,
        description="Prompt tokens the engine computes in one step (vLLM's chunked prefill): a "
        "longer prompt is prefilled over several steps, between which the other requests "
        "decode. Larger: a long prompt's first token sooner; smaller: steadier streams beside "
        "it. Default: what `vllm serve` takes on the hardware (2,048 per CPU process, 8,192 "
        "on an H100 or H200). At least `RAGBLEND_MAX_NUM_SEQS`.",
    )
    tensor_parallel_size: int = Field(
        1,
        ge=1,
        description="Processes (CPU) or GPUs that split the model; must divide its heads.",
    )
    cpu_reserved_cores: int | None = Field(
        None,
        ge=0,
        description="CPU only: cores the model's compute threads leave to vLLM's scheduler and "
        "the HTTP front end (vLLM's `VLLM_CPU_NUM_OF_RESERVED_CPU`, which wins when set). "
        "Default: vLLM's rule, one per rank plus one for a KV connector, which on 2 cores "
        "reserves none: on 2 quiet cores that prefilled 1.94x and decoded 1.41x faster than "
        "one reserved. The scheduler spins while it waits for a step, so where other processes "
        "keep the cores busy, one reserved decoded 2.4x faster (docs/benchmarks.md).",
    )
    tool_parser: str = Field(
        "auto",
        description="vLLM tool parser that reads tool calls from answers (`tool_choice` "
        "`auto`), e.g. `hermes`, `llama3_json`, `mistral`; `auto` picks the served model's "
        "(hermes for the catalog models).",
    )

    tool_calls_from_text: bool = Field(
        False,
        description="With `tool_choice` `auto`, an answer that is nothing but a JSON call (or "
        "array of calls), fenced or bare, naming an offered tool with arguments its schema "
        "accepts, is read as tool calls (small models often write calls so). Off by default: on "
        'BFCL it makes calls where no tool fits (docs/benchmarks.md, "Tool catalogs").',
    )

    @field_validator("tool_parser")
    @classmethod
    def _tool_parser_known(cls, value: str) -> str:
        if value == "auto":
            return value
        from vllm.tool_parsers import ToolParserManager  # slow to import: only when named

        known = ToolParserManager.list_registered()
        if value not in known:
            raise ValueError(f"must be 'auto' or one of vLLM's tool parsers: {', '.join(known)}")
        return value

    @model_validator(mode="after")
    def _step_budget_fits_the_batch(self) -> EngineSettings:
        budget = self.max_num_batched_tokens
        if budget is not None and budget < self.max_num_seqs:
            raise ValueError(
                f"RAGBLEND_MAX_NUM_BATCHED_TOKENS ({budget}) must be at least "
                f"RAGBLEND_MAX_NUM_SEQS ({self.max_num_seqs}): every sequence in a step "
                "computes at least one token"
            )
        return self

    @model_validator(mode="after")
    def _default_models_dir(self) -> EngineSettings:
        if self.models_dir == Path():
            self.models_dir = self.data_dir / "models"
        return self

    @cached_property
    def name_for_clients(self) -> str:
        return self.served_model_name or Path(self.model).name
