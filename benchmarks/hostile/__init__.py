"""The hostile run's parts (``python -m benchmarks.hostile_run`` runs it)."""
