"""Stage logic of ConTEB curation (sources, chunking, pairing, dataset export, validation).

Pure functions over pyarrow tables and dataclasses; nothing here imports Dagster. The thin
Dagster assets in ``assets/`` call into this package.
"""
