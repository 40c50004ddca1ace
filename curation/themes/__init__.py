"""A document's theme (the entity or topic its queries name) and the mentions of it in a text, in three modules:

* :mod:`curation.themes.naming`: the theme without an LLM (from the title, else the document's head, else the doc
  id) — :func:`~curation.themes.naming.offline_theme`;
* :mod:`curation.themes.mentions`: a theme's names and their simple variants, finding their mentions in a text and
  masking them — :func:`~curation.themes.mentions.find_mentions`;
* :mod:`curation.themes.stage`: the themes stage, the LLM requests and the ``THEMES`` table —
  :func:`~curation.themes.stage.themes_table`.

This package module imports none of them (import the one you need).
"""
