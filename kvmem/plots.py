"""Plotly figures: DataFrames (from kvmem.tables) in, Figures out. Only unit scaling for axes."""

from __future__ import annotations

import plotly.graph_objects as go

__all__ = ["kv_vs_context", "memory_vs_context", "per_layer_bars", "k_vs_v", "bytes_per_token_bars",
           "compare_lines", "fit_heatmap", "breakdown_bar", "labelled_bars", "attention_heatmap",
           "speedup_lines", "predicted_vs_measured"]

GIB = 2**30
KIND_COLORS = {"full": "#1f77b4", "sliding": "#2ca02c", "chunked": "#17becf", "mla": "#9467bd",
               "linear": "#ff7f0e", "shared": "#7f7f7f", "none": "#c7c7c7"}


def _layout(fig, title, x_title, y_title="GiB (2^30 bytes)", log_x=False):
    # nested dicts, not "xaxis_title"-style paths: plotly parses those paths slowly on every rerun
    xaxis = {"title": {"text": x_title}}
    if log_x:  # otherwise plotly picks the axis type: linear for numbers, category for labels
        xaxis["type"] = "log"
    fig.update_layout({"title": {"text": title}, "xaxis": xaxis, "yaxis": {"title": {"text": y_title}},
                       "margin": {"l": 40, "r": 20, "t": 50, "b": 40}, "legend": {"orientation": "h", "y": -0.2}})
    return fig


def kv_vs_context(df, *, title: str = "KV cache vs context length", log_x: bool = True) -> go.Figure:
    """KV (and recurrent state, when any) in GiB against tokens per sequence."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=df["tokens"], y=df["kv_bytes"] / GIB, mode="lines+markers", name="KV cache",
                             hovertemplate="%{x:,} tokens<br>%{y:.3f} GiB<extra>KV</extra>"))
    if (df["state_bytes"] > 0).any():
        fig.add_trace(go.Scatter(x=df["tokens"], y=df["total_bytes"] / GIB, mode="lines", name="KV + state",
                                 line={"dash": "dot"}))
    return _layout(fig, title, "tokens per sequence", log_x=log_x)


def memory_vs_context(df, *, gpu_lines=(), title: str = "Device memory vs context") -> go.Figure:
    """Weights, then weights + KV (+ state) per device against context (log axis), GPU capacity
    lines, and the band above the largest capacity shaded as out of memory.

    Drawn with plain traces (cumulative sums from tables.context_sweep, no stackgroups, shapes or
    annotations), which plotly re-renders quickest when an input changes."""
    x = df["tokens"].tolist()
    weights = (df["weights_bytes"] / GIB).tolist()
    kv_top = ((df["weights_bytes"] + df["kv_bytes"]) / GIB).tolist()
    device = (df["device_bytes"] / GIB).tolist()
    fig = go.Figure()
    if any(weights):
        fig.add_trace(go.Scatter(x=x, y=weights, name="weights", mode="lines", fill="tozeroy",
                                 hovertemplate="%{y:.2f} GiB<extra>weights</extra>"))
    fig.add_trace(go.Scatter(x=x, y=kv_top, name="KV cache", mode="lines", fill="tonexty" if any(weights) else "tozeroy",
                             hovertemplate="%{x:,} tokens<br>%{y:.2f} GiB<extra>weights + KV</extra>"))
    if (df["state_bytes"] > 0).any():
        fig.add_trace(go.Scatter(x=x, y=device, name="recurrent state", mode="lines", fill="tonexty"))
    if gpu_lines:
        for name, capacity_bytes in gpu_lines:
            fig.add_trace(go.Scatter(x=[x[0], x[-1]], y=[capacity_bytes / GIB] * 2, name=name, mode="lines",
                                     line={"dash": "dash", "color": "#444"}))
        limit = max(capacity for _, capacity in gpu_lines) / GIB
        top = max(max(device), limit) * 1.15
        fig.add_trace(go.Scatter(x=[x[0], x[-1]], y=[limit, limit], mode="lines", line={"width": 0},
                                 showlegend=False, hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=[x[0], x[-1]], y=[top, top], mode="lines", line={"width": 0}, fill="tonexty",
                                 fillcolor="rgba(214, 39, 40, 0.12)", name="out of memory", hoverinfo="skip"))
    return _layout(fig, title, "tokens per sequence (log)", log_x=True)


def per_layer_bars(df, *, title: str = "Cache bytes per layer") -> go.Figure:
    """One bar per layer, coloured by attention kind."""
    fig = go.Figure()
    for kind, part in df.groupby("kind", sort=False):
        fig.add_trace(go.Bar(x=part["layer"], y=part["bytes"] / 2**20, name=kind,
                             marker_color=KIND_COLORS.get(kind)))
    return _layout(fig, title, "layer", "MiB (2^20 bytes)")


def k_vs_v(result, *, title: str = "K vs V") -> go.Figure:
    """K, V and recurrent state bytes of one Estimate."""
    labels = ["K", "V"] + (["state"] if result.state_bytes else [])
    values = [result.k_bytes, result.v_bytes] + ([result.state_bytes] if result.state_bytes else [])
    fig = go.Figure(go.Bar(x=labels, y=[v / GIB for v in values], text=[f"{v:,} B" for v in values]))
    return _layout(fig, title, "", "GiB (2^30 bytes)")


def bytes_per_token_bars(df, *, title: str = "KV bytes per token") -> go.Figure:
    """Bytes per cached token for each compared row."""
    fig = go.Figure(go.Bar(x=df["label"], y=df["bytes_per_token"], text=[f"{v:,.0f}" for v in df["bytes_per_token"]]))
    return _layout(fig, title, "", "bytes per token")


def compare_lines(frames: dict, *, title: str = "KV cache vs context") -> go.Figure:
    """One KV-vs-context line per label: {label: context_sweep DataFrame}."""
    fig = go.Figure()
    for label, df in frames.items():
        fig.add_trace(go.Scatter(x=df["tokens"], y=df["total_bytes"] / GIB, mode="lines+markers", name=label))
    return _layout(fig, title, "tokens per sequence (log)", log_x=True)


def fit_heatmap(df, *, title: str = "Max batch that fits") -> go.Figure:
    """Max batch over context (x) x GPU (y), from tables.fit_grid; 0 = does not fit."""
    pivot = df.pivot(index="gpu", columns="context", values="max_batch")
    fig = go.Figure(go.Heatmap(z=pivot.values, x=[f"{c:,}" for c in pivot.columns], y=list(pivot.index),
                               text=pivot.values, texttemplate="%{text}", colorscale="Blues",
                               hovertemplate="%{y}<br>%{x} tokens<br>max batch %{z}<extra></extra>"))
    return _layout(fig, title, "context (tokens per sequence)", "GPU")


def breakdown_bar(df, *, total_bytes: int, title: str = "Memory per device") -> go.Figure:
    """One stacked bar of a Fit's breakdown (tables.breakdown_frame) against the device total.

    When the engine reserves a KV pool (``kv_pool``), the pool is drawn and the KV the workload
    needs (``kv``) is marked inside it rather than stacked a second time."""
    parts = df.set_index("part")["bytes"]
    pooled = "kv_pool" in parts.index
    fig = go.Figure()
    for part, nbytes in parts.items():
        if nbytes > 0 and not (pooled and part == "kv"):
            fig.add_trace(go.Bar(x=[nbytes / GIB], y=["device"], orientation="h", name=part,
                                 hovertemplate=f"{part}: %{{x:.2f}} GiB<extra></extra>"))
    if pooled:
        fig.add_vline(x=(parts.get("weights", 0) + parts["kv"]) / GIB, line_dash="dot",
                      annotation_text="KV this workload needs", annotation_position="bottom right")
    fig.add_vline(x=total_bytes / GIB, line_dash="dash", annotation_text="device memory")
    fig.update_layout(barmode="stack", height=300)
    _layout(fig, title, "GiB (2^30 bytes)", "")
    fig.update_layout(legend={"orientation": "h", "y": 1.15})
    return fig


def labelled_bars(df, *, label: str, value: str, color: str | None = None, title: str = "",
                  y_title: str = "GiB (2^30 bytes)", scale: float = GIB) -> go.Figure:
    """Horizontal bars of ``value`` / ``scale`` per ``label`` (long labels stay readable),
    one trace per ``color`` group, in the frame's order from the top."""
    fig = go.Figure()
    groups = df.groupby(color, sort=False) if color else [(None, df)]
    for name, part in groups:
        fig.add_trace(go.Bar(y=part[label].tolist(), x=(part[value] / scale).tolist(), orientation="h",
                             name=str(name) if name is not None else value))
    _layout(fig, title, y_title, "")
    fig.update_yaxes(categoryorder="array", categoryarray=df[label].tolist()[::-1], automargin=True)
    fig.update_layout(height=max(300, 28 * len(df) + 140), legend={"orientation": "h", "y": 1.02, "yanchor": "bottom"})
    return fig


def attention_heatmap(matrix, *, title: str = "Attention weights", first_query: int = 1) -> go.Figure:
    """A (query x key) attention-weight matrix; rows are the tokens asking (numbered from
    ``first_query``), columns the tokens attended to."""
    fig = go.Figure(go.Heatmap(z=matrix, x=[f"k{j + 1}" for j in range(len(matrix[0]))],
                               y=[f"q{first_query + i}" for i in range(len(matrix))], colorscale="Viridis",
                               zmin=0, zmax=1,
                               text=[[f"{v:.3f}" for v in row] for row in matrix], texttemplate="%{text}"))
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, title, "key (token attended to)", "query")


def speedup_lines(df, *, title: str = "Time per generated token") -> go.Figure:
    """Measured ms per token with and without the KV cache against sequence length (lab.time_per_token)."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=df["tokens"], y=df["ms_per_token_uncached"], mode="lines+markers", name="no cache"))
    fig.add_trace(go.Scatter(x=df["tokens"], y=df["ms_per_token_cached"], mode="lines+markers", name="KV cache"))
    return _layout(fig, title, "sequence length (tokens, log)", "ms per token", log_x=True)


def predicted_vs_measured(df, *, title: str = "Predicted vs measured") -> go.Figure:
    """kvmem's prediction and the measured storages (and peaks) against tokens (measure rows)."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=df["tokens"], y=df["predicted_bytes"] / 2**20, mode="lines+markers",
                             name="predicted"))
    fig.add_trace(go.Scatter(x=df["tokens"], y=df["tensor_bytes"] / 2**20, mode="markers", name="measured storages",
                             marker={"symbol": "x", "size": 12}))
    fig.add_trace(go.Scatter(x=df["tokens"], y=df["peak_bytes"] / 2**20, mode="markers", name="measured peak",
                             marker={"symbol": "triangle-up", "size": 10}))
    return _layout(fig, title, "tokens per sequence", "MiB (2^20 bytes)")
