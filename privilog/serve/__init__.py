"""privilog serve: the authorization backend over HTTP (being built)."""
