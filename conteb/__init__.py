"""Shared core of conteb-pipeline: configuration, paths, ids, Parquet schemas and atomic I/O.

Nothing in this package imports Dagster.
"""
