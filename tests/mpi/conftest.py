"""pytest set-up of the end-to-end cases: the binaries under test (ctest passes their
paths), a temporary folder per case, a marker per case in the environment of its runs
(e2e.MARK), and ctest's skip status for a run whose cases all skipped.

    python -m pytest tests/mpi --poseidon build/apps/poseidon --example BIN \
        --custom-example BIN --stress BIN          # or one case: tests/mpi/test_lab.py::test_lab_nodes
"""
import shutil
import tempfile
import uuid

import pytest

pytest.register_assert_rewrite("e2e")
import e2e  # noqa: E402 (after the line above, which must see it first)

SKIP_RETURN_CODE = 77  # ctest's SKIP_RETURN_CODE for these cases (tests/mpi/CMakeLists.txt)

BINARIES = {"poseidon": "the poseidon binary", "example": "examples' train_with_poseidon",
            "custom_example": "examples' custom_module", "stress": "tests' kvstore_stress"}


def pytest_addoption(parser):
    group = parser.getgroup("poseidon", "Poseidon's end-to-end cases")
    for name, what in BINARIES.items():
        group.addoption("--" + name.replace("_", "-"), metavar="BIN", help=f"path of {what}")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "ctest(**properties): ctest properties of the case's ctest test (ctest_cases.py), "
        "over the defaults there; None drops one")


class Binaries:
    """args.poseidon, args.example, ...: a case fails at once, saying which option it
    needs, when the option was not given."""

    def __init__(self, config):
        self._config = config

    def __getattr__(self, name):
        if name not in BINARIES:
            raise AttributeError(name)
        value = self._config.getoption(name)
        if not value:
            pytest.fail(f"this case needs --{name.replace('_', '-')} BIN ({BINARIES[name]})", pytrace=False)
        return value


@pytest.fixture(scope="session")
def args(pytestconfig):
    return Binaries(pytestconfig)


@pytest.fixture
def tmp():
    """A fresh temporary folder (a str), removed after the case."""
    path = tempfile.mkdtemp()
    yield path
    shutil.rmtree(path)


@pytest.fixture(autouse=True)
def _case_marker():
    e2e.ENV[e2e.MARK] = uuid.uuid4().hex
    yield


_outcomes = {"passed": 0, "skipped": 0}


def pytest_runtest_logreport(report):
    if report.skipped:
        _outcomes["skipped"] += 1
    elif report.passed and report.when == "call":
        _outcomes["passed"] += 1


def pytest_sessionfinish(session, exitstatus):
    # ctest runs one case per pytest process: a case that skipped (the lab without root)
    # must read as skipped there, not passed.
    if exitstatus == pytest.ExitCode.OK and _outcomes["skipped"] and not _outcomes["passed"]:
        session.exitstatus = SKIP_RETURN_CODE
