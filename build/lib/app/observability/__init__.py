"""The operator's view: Prometheus metrics, the ``/ui`` dashboard's read models, what-if runs."""
