"""`kchaos serve`: the local results browser, bound to 127.0.0.1."""
