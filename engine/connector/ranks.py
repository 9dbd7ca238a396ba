"""Agreement between the tensor-parallel ranks that blend one request together.

Under tensor parallelism every rank runs the blend over its own KV heads, and the layers' own
collectives (row-parallel projections, the parallel embedding) exchange hidden states between
ranks inside the forward. Those collectives only line up while every rank takes the same path:
the same tokens recomputed, the same chunks loaded or computed, the same fallback. So every
per-rank decision that changes the path is agreed here, through vLLM's tensor-parallel group,
before it is acted on. Code that runs inside the forward (same code, same shapes on every rank)
fails on every rank alike or on none. A model that is not split agrees with itself at no cost.
"""

from __future__ import annotations

import torch
from torch import Tensor


class RankGroup:
    """This worker's place among the ranks that split the model, and agreement between them."""

    def __init__(self, rank: int = 0, world_size: int = 1, device: str | torch.device = "cpu"):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, world_size), got {rank} of {world_size}")
        self.rank = rank
        self.world_size = world_size
        self.device = torch.device(device)

    @classmethod
    def of_this_worker(cls) -> RankGroup:
        """The tensor-parallel group vLLM set up for the calling worker (one rank if none)."""
        from vllm.distributed import parallel_state

        if not parallel_state.model_parallel_is_initialized():
            return cls()
        group = parallel_state.get_tp_group()
        return cls(group.rank_in_group, group.world_size, group.device)

    @property
    def reports(self) -> bool:
        """Whether this rank reports a request's statistics: exactly one rank does."""
        return self.rank == 0

    def sum_heads(self, partial: Tensor) -> Tensor:
        """Per-token sums over this rank's heads completed over every rank's heads (fp32)."""
        return self._sum(partial.float())

    def all_can(self, flags: list[bool]) -> list[bool]:
        """Per item: True only where every rank's flag is True."""
        if self.world_size == 1 or not flags:
            return list(flags)
        counts = self._sum(torch.tensor(flags, dtype=torch.float32, device=self.device))
        return [int(count) == self.world_size for count in counts.tolist()]

    def any(self, flag: bool) -> bool:
        """True on every rank when any rank's flag is True."""
        return not self.all_can([not flag])[0]

    def _sum(self, tensor: Tensor) -> Tensor:
        if self.world_size == 1:
            return tensor
        from vllm.distributed import parallel_state

        return parallel_state.get_tp_group().all_reduce(tensor.contiguous())
