"""The research toolkit: training, validation and offline analysis of power models, plots, Kepler 0.7 models.

These modules sit on top of the protocol client (:mod:`keplershm.reader`, :mod:`keplershm.recorder`,
:mod:`keplershm.dataset`, :mod:`keplershm.model` ...) and are never imported by it. Each is imported on its
own; nothing is imported here, so ``import keplershm.research`` costs nothing and needs neither numpy nor
XGBoost nor matplotlib:

* :mod:`keplershm.research.train`: XGBoost node power models that kepler-estimate serves;
* :mod:`keplershm.research.validation`: blocked cross-validation and the random split;
* :mod:`keplershm.research.analyze`: offline A/B of models against measured power;
* :mod:`keplershm.research.plot`: plots of kepler-estimate's replay CSVs;
* :mod:`keplershm.research.kepler_model`: predictions of Kepler 0.7 model-DB files.

They used to live directly in the package (``keplershm.train`` ...); those paths still import,
with a DeprecationWarning, and go away in the next release.
"""
__all__ = ["train", "validation", "analyze", "plot", "kepler_model"]
