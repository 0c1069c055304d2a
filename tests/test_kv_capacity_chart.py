"""The KV page's capacity chart where the weights leave no room: it shaded the whole axis and
said "past 512 tokens not one sequence fits", as if a shorter context would fit; and its "KV
overtakes weights" tile, which named a crossover where no decode step runs."""

from __future__ import annotations

from roofline.plots.capacity import capacity_figure


def _labels(curves, no_fit):
    fig = capacity_figure([512, 1024, 4096], curves, 131072, no_fit_from=no_fit)
    return [a.text for a in fig.layout.annotations if "sequence" in a.text]


def test_a_device_whose_weights_leave_no_room_says_no_context_fits():
    assert _labels({"H100": [0, 0, 0]}, {"H100": 1}) == [
        " not one sequence fits at any context<br>(the weights leave no room)"
    ]
    assert _labels({"H100": [0, 0, 0], "L4": [0, 0, 0]}, {"H100": 1, "L4": 1}) == [
        " not one sequence fits at any context<br>on any device<br>(the weights leave no room)"
    ]


def test_where_a_sequence_fits_somewhere_the_shade_starts_where_the_last_one_stops():
    assert _labels({"H100": [5, 2, 0], "L4": [0, 0, 0]}, {"H100": 3000, "L4": 1}) == [
        " past 3,000 tokens<br>not one sequence fits<br>on any device"
    ]


def _tile(model: str, device: str, batch: int, context: int):
    from dashboard.kv_view import crossover_metric
    from roofline.hardware import get_hardware
    from roofline.kvcache import analyze_kv
    from roofline.models import get_model
    from roofline.settings import Settings
    from roofline.workload import Workload

    r = analyze_kv(Workload(get_model(model), "decode"), get_hardware(device), batch, context, Settings())
    return r, crossover_metric(r)


def test_the_crossover_tile_says_when_no_decode_step_runs_or_the_crossover_is_past_what_fits():
    # Llama 3.1 70B's 141 GB of bf16 weights on a 24 GB L4: no decode step, so no crossover to name.
    _, tile = _tile("llama-3.1-70b", "l4", 16, 8192)
    assert tile.value == "—" and "the weights alone do not fit on NVIDIA L4" in tile.help
    # Llama 3.1 8B at batch 16: 16 x 131 kB a token of context against 16.1 GB of weights crosses
    # near 7,700 tokens; an L4 holds about 1,900 at that batch.
    r, tile = _tile("llama-3.1-8b", "l4", 16, 8192)
    assert 7000 < r.crossover_context < 8000 and r.max_context < r.crossover_context
    assert tile.value == f"{r.crossover_context:,} tokens"
    assert f"past the {r.max_context:,} tokens a batch of 16 can hold" in tile.help
    # Reachable on an H100 at batch 256 (446 tokens, under the 1,760 that fit): the plain figure.
    r, tile = _tile("llama-3.1-8b", "h100-sxm", 256, 8192)
    assert r.crossover_context == 446 and "past" not in tile.help


def test_a_batch_that_fits_at_no_context_says_so_rather_than_past_zero_tokens():
    r, tile = _tile("llama-3.1-8b", "l4", 100_000, 8192)
    assert r.max_context == 0 and r.crossover_context == 1
    assert "a batch of 100,000 fits on NVIDIA L4 24GB at no context" in tile.help and "past the 0" not in tile.help


def test_the_engines_sequence_cap_is_drawn_where_memory_holds_more():
    # An H100 holds 2,000 short sequences, more than vLLM's 1,024 there: the cap is drawn. An L4
    # that holds 100 stays under its 256: no line for it, nor a stretched axis.
    fig = capacity_figure(
        [512, 4096], {"H100": [2000, 300], "L4": [100, 10]}, 131072, caps={1024: ["H100"], 256: ["L4"]}
    )
    lines = [s.y0 for s in fig.layout.shapes if s.yref == "y"]
    assert lines == [1024]
    assert [a.text for a in fig.layout.annotations if "cap" in a.text] == ["engine cap 1,024<br>(H100) "]
    # One cap for every device: no names.
    one = capacity_figure([512], {"H100": [2000], "H200": [3000]}, 131072, caps={1024: ["H100", "H200"]})
    assert [a.text for a in one.layout.annotations if "cap" in a.text] == ["engine cap 1,024 "]
    # A cap only some of its devices rise past names those.
    some = capacity_figure([512], {"A": [300], "B": [100], "C": [2000]}, 131072, caps={256: ["A", "B"], 1024: ["C"]})
    assert [a.text for a in some.layout.annotations if "cap" in a.text] == [
        "engine cap 256<br>(A) ",
        "engine cap 1,024<br>(C) ",
    ]


def test_a_curve_ends_at_the_longest_context_one_sequence_fits_at():
    """Between two contexts of the grid (1,024 holds 2, 4,096 none) the curve had stopped at 1,024;
    it runs on to 3,000 tokens, where one sequence still fits."""
    fig = capacity_figure([512, 1024, 4096], {"H100": [5, 2, 0]}, 131072, no_fit_from={"H100": 3000})
    curve = fig.data[0]
    assert list(curve.x) == [512, 1024, 3000, 4096] and list(curve.y[:3]) == [5, 2, 1]


def test_the_kv_variants_view_ends_each_curve_where_one_sequence_still_fits():
    from dashboard.kv_view import one_fits_up_to
    from roofline.hardware import get_hardware
    from roofline.memory import max_batch
    from roofline.models import get_model
    from roofline.settings import Settings
    from roofline.workload import Workload

    model = get_model("llama-3.1-8b")
    mha = Workload(model.model_copy(update={"num_kv_heads": model.num_heads}), "decode")
    h100, settings = get_hardware("h100-sxm"), Settings()
    end = one_fits_up_to(mha, h100, settings)
    assert end is not None and 92_682 < end < 110_218  # between the grid's points, as the page showed
    run = mha.on(h100, need_peak=False)[0]
    assert list(max_batch(run, h100, settings, [end, end + 1])) == [1, 0]
    assert one_fits_up_to(Workload(model, "decode"), h100, settings) is None  # GQA: to the model's maximum
