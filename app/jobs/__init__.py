"""Deadline-tagged jobs: the sidecar side of Justice / PYTHIA (seed 004, chapter 5).

``tags`` and ``outcomes`` are computations without I/O (tags, parallelism, what TRACK_JOB
learns from a finished app); ``contexts`` builds YARN submission contexts; ``rounds`` runs one
admission round or one learning pass inside a database transaction. The policy itself is
``app.policies.justice`` and is only called from here, never re-implemented.
"""
