"""Measuring rankings: trec_eval-exact retrieval metrics, bootstrap CIs and paired tests, per-position, document-level
and corpus-size views, TREC run files and their re-check with pytrec_eval."""
