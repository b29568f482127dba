"""pip install for the Python package: builds poseidon._C with the project's own CMake (the
same build as scripts/setup.sh's) against the torch of the interpreter that runs pip, and
installs python/poseidon with it.

    .venv/bin/python -m pip install --no-build-isolation .

--no-build-isolation: the extension must be built against the torch it will be imported
beside (an isolated build would fetch another torch into a throw-away environment).
POSEIDON_BUILD_DIR=build reuses an existing CMake build folder instead of a fresh one.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(poseidon VERSION ([0-9.]+)", f.read()).group(1)


class CMakeBuild(build_ext):
    """Builds the extension's CMake target and copies the module where setuptools wants it."""

    def build_extension(self, ext):
        build = os.environ.get("POSEIDON_BUILD_DIR")
        if build:
            build = os.path.abspath(build)
        else:
            build = os.path.abspath(os.path.join(self.build_temp, "cmake"))
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                                   "-DPOSEIDON_BUILD_TESTS=OFF",
                                   f"-DPython_EXECUTABLE={sys.executable}"])
        subprocess.check_call(["cmake", "--build", build, "--target", "poseidon_python_ext", "--parallel",
                               str(os.cpu_count() or 1)])
        built = glob.glob(os.path.join(build, "python", "poseidon", "_C*.so"))
        if len(built) != 1:
            raise RuntimeError(f"expected one poseidon/_C*.so in {build}/python, found {built}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built[0], target)


setup(
    name="poseidon",
    version=version(),
    description="Poseidon: data-parallel PyTorch training over ordinary Ethernet (Zhang et al., ATC'17)",
    packages=["poseidon"],
    package_dir={"": "python"},
    ext_modules=[Extension("poseidon._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    zip_safe=False,
)
