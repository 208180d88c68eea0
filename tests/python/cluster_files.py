"""Puts the Python package and the examples where the local cluster's job user can read them
(scripts/cluster copies only build/bin and build/lib/*.so): for the slurm-labelled Python tests."""

import os
import shutil

from clustertest import CLUSTER_DIR

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("ELASTIC_BUILD_DIR", os.path.join(SOURCE, "build"))
EXAMPLES = os.path.join(SOURCE, "elastic_mpi", "python", "examples")


def _readable_dir(path):
    os.makedirs(path, exist_ok=True)
    os.chmod(path, 0o755)


def install_example(name):
    """CLUSTER_DIR/share/examples/NAME, a copy of elastic_mpi/python/examples/NAME; its path."""
    exdir = os.path.join(CLUSTER_DIR, "share", "examples")
    for d in (os.path.dirname(exdir), exdir):
        _readable_dir(d)
    path = os.path.join(exdir, name)
    shutil.copy(os.path.join(EXAMPLES, name), path)
    os.chmod(path, 0o644)
    return path


def install_package():
    """CLUSTER_DIR/lib/python/elastic_mpi, a copy of the built package; returns CLUSTER_DIR/lib/python
    (for PYTHONPATH). Its compiled module finds libelastic_mpi.so two levels up (CLUSTER_DIR/lib)."""
    pydir = os.path.join(CLUSTER_DIR, "lib", "python")
    _readable_dir(pydir)
    package = os.path.join(pydir, "elastic_mpi")
    shutil.rmtree(package, ignore_errors=True)
    shutil.copytree(os.path.join(BUILD, "lib", "python", "elastic_mpi"), package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for d, _, files in os.walk(package):
        os.chmod(d, 0o755)
        for name in files:
            os.chmod(os.path.join(d, name), 0o755 if name.endswith(".so") else 0o644)
    return pydir
