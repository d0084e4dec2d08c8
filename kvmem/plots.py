"""Plotly figures: DataFrames in, Figures out. No arithmetic beyond unit scaling for axes."""

from __future__ import annotations

import plotly.graph_objects as go

__all__ = ["kv_vs_context"]

GIB = 2**30


def kv_vs_context(df, *, title: str = "KV cache vs context length", log_x: bool = True) -> go.Figure:
    """KV (and recurrent state, when any) in GiB against tokens per sequence."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=df["tokens"], y=df["kv_bytes"] / GIB, mode="lines+markers", name="KV cache",
                             hovertemplate="%{x:,} tokens<br>%{y:.3f} GiB<extra>KV</extra>"))
    if (df["state_bytes"] > 0).any():
        fig.add_trace(go.Scatter(x=df["tokens"], y=df["total_bytes"] / GIB, mode="lines", name="KV + state",
                                 line={"dash": "dot"}))
    fig.update_layout(title=title, xaxis_title="tokens per sequence", yaxis_title="GiB (2^30 bytes)",
                      xaxis_type="log" if log_x else "linear", template="plotly_white",
                      margin={"l": 40, "r": 20, "t": 50, "b": 40}, legend={"orientation": "h"})
    return fig
