"""The floor for bench/app_latency.py: one number input and one plotly chart, nothing else."""

import plotly.graph_objects as go
import streamlit as st

batch = st.number_input("Batch", 1, 10**6, 1)
st.plotly_chart(go.Figure(go.Scatter(x=[256, 1024, 8192], y=[1, 2 * batch, 3])).update_layout(
    title=f"floor (batch {batch})"))
