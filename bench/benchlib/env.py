"""Where the benchmarks find the project, its `poseidon` binary and its Python, and the
environment every job runs in: one compute thread per rank (docs/design.md), and mpirun
allowed as root (the lab runs as root)."""
import argparse
import importlib.util
import os
import platform
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(BENCH)
POSEIDON = os.path.join(ROOT, "build/apps/poseidon")  # the default binary of every script
# The Python the jobs run in: POSEIDON_PYTHON (the build's, as scripts/setup.sh took it), else
# the project's .venv (torch 2.11, the build's torch) when there.
PYTHON = os.environ.get("POSEIDON_PYTHON") or (
    os.path.join(ROOT, ".venv/bin/python") if os.path.exists(os.path.join(ROOT, ".venv/bin/python")) else sys.executable)
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")


def script(path):
    """The absolute path of a script under bench/, e.g. script("jobs/stack_rate.py")."""
    return os.path.join(BENCH, path)


def use_build_python(path=os.path.join(ROOT, "build/python")):
    """Jobs that `import poseidon` take the package of the build (its extension beside it)."""
    ENV["PYTHONPATH"] = path


def require_root():
    """Stops unless root: `poseidon lab` runs the ranks in network namespaces."""
    if os.geteuid() != 0:
        sys.exit(f"{script_name()} runs ranks in network namespaces (poseidon lab): run it as root")


def script_name():
    """The running script's path from the project's root, e.g. bench/system/host_cpu.py."""
    return os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)


def command_line(sudo=True):
    """How this run was started, for the reports, so that it can be rerun."""
    return " ".join((["sudo"] if sudo else []) + [script_name()] + sys.argv[1:])


def made_by(sudo=True):
    """The line the reports start with."""
    return "Made by: " + command_line(sudo)


def machine():
    """One line naming the host, for the reports."""
    return f"{platform.node()}, {os.cpu_count()} cores, {platform.platform()}"


def process_setup():
    """python/poseidon/process_setup.py on its own (ctypes only; the package needs torch and
    its built extension): the process settings poseidon.init() makes, for the benchmarks."""
    spec = importlib.util.spec_from_file_location("process_setup", os.path.join(ROOT, "python/poseidon/process_setup.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def like_poseidon():
    """What poseidon.init() does in its own process, for every system (process_setup.py):
    glibc's malloc thresholds (without them a run may re-fault its activations from the
    kernel every iteration) and OpenBLAS kernels that match the CPU where the library's
    own detection falls back to generic ones; so that every system allocates and
    multiplies alike."""
    malloc_like_poseidon()
    setup = process_setup()
    if setup.blas_kernels() == "Prescott" and setup._best_kernels():
        ENV.setdefault("OPENBLAS_CORETYPE", setup._best_kernels())


def malloc_like_poseidon():
    """The glibc malloc thresholds Poseidon sets itself (apps/poseidon/allocator.h), through
    glibc's environment variables, for the systems that do not."""
    ENV.setdefault("MALLOC_MMAP_THRESHOLD_", str(32 << 20))
    ENV.setdefault("MALLOC_TRIM_THRESHOLD_", str(512 << 20))


def arguments(doc, poseidon=True):
    """A script's argument parser: its docstring as --help's text, and --poseidon, the binary
    it runs (this tree's build unless given), where it runs one."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if poseidon:
        ap.add_argument("--poseidon", default=POSEIDON, help="the poseidon binary")
    return ap
