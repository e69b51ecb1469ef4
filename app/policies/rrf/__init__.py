"""The rrf policy family: ``core`` (the algorithm), ``scenario`` (playground reader)."""
