"""Deprecated: moved to :mod:`keplershm.research.kepler_model`; this path goes away in the next release."""
import sys
import warnings

from .research import kepler_model as _moved

# The old name is the very module of the new one (attributes, monkeypatching, isinstance all agree).
sys.modules[__name__] = _moved
warnings.warn("keplershm.kepler_model moved to keplershm.research.kepler_model; import it from there (keplershm.kepler_model goes away in "
              "the next release)", DeprecationWarning, stacklevel=2)
