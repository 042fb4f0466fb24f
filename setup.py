"""The one thing pyproject.toml cannot say: which folders outside ``normvar_core/`` ship inside it.

The repository keeps the dashboard (``app.py`` + ``views/``) and the default corpus at the top level;
the wheel (and a wheel built from the sdist) carries them as ``normvar_core/dashboard/`` and
``normvar_core/corpora/``, where ``normvar_core.datadir.shipped`` finds them once installed (in a
checkout it finds the top-level copies: one lookup, two layouts). Everything else is in pyproject.toml.
"""

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

# installed name -> folder in the repository (package-dir mapping; no file is copied or duplicated)
SHIPPED = {
    "normvar_core.dashboard": ".",  # app.py (the only top-level module) + .streamlit/config.toml
    "normvar_core.dashboard.views": "views",  # the pages
    "normvar_core.corpora": "data/corpora",  # the default corpus
}


class BuildPy(build_py):
    """The repository root is the dashboard's folder: of its modules only app.py ships (not setup.py)."""

    def find_package_modules(self, package, package_dir):
        found = super().find_package_modules(package, package_dir)
        return [m for m in found if m[1] == "app"] if package == "normvar_core.dashboard" else found


setup(
    cmdclass={"build_py": BuildPy},
    packages=find_packages(include=["normvar_core", "normvar_core.*", "normvar", "normvar.*"])
    + ["normvar_core.pipeline.models.shapes"]
    + list(SHIPPED),  # shapes: a data folder (no __init__.py)
    package_dir=SHIPPED,
    package_data={
        "normvar_core.dashboard": [".streamlit/config.toml"],
        "normvar_core.viz": ["scatter_gl.js"],  # the Occurrences page's WebGL scatter
        "normvar_core.pipeline.models.shapes": ["*.json", "meta/*.json"],  # the shipped shapes (normvar plan)
        "normvar_core.corpora": ["novels_en.txt.gz", "PROVENANCE.md"],
    },
)
