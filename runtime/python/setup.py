"""setup.py — the package `tsr` (docs/python.md): `pip install ./runtime/python`.

A plain setuptools script, without a pyproject.toml build-system table, so that pip builds it
with the setuptools already installed and needs no network (an isolated build would download
setuptools first).  Pure Python: nothing is compiled; it needs NumPy at run time."""
from setuptools import setup

setup(
    name="tsr",
    version="0.1.0",
    description="Load models compiled by tsrc (tsrc --shared) into Python: tensors as NumPy arrays, routines as methods",
    packages=["tsr"],
    python_requires=">=3.9",
    install_requires=["numpy"],
)
