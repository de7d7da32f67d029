"""The package's version, in a module of its own: the disk cache keys its entries by it and
must not import the package facade (which would load the Python API) to read it."""

__version__ = "0.1.0"
