"""Denoise image files: ``python scripts/denoise.py in.png out.png`` (see ``--help``).

A thin wrapper of ``imgfilters.cli``, which the package also installs as the console
script ``imgfilters-denoise``.
"""
import sys

from imgfilters.cli import main

if __name__ == "__main__":
    sys.exit(main())
