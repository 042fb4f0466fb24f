"""``python -m normvar``: the ``normvar`` command line (the library itself is ``normvar_core``)."""
