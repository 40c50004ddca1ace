"""``controlled``: generated same-template documents about invented entities, in the style of the ConTEB paper's
Geography and Football tasks (and of the hand-written ``data/sample``, see its README).

The catalogue (:data:`.catalog.TEMPLATES`, in this order; each module's docstring lists its paragraphs and questions):

========================  ==============================  ==========================================================
domain                    templates                       module
========================  ==============================  ==========================================================
``geography``             ``city``, ``island``            :mod:`.geography`
``sport``                 ``football_club``,              :mod:`.sport`
                          ``cycling_team``
``organisations``         ``company``, ``university``     :mod:`.organisations`
``people``                ``composer``, ``scientist``     :mod:`.people`
``things``                ``ship``, ``grape_variety``     :mod:`.things`
========================  ==============================  ==========================================================

Every document of a template has the same 11 or 12 paragraphs (the rule allows 8 to 12) in the same order
(:mod:`.template`); only the facts differ. The entity (an invented name, :mod:`.names`) is named in the first
paragraph only; later paragraphs say "the city", "the club", "she". Each template asks 9 questions, one per fact
slot, in the same words for every document ("In which year did the <entity> tram network open?"); one is answered in
the first paragraph (the control), the others later. Answers are unique among the documents of a template and occur
once in their document, so a chunk embedded alone cannot be told from the same paragraph of another document, while
the question names the entity that only the document's head carries. :func:`.generate.generate_controlled` checks
all of it and refuses (raises :class:`~curation.sources.model.SourceError`) a corpus that breaks a rule.

Fixed prose never runs :data:`conteb.content.PASSAGE_WORDS` words without a value unique to the document, so two
documents of a template share no passage fingerprint (:mod:`conteb.content`; ``tests/sources/test_controlled.py``
checks it). The corpus's sizes (document lengths, chunks, where the answers fall): bench/BENCHMARKS.md, "Figures
moved out of docstrings and comments".

Adding a template: write it in a domain module (a new module for a new domain), add it to that module's
``TEMPLATES`` and append that tuple to :data:`.catalog.TEMPLATES`; :meth:`.template.Template.check` runs when the
catalogue is imported, and ``tests/sources/test_controlled.py`` checks the generated corpus. Invented names are
handed out over the whole catalogue and avoid every word of every template, so a new or edited template changes
some names of the others: a corpus is reproducible for a given version of the catalogue, not across versions.

Modules: :mod:`.catalog` (the templates by name and domain, :func:`~.catalog.select_templates`), :mod:`.generate`
(the corpus and its checks), :mod:`.load` (:func:`~.load.load_controlled`, the ``kind: controlled`` loader),
:mod:`.names`, :mod:`.template` and one module per domain. This package module imports none of them, so no import
cycle runs through it (an import contract of ``pyproject.toml`` keeps it so): import the module you need.

License of the generated text: CC0 1.0 (written for this project; the entities and facts are fictional).
"""
