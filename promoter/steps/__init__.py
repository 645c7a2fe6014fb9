"""Built-in promotion steps (``uses:`` kinds) and the registry that maps kinds to them."""
