"""Loop services around the pure core: the poller (and later the controller and admission)."""
