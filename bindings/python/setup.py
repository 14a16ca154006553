"""Installs the keplershm Python package (pure Python: ctypes over libkeplershm.so.1, no compiled code).

Deliberately a plain setup.py without pyproject.toml: pip then builds with the setuptools already
installed (Debian's python3-setuptools) instead of fetching a build backend from an index, which the
project's machines cannot reach.
"""
from setuptools import setup

setup(
    name="keplershm",
    version="0.1.0",
    description="Python research clients for keplershm: frames as numpy, record, train, analyze, plot",
    long_description=open("README.md", encoding="utf-8").read() if __import__("os").path.exists("README.md") else "",
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    packages=["keplershm", "keplershm.research"],
    python_requires=">=3.9",
    # numpy, xgboost and matplotlib come from Debian (python3-numpy, python3-xgboost, python3-matplotlib);
    # they are optional extras here so that pip never tries to download them.
    extras_require={"numpy": ["numpy"], "train": ["numpy", "xgboost"], "plot": ["numpy", "matplotlib"]},
    entry_points={"console_scripts": ["keplershm=keplershm.cli:main"]},
)
