"""The prism policy family: ``core`` (the algorithm), ``scenario`` (playground reader)."""
