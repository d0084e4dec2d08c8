"""Plotly figures: DataFrames (from kvmem.tables) in, Figures out. Only unit scaling for axes.

Each figure is built in one step from plain trace and layout dicts (``_figure``): plotly
validates a whole spec about ten times faster than it applies ``add_trace`` /
``update_layout`` calls one by one, and the app rebuilds its charts on every input change.
"""

from __future__ import annotations

import math
import numbers

import plotly.graph_objects as go

from .units import format_tokens

__all__ = ["template", "token_ticks", "kv_vs_context", "memory_vs_context", "per_layer_bars", "k_vs_v",
           "bytes_per_token_bars", "compare_lines", "fit_heatmap", "breakdown_bar", "labelled_bars",
           "attention_heatmap", "speedup_lines", "predicted_vs_measured"]

GIB = 2**30
MIB = 2**20
KIND_COLORS = {"full": "#1f77b4", "sliding": "#2ca02c", "chunked": "#17becf", "mla": "#9467bd",
               "linear": "#ff7f0e", "shared": "#7f7f7f", "none": "#c7c7c7",
               "compressed": "#d62728"}


# Plotly's default colours, in its order: compare_lines relies on "colour i mod 10".
COLORWAY = ("#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880", "#FF97FF",
            "#FECB52")
# Text and grid colours that read on Streamlit's light (#FFFFFF) and dark (#0E1117) backgrounds.
_INK = {False: "#31333F", True: "#FAFAFA"}
_GRID = {False: "#E6EAF1", True: "#31333F"}


def template(*, dark: bool = False) -> dict:
    """A small plotly template for a light or dark page: transparent backgrounds (the page's own
    colour shows), readable text and grid lines, plotly's colours.

    The app draws with it and ``theme=None`` instead of Streamlit's plotly theme, which the
    browser re-applies to every figure on every rerun (about 55 ms of each rerun on the bench
    machine; bench/README.md), and instead of plotly's default template (6 KB per figure)."""
    axis = {"gridcolor": _GRID[dark], "zerolinecolor": _GRID[dark], "linecolor": _GRID[dark]}
    return {"layout": {"paper_bgcolor": "rgba(0,0,0,0)", "plot_bgcolor": "rgba(0,0,0,0)", "colorway": list(COLORWAY),
                       "font": {"family": '"Source Sans", "Source Sans Pro", sans-serif', "color": _INK[dark]},
                       "xaxis": axis, "yaxis": axis}}


def token_ticks(values, most: int = 9) -> dict:
    """Ticks for a log axis of token counts: the powers of two in the values' range, labelled as
    people type them ("1k", "128k", "1M"; k = 1024), every second or fourth one when there would
    be more than ``most``. Plotly's own log ticks label every digit of every decade (2 3 ... 9
    1000 2 3 ...): harder to read, and measuring their ~30 labels cost about 45 ms of each
    rerun in the browser (bench/README.md). Empty (plotly's own ticks) when no power of two lies
    in the range."""
    positive = [v for v in values if isinstance(v, numbers.Real) and not isinstance(v, bool) and v >= 1]
    if not positive:
        return {}
    low, high = math.ceil(math.log2(min(positive))), math.floor(math.log2(max(positive)))
    exponents = list(range(low, high + 1))
    if not exponents:  # no power of two in the range (1100 ... 1500): plotly's own ticks
        return {}
    step = 1
    while len(exponents[::step]) > most:
        step *= 2
    picked = [2**e for e in exponents if (e - exponents[-1]) % step == 0]
    return {"tickmode": "array", "tickvals": picked, "ticktext": [format_tokens(v) for v in picked]}


def _figure(traces, title, x_title, y_title="GiB (2^30 bytes)", *, log_x=False, **layout) -> go.Figure:
    """A Figure from trace dicts; the x axis is log when asked (token counts: ``token_ticks``),
    else plotly infers it (linear for numbers, category for labels)."""
    xaxis = {"title": {"text": x_title}, **layout.pop("xaxis", {})}
    if log_x:
        xaxis["type"] = "log"
        xaxis = {**token_ticks([x for trace in traces for x in trace.get("x", ())]), **xaxis}
    spec = {"title": {"text": title}, "xaxis": xaxis, "yaxis": {"title": {"text": y_title}, **layout.pop("yaxis", {})},
            "margin": {"l": 40, "r": 20, "t": 50, "b": 40}, "legend": {"orientation": "h", "y": -0.2}}
    spec.update(layout)
    return go.Figure(data=traces, layout=spec)


def _line(x, y, name, **style) -> dict:
    return {"type": "scatter", "x": list(x), "y": list(y), "name": name, "mode": "lines", **style}


def kv_vs_context(df, *, title: str = "KV cache vs context length", log_x: bool = True) -> go.Figure:
    """KV (and recurrent state, when any) in GiB against tokens per sequence.
    ``df``: a context sweep, as a DataFrame or as columns (tables.as_columns)."""
    traces = [_line(df["tokens"], [b / GIB for b in df["kv_bytes"]], "KV cache", mode="lines+markers",
                    hovertemplate="%{x:,} tokens<br>%{y:.3f} GiB<extra>KV</extra>")]
    if any(b > 0 for b in df["state_bytes"]):
        traces.append(_line(df["tokens"], [b / GIB for b in df["total_bytes"]], "KV + state", line={"dash": "dot"}))
    return _figure(traces, title, "tokens per sequence", log_x=log_x)


def memory_vs_context(df, *, gpu_lines=(), title: str = "Device memory vs context") -> go.Figure:
    """Weights, then weights + KV (+ state) per device against context (log axis); each GPU's
    capacity a dashed line, and the band above the largest capacity shaded as out of memory.
    The lines and the band are layout shapes with legend entries, not traces: the browser
    redraws three fewer traces on every rerun (bench/README.md).
    ``df``: a context sweep, as a DataFrame or as columns (tables.as_columns)."""
    x = list(df["tokens"])
    weights = [b / GIB for b in df["weights_bytes"]]
    device = [b / GIB for b in df["device_bytes"]]
    kv_top = [(w + k) / GIB for w, k in zip(df["weights_bytes"], df["kv_bytes"], strict=True)]
    traces = []
    if any(weights):
        traces.append(_line(x, weights, "weights", fill="tozeroy", hovertemplate="%{y:.2f} GiB<extra>weights</extra>"))
    traces.append(_line(x, kv_top, "KV cache", fill="tonexty" if any(weights) else "tozeroy",
                        hovertemplate="%{x:,} tokens<br>%{y:.2f} GiB<extra>weights + KV</extra>"))
    if any(b > 0 for b in df["state_bytes"]):
        traces.append(_line(x, device, "recurrent state", fill="tonexty"))
    shapes = []
    if gpu_lines:
        across = {"xref": "paper", "x0": 0, "x1": 1, "yref": "y", "showlegend": True}
        for name, capacity_bytes in gpu_lines:
            shapes.append({"type": "line", "name": name, "y0": capacity_bytes / GIB, "y1": capacity_bytes / GIB,
                           "line": {"dash": "dash", "color": "#7f7f7f"}, **across})
        limit = max(capacity for _, capacity in gpu_lines) / GIB
        top = max(max(device), limit) * 1.15
        shapes.append({"type": "rect", "name": "out of memory", "y0": limit, "y1": top, "layer": "below",
                       "fillcolor": "rgba(214, 39, 40, 0.12)", "line": {"width": 0}, **across})
    return _figure(traces, title, "tokens per sequence (log)", log_x=True, shapes=shapes)


def per_layer_bars(df, *, title: str = "Cache bytes per layer") -> go.Figure:
    """One bar per layer, coloured by attention kind."""
    traces = [{"type": "bar", "x": part["layer"].tolist(), "y": (part["bytes"] / MIB).tolist(), "name": kind,
               "marker": {"color": KIND_COLORS.get(kind)}} for kind, part in df.groupby("kind", sort=False)]
    return _figure(traces, title, "layer", "MiB (2^20 bytes)")


def k_vs_v(result, *, title: str = "K vs V") -> go.Figure:
    """K, V and recurrent state bytes of one Estimate."""
    parts = [("K", result.k_bytes), ("V", result.v_bytes)] + ([("state", result.state_bytes)]
                                                               if result.state_bytes else [])
    trace = {"type": "bar", "x": [name for name, _ in parts], "y": [value / GIB for _, value in parts],
             "text": [f"{value:,} B" for _, value in parts]}
    return _figure([trace], title, "")


def bytes_per_token_bars(df, *, title: str = "KV bytes per token") -> go.Figure:
    """Bytes per cached token for each compared row."""
    trace = {"type": "bar", "x": df["label"].tolist(), "y": df["bytes_per_token"].tolist(),
             "text": [f"{v:,.0f}" for v in df["bytes_per_token"]]}
    return _figure([trace], title, "", "bytes per token")


_DASHES = ("solid", "dot", "dash", "dashdot", "longdash")


def compare_lines(frames: dict, *, title: str = "KV cache vs context", x_title: str = "tokens per sequence (log)",
                  merge_equal: bool = False) -> go.Figure:
    """One KV-vs-context line per label: {label: context sweep (DataFrame or columns)}.

    Line i gets plotly's colour i mod 10 and dash (i + i // 10) mod 5: the first 50 lines differ
    in colour or dash, and neighbours always differ in dash. ``merge_equal``: lines with the same
    bytes at every point are one line named "A = B" (StreamingLLM's 4 + 1,020 and H2O's 1,024 keep
    the same tokens: drawn apart, one hid under the other). The legend sits to the right, clear of
    the axis title, which ``x_title`` names as the page's title does."""
    merged: dict[tuple, list] = {}
    for label, df in frames.items():
        key = (tuple(df["tokens"]), tuple(df["total_bytes"])) if merge_equal else (label,)
        if key in merged:
            merged[key][0] = f"{merged[key][0]} = {label}"
        else:
            merged[key] = [label, df]
    traces = [_line(df["tokens"], [b / GIB for b in df["total_bytes"]], label, mode="lines+markers",
                    line={"dash": _DASHES[(i + i // 10) % len(_DASHES)], "width": 3 if i % 2 == 0 else 2})
              for i, (label, df) in enumerate(merged.values())]
    return _figure(traces, title, x_title, log_x=True,
                   legend={"orientation": "v", "x": 1.02, "y": 1, "xanchor": "left"})


def fit_heatmap(df, *, title: str = "Max batch that fits") -> go.Figure:
    """Max batch over context (x) x GPU (y), from tables.fit_grid; 0 = does not fit. One column per
    context, equally wide (a category axis), and room for the GPUs' whole names."""
    pivot = df.pivot(index="gpu", columns="context", values="max_batch")
    values = pivot.values.tolist()
    trace = {"type": "heatmap", "z": values, "x": [f"{c:,}" for c in pivot.columns], "y": list(pivot.index),
             "text": values, "texttemplate": "%{text}", "colorscale": "Blues",
             "hovertemplate": "%{y}<br>%{x} tokens<br>max batch %{z}<extra></extra>"}
    return _figure([trace], title, "context (tokens per sequence)", "GPU", xaxis={"type": "category"},
                   yaxis={"automargin": True})


def breakdown_bar(df, *, total_bytes: int, title: str = "Memory per device", names: dict | None = None) -> go.Figure:
    """One stacked bar of a Fit's breakdown (tables.breakdown_frame) against the device total.

    When the engine reserves a KV pool (``kv_pool``), the pool is drawn and the KV the workload
    needs (``kv``) is marked inside it rather than stacked a second time; the shortfall is drawn as
    the KV the pool lacks (at most ``kv`` less the pool), never the weights' overflow again (a 70B's
    131 GiB on a 24 GiB card was drawn with another 113 GiB of "shortfall"). ``names`` gives each
    part the words a person reads (e.g. ``free`` -> vLLM's 1 - gpu_memory_utilization reserve).
    The two marks' labels sit on two rows above the bar, so they never overlap."""
    names = names or {}
    parts = df.set_index("part")["bytes"].copy()
    pooled = "kv_pool" in parts.index
    if parts.get("shortfall", 0) > 0:   # the KV the pool lacks: weights that overflow the device are drawn once
        parts["shortfall"] = min(parts["shortfall"], parts.get("kv", 0) - (parts["kv_pool"] if pooled else 0))
    traces = [{"type": "bar", "x": [nbytes / GIB], "y": ["device"], "orientation": "h",
               "name": names.get(part, part),
               "hovertemplate": f"{names.get(part, part)}: %{{x:.2f}} GiB<extra></extra>"}
              for part, nbytes in parts.items() if nbytes > 0 and not (pooled and part == "kv")]
    marks = [((total_bytes) / GIB, "device memory", "dash", 1.0)]
    if pooled:
        marks.append(((parts.get("weights", 0) + parts["kv"]) / GIB, "KV this workload needs", "dot", 1.16))
    shapes = [{"type": "line", "x0": x, "x1": x, "y0": 0, "y1": row, "yref": "paper", "line": {"dash": dash}}
              for x, _, dash, row in marks]
    notes = [{"x": x, "y": row, "yref": "paper", "text": text, "showarrow": False, "yanchor": "bottom",
              "xanchor": "right"} for x, text, _, row in marks]
    return _figure(traces, title, "GiB (2^30 bytes)", "", barmode="stack", height=320, shapes=shapes,
                   annotations=notes, legend={"orientation": "h", "y": -0.45},
                   margin={"l": 60, "r": 20, "t": 90, "b": 40})


def labelled_bars(df, *, label: str, value: str, color: str | None = None, title: str = "",
                  y_title: str = "GiB (2^30 bytes)", scale: float = GIB) -> go.Figure:
    """Horizontal bars of ``value`` / ``scale`` per ``label`` (long labels stay readable),
    one trace per ``color`` group, in the frame's order from the top."""
    groups = df.groupby(color, sort=False) if color else [(value, df)]
    traces = [{"type": "bar", "orientation": "h", "y": part[label].tolist(), "x": (part[value] / scale).tolist(),
               "name": str(name)} for name, part in groups]
    return _figure(traces, title, y_title, "", height=max(300, 28 * len(df) + 140),
                   yaxis={"categoryorder": "array", "categoryarray": df[label].tolist()[::-1], "automargin": True},
                   legend={"orientation": "v", "x": 1.02, "y": 1, "xanchor": "left"})  # beside: clear of the title


def attention_heatmap(matrix, *, title: str = "Attention weights", first_query: int = 1) -> go.Figure:
    """A (query x key) attention-weight matrix; rows are the tokens asking (numbered from
    ``first_query``), columns the tokens attended to."""
    trace = {"type": "heatmap", "z": matrix, "x": [f"k{j + 1}" for j in range(len(matrix[0]))],
             "y": [f"q{first_query + i}" for i in range(len(matrix))], "colorscale": "Viridis", "zmin": 0,
             "zmax": 1, "text": [[f"{v:.3f}" for v in row] for row in matrix], "texttemplate": "%{text}"}
    return _figure([trace], title, "key (token attended to)", "query", yaxis={"autorange": "reversed"})


def speedup_lines(df, *, title: str = "Time per generated token") -> go.Figure:
    """Measured ms per token with and without the KV cache against sequence length (lab.time_per_token)."""
    traces = [_line(df["tokens"], df["ms_per_token_uncached"], "no cache", mode="lines+markers"),
              _line(df["tokens"], df["ms_per_token_cached"], "KV cache", mode="lines+markers")]
    return _figure(traces, title, "sequence length (tokens, log)", "ms per token", log_x=True)


def predicted_vs_measured(df, *, title: str = "Predicted vs measured") -> go.Figure:
    """kvmem's prediction and the measured storages (and peaks) against tokens (measure rows)."""
    traces = [_line(df["tokens"], df["predicted_bytes"] / MIB, "predicted", mode="lines+markers"),
              _line(df["tokens"], df["tensor_bytes"] / MIB, "measured storages", mode="markers",
                    marker={"symbol": "x", "size": 12}),
              _line(df["tokens"], df["peak_bytes"] / MIB, "measured peak", mode="markers",
                    marker={"symbol": "triangle-up", "size": 10})]
    return _figure(traces, title, "tokens per sequence", "MiB (2^20 bytes)")
