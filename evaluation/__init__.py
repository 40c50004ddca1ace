"""Evaluation of retrieval systems on ConTEB tasks: corpora, systems, metrics, statistics, reports.

No Dagster import here: the assets in ``assets/evaluation.py`` and ``conteb evaluate`` both call
:func:`evaluation.runner.evaluate_task`.
"""
