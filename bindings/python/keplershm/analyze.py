"""Deprecated: moved to :mod:`keplershm.research.analyze`; this path goes away in the next release."""
import sys
import warnings

from .research import analyze as _moved

# The old name is the very module of the new one (attributes, monkeypatching, isinstance all agree).
sys.modules[__name__] = _moved
warnings.warn("keplershm.analyze moved to keplershm.research.analyze; import it from there (keplershm.analyze goes away in "
              "the next release)", DeprecationWarning, stacklevel=2)
