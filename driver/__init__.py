"""The ``dgrad-driver`` command line (click). Only this package prints; the library does not."""
