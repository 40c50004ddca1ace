"""InSeNT training: late-chunking encoder, losses, batching and the training loop (no Dagster import)."""
