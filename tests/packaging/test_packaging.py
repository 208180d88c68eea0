"""Installation and Debian package: `cmake --install` into a scratch DESTDIR, and the .deb made by
cpack unpacked with `dpkg-deb -x` into a scratch root, both hold the expected files in the expected
places (cmake/ElasticPackaging.cmake says where each goes). Uses the build tree as it is."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

BUILD = os.environ["ELASTIC_BUILD_DIR"]
CMAKE = os.environ.get("ELASTIC_CMAKE", "cmake")
CPACK = os.environ.get("ELASTIC_CPACK", "cpack")
PREFIX = os.environ.get("ELASTIC_INSTALL_PREFIX", "/usr/local")
PLUGIN_DIR = os.environ.get("ELASTIC_PLUGIN_DIR", "/usr/lib/x86_64-linux-gnu/slurm-wlm")
LIBDIR = os.environ.get("ELASTIC_LIBDIR", "lib")
SKIP = set(filter(None, os.environ.get("ELASTIC_SKIP", "").split(";")))
SLURM_VERSION = os.environ.get("ELASTIC_SLURM_VERSION", "")


def debian_release():
    """The major version of the Debian release this runs on ("12"), or "" elsewhere."""
    try:
        with open("/etc/os-release") as f:
            fields = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    except OSError:
        return ""
    version = fields.get("VERSION_ID", "").strip('"').split(".")[0]
    return version if fields.get("ID") == "debian" and version.isdigit() else ""


def package_of_linked(binary, lib):
    """The Debian package (name only) that owns the library `lib`* which `binary` links."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].startswith(lib) and "=>" in parts and len(parts) > 2:
            path = os.path.realpath(parts[2])
            for candidate in (path, path.replace("/usr/lib/", "/lib/", 1)):
                r = subprocess.run(["dpkg-query", "-S", candidate], capture_output=True, text=True)
                if r.returncode == 0:
                    return r.stdout.split(":")[0]
    return ""


def expected(prefix):
    """Paths (absolute, inside the installed system) that an installation with PREFIX holds."""
    p = prefix.rstrip("/")
    files = [
        f"{p}/sbin/elasticd",
        f"{p}/bin/elasticctl",
        f"{p}/lib/systemd/system/elasticd.service",
        f"{p}/share/man/man8/elasticd.8",
        f"{p}/share/man/man8/elastic_spank.8",
        f"{p}/share/man/man1/elasticctl.1",
        f"{p}/share/man/man1/elastic-optimize.1",
        f"{p}/share/doc/elastic-slurm/examples/site-config/elasticd.conf",
        f"{p}/share/doc/elastic-slurm/examples/site-config/plugstack.conf.d/elastic.conf",
        f"{p}/share/doc/elastic-slurm/examples/site-config/systemd/elasticd.service",
        f"{p}/share/doc/elastic-slurm/examples/jobscripts/data_parallel.sbatch",
        f"{p}/share/doc/elastic-slurm/README.md",
    ]
    parts = {
        "spank_plugin": [f"{PLUGIN_DIR}/elastic.so"],
        "elastic_mpi": [f"{p}/bin/elastic-launch", f"{p}/bin/elastic-train-logreg", f"{p}/{LIBDIR}/libelastic_mpi.so",
                        f"{p}/include/elastic_mpi/session.h", f"{p}/include/elastic_mpi/elastic_mpi.h",
                        f"{p}/include/elastic/common/error.h"],
        "report": [f"{p}/bin/elastic-report"],
        "optimizer": [f"{p}/bin/elastic-optimize"],
        "simulator": [f"{p}/bin/elastic-sim"],
    }
    if python_package_built():
        parts["elastic_mpi"] += [f"{p}/{LIBDIR}/python/elastic_mpi/__init__.py",
                                 f"{p}/{LIBDIR}/python/elastic_mpi/torch/__init__.py",
                                 f"{p}/{LIBDIR}/python/elastic_mpi/torch/job.py"]
    for component, paths in parts.items():
        if component not in SKIP:
            files += paths
    return files


def python_package_built():
    """The build tree has the Python package (pybind11 and Python's headers were found)."""
    return os.path.isfile(os.path.join(BUILD, "lib", "python", "elastic_mpi", "__init__.py"))


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


class PackagingTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="elastic-packaging-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def check_tree(self, root, prefix):
        missing = [f for f in expected(prefix) if not os.path.isfile(root + f)]
        self.assertEqual(missing, [], f"not installed under {root}")
        for f in (f"{prefix}/sbin/elasticd", f"{prefix}/bin/elasticctl"):
            self.assertTrue(os.access(root + f, os.X_OK), f"{f} is not executable")
        with open(f"{root}{prefix}/lib/systemd/system/elasticd.service") as f:
            unit = f.read()
        self.assertIn(f"ExecStart={prefix}/sbin/elasticd --config /etc/elastic/elasticd.conf", unit)
        if "elastic_mpi" not in SKIP:
            # The installed launcher finds the installed runtime library ($ORIGIN/../lib).
            r = subprocess.run(["ldd", f"{root}{prefix}/bin/elastic-launch"], capture_output=True, text=True)
            line = [l for l in r.stdout.splitlines() if "libelastic_mpi" in l]
            self.assertTrue(line and root in line[0], f"elastic-launch does not find the installed library: {line}")
        if "elastic_mpi" not in SKIP and python_package_built():
            # The installed package imports from its own directory and its compiled part finds the
            # installed runtime library ($ORIGIN/../..); elastic_mpi.torch where torch is installed.
            pythonpath = f"{root}{prefix}/{LIBDIR}/python"
            code = ("import elastic_mpi, importlib.util as u; print(elastic_mpi._core.__file__); "
                    "u.find_spec('torch') and __import__('elastic_mpi.torch')")
            r = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True,
                               env=dict(os.environ, PYTHONPATH=pythonpath, PYTHONDONTWRITEBYTECODE="1"))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.startswith(pythonpath), r.stdout)
            core = r.stdout.strip()
            r = subprocess.run(["ldd", core], capture_output=True, text=True)
            line = [l for l in r.stdout.splitlines() if "libelastic_mpi" in l]
            self.assertTrue(line and root in line[0], f"elastic_mpi._core does not find the installed library: {line}")

    def test_cmake_install_into_destdir(self):
        run([CMAKE, "--install", BUILD], env=dict(os.environ, DESTDIR=self.tmp))
        self.check_tree(self.tmp, PREFIX)
        # Nothing lands outside the prefix but the plugin, in Slurm's plugin directory.
        outside = []
        for d, _, files in os.walk(self.tmp):
            for f in files:
                path = os.path.join(d, f)[len(self.tmp):]
                if not path.startswith(PREFIX.rstrip("/") + "/") and not path.startswith(PLUGIN_DIR + "/"):
                    outside.append(path)
        self.assertEqual(outside, [])

    # ctest sets ELASTIC_TEST_CPACK=1; running the file by hand without it skips the .deb.
    @unittest.skipUnless(os.environ.get("ELASTIC_TEST_CPACK") == "1", "ELASTIC_TEST_CPACK=1 builds the .deb")
    @unittest.skipUnless(shutil.which("dpkg-deb"), "dpkg-deb is not installed")
    def test_deb_unpacked_into_a_scratch_root(self):
        out = os.path.join(self.tmp, "out")
        run([CPACK, "-G", "DEB", "-B", out, "--config", os.path.join(BUILD, "CPackConfig.cmake")])
        debs = [f for f in os.listdir(out) if f.endswith(".deb")]
        self.assertEqual(len(debs), 1, debs)
        deb = os.path.join(out, debs[0])
        release = debian_release()
        suffix = rf"\+deb{release}" if release else ""
        self.assertRegex(debs[0], rf"^elastic-slurm_\d+\.\d+\.\d+{suffix}_amd64\.deb$")
        fields = run(["dpkg-deb", "-f", deb, "Package", "Depends"]).stdout
        self.assertIn("Package: elastic-slurm", fields)
        # The Slurm release series the plugin was built against (cmake/ElasticPackaging.cmake).
        if SLURM_VERSION:
            major, minor, micro = (int(x) for x in SLURM_VERSION.split("."))
            self.assertIn(f"slurm-wlm-basic-plugins (>= {major}.{minor:02d}.{micro})", fields)
            self.assertIn(f"slurm-wlm-basic-plugins (<< {major}.{minor + 1:02d})", fields)
        # The libraries the binaries link, by the package names of this release (dpkg-shlibdeps).
        linked = {"libslurm": os.path.join(BUILD, "bin", "elasticd"), "libsqlite3": os.path.join(BUILD, "bin", "elasticd")}
        if "elastic_mpi" not in SKIP:
            linked["libmpi.so"] = os.path.join(BUILD, "bin", "elastic-launch")
            linked["libhwloc"] = os.path.join(BUILD, "bin", "elastic-launch")
        for lib, binary in linked.items():
            package = package_of_linked(binary, lib)
            self.assertTrue(package, f"no Debian package owns the {lib} that {binary} links")
            self.assertRegex(fields, rf"(^|[ ,]){re.escape(package)} \(>= ", f"{package} ({lib}) not in Depends")
        for dep in ("munge", "openmpi-bin"):
            self.assertIn(dep, fields)
        root = os.path.join(self.tmp, "root")
        run(["dpkg-deb", "-x", deb, root])
        self.check_tree(root, "/usr")
        listing = run(["dpkg-deb", "-c", deb]).stdout
        self.assertIn(f".{PLUGIN_DIR}/elastic.so", listing)


if __name__ == "__main__":
    unittest.main(verbosity=2)
