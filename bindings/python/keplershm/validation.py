"""Deprecated: moved to :mod:`keplershm.research.validation`; this path goes away in the next release."""
import sys
import warnings

from .research import validation as _moved

# The old name is the very module of the new one (attributes, monkeypatching, isinstance all agree).
sys.modules[__name__] = _moved
warnings.warn("keplershm.validation moved to keplershm.research.validation; import it from there (keplershm.validation goes away in "
              "the next release)", DeprecationWarning, stacklevel=2)
