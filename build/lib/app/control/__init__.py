"""Pure control layer: desired shares vs observed configuration -> bounded, ordered actions."""
