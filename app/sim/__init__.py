"""Trace-driven simulator of a YARN cluster under the sidecar's policies.

See ``docs/evaluation.md`` for the model, the trace formats and the reproduced comparisons.
"""
