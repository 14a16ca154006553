"""Deprecated: moved to :mod:`keplershm.research.plot`; this path goes away in the next release."""
import sys
import warnings

from .research import plot as _moved

# The old name is the very module of the new one (attributes, monkeypatching, isinstance all agree).
sys.modules[__name__] = _moved
warnings.warn("keplershm.plot moved to keplershm.research.plot; import it from there (keplershm.plot goes away in "
              "the next release)", DeprecationWarning, stacklevel=2)
