"""The dashboard pages' one import: data access (``_data``), view state and widgets (``_state``) and
page chrome (``_chrome``), re-exported. Pages only call the library and draw; everything
statistical lives in ``normvar_core``."""
from __future__ import annotations

from views._chrome import *  # noqa: F401,F403
from views._data import *  # noqa: F401,F403
from views._state import *  # noqa: F401,F403
