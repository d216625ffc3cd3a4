"""``python -m imgfilters``: the command line, ``imgfilters-denoise`` (see ``--help``)."""
import sys

from imgfilters.cli import main

if __name__ == "__main__":
    sys.exit(main())
