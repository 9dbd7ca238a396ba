"""The profile summary sums a trace the way a reader of it would: nested spans once."""

from load_tests.profile_blend import event_name, inclusive_totals


def _span(name: str, ts: float, dur: float, cat: str = "python_function", tid: int = 1) -> dict:
    return {"ph": "X", "name": name, "ts": ts, "dur": dur, "cat": cat, "tid": tid}


def test_operators_modules_and_project_functions_are_named_and_plumbing_dropped():
    assert event_name(_span("aten::mm", 0, 1, cat="cpu_op")) == "aten::mm"
    assert event_name(_span("nn.Module: Qwen2MLP_17", 0, 1)) == "nn.Module: Qwen2MLP"
    assert event_name(_span("engine/blend/fuse.py(236): _cached_layer", 0, 1)) == (
        "engine/blend/fuse.py:_cached_layer"
    )
    step = "vllm/v1/worker/gpu_model_runner.py(4211): execute_model"
    assert event_name(_span(step, 0, 1)) == "engine step (execute_model)"
    assert event_name(_span("threading.py(331): wait", 0, 1)) is None
    assert event_name({"ph": "i", "name": "marker", "ts": 0}) is None


def test_nested_spans_of_one_name_count_once_and_others_add_up():
    events = [
        _span("nn.Module: Qwen2MLP_0", 0, 10),
        _span("nn.Module: Qwen2MLP_1", 2, 5),  # inside the first: not counted again
        _span("nn.Module: Qwen2MLP_2", 20, 4),
        _span("aten::mm", 3, 2, cat="cpu_op"),
        _span("aten::mm", 1, 2, cat="cpu_op", tid=2),  # another thread
    ]
    totals = inclusive_totals(events)
    assert totals == {"nn.Module: Qwen2MLP": 14.0, "aten::mm": 4.0}
