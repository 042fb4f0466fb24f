"""The floor of bench_pages.py: one Streamlit page with one plotly Scattergl of 2,000 points."""

import numpy as np
import plotly.graph_objects as go
import streamlit as st

rng = np.random.default_rng(0)
x, y = rng.standard_normal((2, 2000))
st.plotly_chart(go.Figure(go.Scattergl(x=x, y=y, mode="markers")), width="stretch")
