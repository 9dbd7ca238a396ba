"""Mode specs for evaluations: a blend mode, a ratio and per-request selection overrides.

    full | reuse | blend@0.15 | blend@0.15/check=1:1/heads=0/metric=k/norm=1
    blend@0.1/metric=qv/pool=3 | blend@0.2/mass=0.5 | blend@0/heads=16 | blend@0.1/metric=probe

``check`` is the gradual schedule (layer:scale pairs, comma-separated), ``heads`` the chunk
head tokens always recomputed (at ratio 0: only they), ``metric`` the deviation (k, v, kv), the
question's attention (attn), both in two stages (qv: a pool of the most attended tokens, then
the most V-deviating) or the question probing the reused cache before any chunk token is
computed (probe: no layer computed whole), ``pool`` the qv pool in multiples of what a check
layer keeps, ``mass`` the adaptive budget (keep only the tokens holding this share of the
score, at most the ratio's count), ``norm`` whether deviations are normalized per token.
Options not given keep the run's recipe (``ModeSpec.recipe``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.contract import METRICS, MODES, Mode, Recipe, parse_check_layers


@dataclass(frozen=True)
class ModeSpec:
    name: str
    mode: Mode
    ratio: float
    choices: dict[str, Any]
    """The selection options the spec names (``Recipe`` fields)."""

    def recipe(self, base: Recipe) -> Recipe:
        """``base`` with this spec's mode, ratio and choices over it."""
        return base.choose(mode=self.mode, recompute_ratio=self.ratio, **self.choices)


def parse_mode_spec(name: str) -> ModeSpec:
    head, *options = name.split("/")
    mode, _, ratio_text = head.partition("@")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} in {name!r}")
    if mode == "blend" and not ratio_text:
        raise ValueError(f"blend needs a ratio, e.g. blend@0.15, got {name!r}")
    ratio = float(ratio_text) if ratio_text else (1.0 if mode == "full" else 0.0)
    fields: dict[str, object] = {}
    for option in options:
        key, _, value = option.partition("=")
        if key == "check":
            fields["check_layers"] = parse_check_layers(value)
        elif key == "heads":
            fields["chunk_head_tokens"] = int(value)
        elif key == "metric":
            if value not in METRICS:
                raise ValueError(f"metric must be one of {METRICS}, got {value!r}")
            fields["metric"] = value
        elif key == "pool":
            fields["question_pool"] = float(value)
        elif key == "mass":
            fields["budget_mass"] = float(value)
        elif key == "norm":
            fields["normalize"] = value in ("1", "true", "yes")
        else:
            raise ValueError(f"unknown option {key!r} in {name!r}")
    if fields and mode != "blend":
        raise ValueError(f"selection options only apply to blend, got {name!r}")
    Recipe().choose(mode=mode, recompute_ratio=ratio, **fields)  # refuses what is out of bounds
    return ModeSpec(name, mode, ratio, fields)  # type: ignore[arg-type]
