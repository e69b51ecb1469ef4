"""Route modules, one per resource."""
