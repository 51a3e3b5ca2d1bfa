"""``python -m ncudnn``: the ncudnn command (see ncudnn.cli)."""
import sys

from .cli import main

sys.exit(main())
