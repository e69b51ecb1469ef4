"""The hybridmr policy family: ``core`` (the algorithm), ``scenario`` (playground reader)."""
