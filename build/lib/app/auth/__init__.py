"""Who may do what on the sidecar's API: roles, API tokens and the acting principal."""
