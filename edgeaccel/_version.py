"""edgeaccel's version, in a module of its own so that low-level modules need not import the package root."""

__version__ = "0.1.0"
