"""KV Planner's simulator: closed-form KV sizing and a batched vLLM-style engine.

This package is plain Python + numpy. It never imports Django, Celery or Plotly
(``tests/simulator/test_purity.py`` proves it), so planning scripts can use it
without a server: ``python -m simulator --help``.
"""
