"""Hand-offs between pages: the Compare picker never offers the run itself, and a selection handed to
Token clouds says how much of it the clouds draw."""

from __future__ import annotations

from dashboard_run import RUN, RUN2, open_page

from normvar_core.viz.selection import MAX_CLOUD_TYPES, cloud_handoff


def test_compare_picker_offers_only_other_runs(app):
    at = open_page(app, "compare")
    box = at.selectbox(key="w_run2")
    assert RUN not in box.options and RUN2 in box.options
    assert box.value == RUN2


def test_a_selection_handed_to_the_clouds_says_what_it_draws():
    sampled = {f"t{i}": i for i in range(4)}  # 4 types with stored samples
    tokens = [f"t{i}" for i in range(78)]  # 78 selected
    ids, note = cloud_handoff(tokens, sampled)
    assert ids == [0, 1, 2, 3]
    assert note.startswith("Showing 4 of the 78 selected token types") and "74 have no stored samples" in note
    many = {f"t{i}": i for i in range(78)}
    ids, note = cloud_handoff(tokens, many)
    assert len(ids) == MAX_CLOUD_TYPES and f"{78 - MAX_CLOUD_TYPES} more are past the cap" in note
    assert cloud_handoff(tokens[:3], many) == ([0, 1, 2], None)  # all drawn: nothing to say
