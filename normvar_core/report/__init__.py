"""Reports for the lab meeting: one slide per figure of the study a run supports, each with a one-line
takeaway computed from the numbers and the exact values in the speaker notes (``slides``), written as a
PowerPoint deck (python-pptx), a PDF (kaleido images + Pillow pages) or one self-contained HTML file
with the interactive figures (plotly.js inlined: no network) — ``writers``."""
