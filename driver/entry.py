"""The ``dgrad-driver`` console entry point.

Kept free of imports so that a Ctrl-C while the driver's modules load (a second or more on
a busy machine) ends with one line and exit status 130, as a Ctrl-C later does, instead of
a traceback.
"""

import sys

INTERRUPTED = 130


def main(argv=None) -> int:
    """Load the driver and run it (:func:`driver.cli.main`)."""
    try:
        from .cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("dgrad-driver: interrupted\n")
        return INTERRUPTED
    return cli_main(argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
