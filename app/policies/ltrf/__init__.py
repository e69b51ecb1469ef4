"""The ltrf policy family: ``core`` (the algorithm), ``scenario`` (playground reader)."""
