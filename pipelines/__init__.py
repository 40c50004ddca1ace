"""The Dagster code location of conteb-pipeline (``pipelines.definitions``)."""
