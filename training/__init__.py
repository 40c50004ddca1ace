"""InSeNT training: losses, batching, the training loop, checkpoints and data parallelism over the late-chunking
encoder of :mod:`embedding.encoder` (no Dagster import)."""
