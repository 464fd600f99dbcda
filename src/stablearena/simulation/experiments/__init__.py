"""Paper protocols, each runnable from ``stablearena experiment ...``."""
