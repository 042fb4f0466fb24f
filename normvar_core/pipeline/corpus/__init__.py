"""Reading, selecting and streaming the text of a corpus (the plan's input)."""
