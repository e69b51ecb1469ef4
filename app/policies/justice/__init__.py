"""The justice policy family: ``core`` (the algorithm), ``scenario`` (playground reader)."""
