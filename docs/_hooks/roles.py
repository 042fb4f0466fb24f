"""MkDocs hook: Sphinx cross-reference roles in docstrings (``:func:`name```) are rendered by mkdocstrings as
the role's text followed by the code, ``:func:<code>name</code>``; this drops the role and keeps the code."""

import re

_ROLE = re.compile(r":(?:py:)?(?:func|meth|class|data|attr|mod|obj|exc|const):(<code>)")


def on_page_content(html, **kwargs):
    return _ROLE.sub(r"\1", html)
