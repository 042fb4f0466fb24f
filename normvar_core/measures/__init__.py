"""The declared measures, one module each (``MEASURE = Measure(...)``); :func:`normvar_core.measure.all_measures`
finds them by discovery, so adding a file registers a measure. These modules hold data only: they import
``normvar_core.measure`` and ``normvar_core.constants`` and nothing else."""
