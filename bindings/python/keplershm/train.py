"""Deprecated: moved to :mod:`keplershm.research.train`; this path goes away in the next release."""
import sys
import warnings

from .research import train as _moved

# The old name is the very module of the new one (attributes, monkeypatching, isinstance all agree).
sys.modules[__name__] = _moved
warnings.warn("keplershm.train moved to keplershm.research.train; import it from there (keplershm.train goes away in "
              "the next release)", DeprecationWarning, stacklevel=2)
