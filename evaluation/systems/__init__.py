"""The retrieval systems: BM25, dense (independent, late chunking, title prefix), late interaction, their models
and encoders, exact ranking, and the dispatch from a configured system to its index (:mod:`.dispatch`)."""
