"""Figures carry the library's numbers, and label axes are categories (not forced linear)."""

import kvmem
from kvmem import plots, tables


def test_bars_over_labels_use_a_category_axis():
    rows = [(name, kvmem.estimate(name, tokens=8192)) for name in ("llama-3.1-8b", "deepseek-v3")]
    fig = plots.bytes_per_token_bars(tables.compare_frame(rows))
    assert fig.layout.xaxis.type is None  # plotly infers "category" for the labels
    assert list(fig.data[0].x) == ["llama-3.1-8b", "deepseek-v3"]
    assert list(fig.data[0].y) == [131072, 70272]


def test_context_chart_is_log_and_in_gib():
    model = kvmem.get_model("llama-3.1-8b")
    sweep = tables.context_sweep(model, contexts=[1024, 131072])
    fig = plots.kv_vs_context(sweep)
    assert fig.layout.xaxis.type == "log"
    assert list(fig.data[0].y) == [0.125, 16.0]  # 131,072 B/token x 1,024 and x 131,072 tokens, in GiB


def test_token_axes_tick_at_powers_of_two_labelled_as_typed():
    model = kvmem.get_model("llama-3.1-8b")
    sweep = tables.context_sweep(model, contexts=tables.model_contexts(model, 8192))  # 256 ... 128k
    axis = plots.kv_vs_context(sweep).layout.xaxis
    # ten powers of two (2^8 ... 2^17) are more than nine ticks: every second one, ending at the top
    assert list(axis.tickvals) == [512, 2048, 8192, 32768, 131072]
    assert list(axis.ticktext) == ["512", "2k", "8k", "32k", "128k"]
    assert all(kvmem.parse_tokens(text) == value for text, value in zip(axis.ticktext, axis.tickvals, strict=True))


def test_token_ticks_range_and_step():
    assert plots.token_ticks([256, 40960])["tickvals"] == [2**e for e in range(8, 16)]  # 8 ticks: all
    long = plots.token_ticks([256, 10_000_000])  # 2^8 ... 2^23: 16 powers -> every second one
    assert long["ticktext"] == ["512", "2k", "8k", "32k", "128k", "512k", "2M", "8M"]
    assert plots.token_ticks([256, 2**40])["tickvals"] == [2**e for e in range(8, 41, 4)]  # 33 powers -> every 4th
    assert plots.token_ticks([1000, 1500])["tickvals"] == [1024]
    assert plots.token_ticks([]) == {} and plots.token_ticks([0.5]) == {}
    assert plots.token_ticks([1100, 1500]) == {}  # no power of two between: plotly's ticks, not none


def test_memory_chart_stacks_weights_and_kv_and_shades_oom():
    model = kvmem.get_model("llama-3.1-8b")
    sweep = tables.context_sweep(model, contexts=[8192, 1048576], weights_bytes=16 * 2**30)
    fig = plots.memory_vs_context(sweep, gpu_lines=[("h100", 80 * 2**30)])
    assert [trace.name for trace in fig.data] == ["weights", "KV cache"]
    assert list(fig.data[0].y) == [16.0, 16.0]
    assert list(fig.data[1].y) == [17.0, 16.0 + 128.0]  # weights + 131,072 B/token x 8,192 and x 1,048,576
    gpu, oom = fig.layout.shapes  # shapes, with their own legend entries
    assert (gpu.name, gpu.type, gpu.y0, gpu.y1, gpu.line.dash, gpu.showlegend) == ("h100", "line", 80, 80, "dash", True)
    assert (oom.name, oom.type, oom.y0, oom.showlegend) == ("out of memory", "rect", 80, True)
    assert oom.y1 == 144 * 1.15  # above the highest point (144 GiB), so autorange shows the band
    assert (gpu.xref, gpu.x0, gpu.x1) == (oom.xref, oom.x0, oom.x1) == ("paper", 0, 1)  # across the whole plot


def test_template_reads_on_light_and_dark_pages_with_plotlys_colours():
    import plotly.colors

    light, dark = plots.template(dark=False)["layout"], plots.template(dark=True)["layout"]
    assert light["colorway"] == dark["colorway"] == plotly.colors.qualitative.Plotly  # "colour i mod 10"
    assert light["paper_bgcolor"] == light["plot_bgcolor"] == "rgba(0,0,0,0)"  # the page's colour shows

    def brightness(color: str) -> int:
        return sum(int(color[i:i + 2], 16) for i in (1, 3, 5))

    assert brightness(light["font"]["color"]) < 200 and brightness(dark["font"]["color"]) > 600
    assert brightness(dark["xaxis"]["gridcolor"]) < brightness(light["xaxis"]["gridcolor"])


def test_fit_heatmap_has_a_column_per_context_and_room_for_gpu_names():
    grid = tables.fit_grid("llama-3.1-8b", gpus=["h100-sxm-80gb", "rtx-4090-24gb"], contexts=[2048, 8192, 32768])
    figure = plots.fit_heatmap(grid)
    assert figure.layout.xaxis.type == "category" and figure.layout.yaxis.automargin is True
    assert list(figure.data[0].x) == ["2,048", "8,192", "32,768"]
    assert set(figure.data[0].y) == {"h100-sxm-80gb", "rtx-4090-24gb"}
