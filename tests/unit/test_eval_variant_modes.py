"""Which modes the retrieval-shaped evaluation asks under each chunk-context variant."""

from __future__ import annotations

import pytest

from load_tests.eval.retrieval_shaped import variant_specs


def _names(specs: dict[str, list]) -> dict[str, list[str]]:
    return {variant: [spec.name for spec in listed] for variant, listed in specs.items()}


def test_a_scoped_mode_is_asked_only_under_its_variant() -> None:
    modes = ["full", "blend@0.5", "learnt:reuse", "learnt:blend@0.15/metric=probe"]
    assert _names(variant_specs(modes, ["passages", "learnt"])) == {
        "passages": ["full", "blend@0.5"],
        "learnt": ["full", "blend@0.5", "reuse", "blend@0.15/metric=probe"],
    }


@pytest.mark.parametrize(
    ("mode", "message"),
    [("neighbours:reuse", "is not one of --variants"), ("learnt:full", "does not depend")],
)
def test_a_scope_outside_the_variants_or_on_full_prefill_is_refused(
    mode: str, message: str
) -> None:
    with pytest.raises(SystemExit, match=message):
        variant_specs(["full", mode], ["passages", "learnt"])
