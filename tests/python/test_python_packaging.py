"""The recstore package built and installed by pip, and used without torch.

No RDMA device. A copy of the source tree's python/, include/, top
CMakeLists.txt and the headers of src/common (the spec's field table, which
_native.c expands), made so that setuptools' build/ and egg-info do not land
in the source tree, is installed with Debian's pip and setuptools, offline:

    pip install --no-build-isolation --no-deps --no-index --target DIR .

once against the CMake build tree (RECSTORE_BUILD_DIR) and once through
pkg-config (the build tree's pkgconfig-build/recstore-client.pc, whose
libdir is the tree: the same rpath case as an installed library outside
the system directories). Each is imported from DIR in a fresh interpreter:
recstore.__version__ is the project version of the top CMakeLists.txt and
the distribution's. Without a library the build stops with a message that says
how to give one. In an interpreter where `import torch` raises ImportError
the core imports and works, and the torch names raise an ImportError that
names torch.

Run: python3 tests/python/test_python_packaging.py SOURCE_DIR BUILD_DIR
(ctest test_python_packaging, label unit; 15 to 20 s).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

SOURCE = BUILD = None

# Makes `import torch` (and torch.*) fail as if torch were not installed.
NO_TORCH = """
import sys

class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named %r (test: no torch)"
                                      % name, name=name)
        return None

sys.meta_path.insert(0, _NoTorch())
"""


def project_version():
    with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
        text = f.read()
    return re.search(r"^project\(recstore VERSION ([0-9.]+)[ )]", text,
                     re.M).group(1)


class Packaging(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="rs-pkg-")
        src = os.path.join(cls.tmp, "src")
        skip = shutil.ignore_patterns("build", "dist", "*.egg-info",
                                      "__pycache__", "*.so", "_version.py")
        shutil.copytree(os.path.join(SOURCE, "python"),
                        os.path.join(src, "python"), ignore=skip)
        shutil.copytree(os.path.join(SOURCE, "include"),
                        os.path.join(src, "include"))
        shutil.copy(os.path.join(SOURCE, "CMakeLists.txt"), src)
        # the spec's field table, a header _native.c expands
        shutil.copytree(os.path.join(SOURCE, "src", "common"),
                        os.path.join(src, "src", "common"),
                        ignore=shutil.ignore_patterns("*.c"))
        cls.pkg = os.path.join(src, "python")
        cls.version = project_version()
        cls.site = os.path.join(cls.tmp, "site-build-tree")
        out = cls.pip(cls.site, RECSTORE_BUILD_DIR=BUILD)
        assert "Successfully installed recstore-" + cls.version in out, out

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def pip(cls, target, expect_ok=True, **env):
        """pip install of the copy into target; its output."""
        e = dict(os.environ)
        for k in ("RECSTORE_BUILD_DIR", "PYTHONPATH", "PIP_REQUIRE_VIRTUALENV"):
            e.pop(k, None)
        e.update(env)
        r = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-build-isolation",
             "--no-deps", "--no-index", "--no-cache-dir",
             "--disable-pip-version-check", "--target", target, "."],
            cwd=cls.pkg, env=e, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=300)
        if expect_ok and r.returncode:
            raise AssertionError("pip install failed (%d):\n%s"
                                 % (r.returncode, r.stdout))
        if not expect_ok and not r.returncode:
            raise AssertionError("pip install should have failed:\n%s"
                                 % r.stdout)
        return r.stdout

    def run_py(self, site, code, prelude=""):
        """code in a fresh interpreter that imports from site only."""
        e = dict(os.environ, PYTHONPATH=site)
        r = subprocess.run(
            [sys.executable, "-s", "-c",
             prelude + "\n" + textwrap.dedent(code)],
            cwd=self.tmp, env=e, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout)
        return r.stdout

    def check_installed(self, site, rpath):
        pipeline = os.path.exists(os.path.join(self.pkg, "recstore",
                                               "pipeline.py"))
        out = self.run_py(site, """
            import importlib.metadata, os, sys
            import recstore
            assert recstore.__file__.startswith(%r), recstore.__file__
            assert recstore._native.__file__.startswith(%r)
            assert isinstance(recstore.__version__, str)
            assert recstore.__version__ == %r, recstore.__version__
            assert importlib.metadata.version("recstore") == %r
            # the library this build tree made, of the same version
            assert recstore.version() == recstore.__version__
            # with torch, the torch names resolve (imported on first use)
            assert recstore.EmbeddingBagCollection is \\
                recstore.embedding.EmbeddingBagCollection
            assert recstore.JaggedFeatures.__module__ == "recstore.jagged"
            from recstore import EmbeddingBagConfig, PooledEmbeddings
            ns = {}
            exec("from recstore import *", ns)
            for n in ("Client", "Table", "Error", "KeyFailure", "strerror",
                      "version", "CheckpointReader", "verify",
                      "JaggedFeatures", "EmbeddingBagConfig",
                      "EmbeddingBagCollection", "PooledEmbeddings"):
                assert n in ns, n
            if %r:  # this version has recstore/pipeline.py
                assert recstore.TrainPipeline.__module__ == "recstore.pipeline"
                assert callable(recstore.collate_jagged)
                assert "TrainPipeline" in ns and "collate_jagged" in ns
            print("ok", recstore.__version__)
            """ % (site, site, self.version, self.version, pipeline))
        self.assertIn("ok " + self.version, out)
        so = [f for f in os.listdir(os.path.join(site, "recstore"))
              if f.startswith("_native") and f.endswith(".so")]
        self.assertEqual(len(so), 1, so)
        dyn = subprocess.run(
            ["readelf", "-d", os.path.join(site, "recstore", so[0])],
            stdout=subprocess.PIPE, text=True).stdout
        self.assertIn("librecstore-client.so", dyn)
        self.assertRegex(dyn, r"R(UN)?PATH.*\[%s\]" % re.escape(rpath))

    def test_build_tree(self):
        self.check_installed(self.site, os.path.abspath(BUILD))

    def test_pkg_config(self):
        site = os.path.join(self.tmp, "site-pkg-config")
        pcdir = os.path.join(BUILD, "pkgconfig-build")
        self.pip(site, PKG_CONFIG_PATH=pcdir)
        self.check_installed(site, os.path.abspath(BUILD))

    def test_no_library(self):
        site = os.path.join(self.tmp, "site-none")
        empty = os.path.join(self.tmp, "empty")
        os.makedirs(empty, exist_ok=True)
        out = self.pip(site, expect_ok=False, PKG_CONFIG_LIBDIR=empty,
                       PKG_CONFIG_PATH="")
        self.assertIn("cannot find the client library librecstore-client",
                      out)
        self.assertIn("RECSTORE_BUILD_DIR=", out)
        out = self.pip(site, expect_ok=False, RECSTORE_BUILD_DIR=empty)
        self.assertIn("is not a CMake build tree", out)

    def test_without_torch(self):
        pipeline = os.path.exists(os.path.join(self.pkg, "recstore",
                                               "pipeline.py"))
        out = self.run_py(self.site, """
            import sys
            try:
                import torch
            except ImportError:
                pass
            else:
                raise AssertionError("the torch blocker does not work")

            import numpy as np
            import recstore
            assert "torch" not in sys.modules
            assert recstore.__version__ == %r
            assert recstore.version() == recstore.__version__

            # the core works
            assert recstore.strerror(recstore.E_NOTFOUND) == "not found"
            assert recstore.KEY_MISSING != recstore.KEY_FOUND
            assert issubclass(recstore.Error, RuntimeError)
            for call in (lambda: recstore.Client(""),
                         lambda: recstore.CheckpointReader("/nonexistent"),
                         lambda: recstore.verify("/nonexistent")):
                try:
                    call()
                except recstore.Error as e:
                    assert e.code < 0, e.code
                else:
                    raise AssertionError("no recstore.Error")
            e = recstore.KeyFailure("get", "t", np.array([5], np.uint64),
                                    np.array([0], np.int32))
            assert "5 (missing)" in str(e), str(e)
            assert recstore.Table and recstore.CheckpointReader

            # the torch names: an ImportError that names torch
            for name in ("JaggedFeatures", "EmbeddingBagConfig",
                         "EmbeddingBagCollection", "PooledEmbeddings"):
                try:
                    getattr(recstore, name)
                except ImportError as e:
                    assert "torch" in str(e), str(e)
                    assert "recstore." + name in str(e), str(e)
                else:
                    raise AssertionError(name + " without torch")
            try:
                from recstore import EmbeddingBagCollection  # noqa: F401
            except ImportError as e:
                assert "torch" in str(e), str(e)
            else:
                raise AssertionError("from-import without torch")
            # this version's pipeline needs torch too; without it, none
            try:
                recstore.TrainPipeline
            except ImportError as e:
                assert %r and "torch" in str(e), str(e)
            except AttributeError:
                assert not %r
            else:
                raise AssertionError("TrainPipeline without torch")
            assert "torch" not in sys.modules

            # star import: the core only
            ns = {}
            exec("from recstore import *", ns)
            assert "Client" in ns and "CheckpointReader" in ns
            assert "EmbeddingBagCollection" not in ns
            print("ok without torch")
            """ % (self.version, pipeline, pipeline), prelude=NO_TORCH)
        self.assertIn("ok without torch", out)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: test_python_packaging.py SOURCE_DIR BUILD_DIR")
    SOURCE, BUILD = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    del sys.argv[1:3]
    unittest.main(verbosity=2)
