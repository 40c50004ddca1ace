"""Thin Dagster assets, one module per stage; each calls the pure logic in ``curation``.

Every module exposes a factory that builds the stage's asset(s) for one task of
``conteb.yaml``: key prefix = task name, group = ``<task>_<stage family>`` (``conteb.names.stage_group``).
"""
