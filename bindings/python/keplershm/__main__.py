"""``python3 -m keplershm``: record, train, analyze, plot, serve-model (see ``--help`` of each)."""
import sys

from .cli import main

sys.exit(main())
