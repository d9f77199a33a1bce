"""The build's one compiled part (the metadata is in setup.cfg): the plaintext decoder
(biggraphite_like/ingest/_plaintext.c), built by `pip install -e .` with the machine's C
compiler and Python's headers."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("biggraphite_like.ingest._plaintext", ["biggraphite_like/ingest/_plaintext.c"],
                             extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"])])
