"""The fawkes policy family: ``core`` (the algorithm), ``scenario`` (playground reader)."""
