"""Deadline-tagged jobs: the sidecar side of Justice / PYTHIA (seed 004, chapter 5).

``tags`` and ``outcomes`` are computations without I/O (tags, parallelism, what TRACK_JOB
learns from a finished app); ``contexts`` builds YARN submission contexts; ``rounds`` runs one
admission round or one learning pass inside a database transaction. The policy itself comes from
``app.policies.registry`` (its ``admission`` adapter) and is only called, never re-implemented.
"""
