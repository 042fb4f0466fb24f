"""The hand-written WebGL scatter (``normvar_core/viz/scatter_gl.js``) as a Streamlit v2 component: the
payload is bytes (``occurrence_figures.scatter_payload``), the component answers with the state ``picked``
({"index", "x", "y"} of a clicked point) and the trigger ``selection`` ({"kind": "box", "x": [x0, x1], "y": [y0, y1]},
{"kind": "lasso", "polygon": [[x, y], ...]} or {"kind": "clear"})."""

from __future__ import annotations

import streamlit as st

from normvar_core.viz.occurrence_figures import JS

CSS = """
.nv-scatter { font: 12px sans-serif; }
.nv-tools { display: flex; gap: 4px; align-items: center; margin-bottom: 4px; flex-wrap: wrap; }
.nv-tools button { border: 1px solid #bbb; background: #fff; border-radius: 4px; padding: 2px 8px; cursor: pointer; }
.nv-tools button.on { background: #333; color: #fff; border-color: #333; }
.nv-hint { color: #777; margin-left: 6px; }
.nv-stage { position: relative; line-height: 0; border: 1px solid #ddd; }
.nv-stage canvas { display: block; }
.nv-ink { position: absolute; left: 0; top: 0; cursor: crosshair; touch-action: none; }
"""

scatter = st.components.v2.component("normvar.scatter_gl", css=CSS, js=JS.read_text())
"""Mount with ``scatter(data=payload_bytes, key=..., height=..., on_picked_change=..., on_selection_change=...)``."""

__all__ = ["scatter"]
