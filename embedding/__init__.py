"""Embedding documents with a sentence-transformers model: model loading, window planning and the late-chunking
encoder, used alike by training (:mod:`training`) and evaluation (:mod:`evaluation`); no Dagster import."""
