"""Builds the Cython runtime package ``glrmask_ext``: one extension module per ``.pyx`` file.

``GLRMASK_EXT_ONLY=runtime,pdwa_build python setup.py build_ext --inplace`` builds only the named
modules (two people editing different extensions in one checkout do not build each other's
half-written files)."""
import os
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
ONLY = {name for name in os.environ.get("GLRMASK_EXT_ONLY", "").split(",") if name}
extensions = [
    Extension(
        f"glrmask_ext.{pyx.stem}",
        [str(pyx.relative_to(HERE))],
        include_dirs=[np.get_include()],
        extra_compile_args=["-O3"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for pyx in sorted((HERE / "glrmask_ext").glob("*.pyx"))
    if not ONLY or pyx.stem in ONLY
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
    )
)
