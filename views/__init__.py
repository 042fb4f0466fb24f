"""The dashboard's pages (one file each, listed in normvar_core/viz/pages.py) and their shared plumbing.

A regular package, not a namespace folder: otherwise a regular ``views`` package anywhere on sys.path
(say in the folder ``normvar up`` is started from) would win over this one and the app would not start.
"""
