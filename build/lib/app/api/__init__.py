"""HTTP API: routes own the transaction; schemas are separate from ORM rows and domain objects."""
