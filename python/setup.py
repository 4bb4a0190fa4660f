"""Build of the recstore package with pip; pyproject.toml has the metadata.

    python3 -m pip install --no-build-isolation ./python     # docs/python.md

What pyproject.toml cannot say is here: the version and the C extension.

The version comes from one place, the project(recstore VERSION x.y.z)
line of this source tree's top CMakeLists.txt (which also generates
recstore/version.h from it). The build writes it into the package as
recstore/_version.py (recstore.__version__), as python/CMakeLists.txt
does for build/python.

The extension recstore._native (recstore/_native.c) links the client
library librecstore-client, found
  1. in the CMake build tree named by RECSTORE_BUILD_DIR, when it is set:
     that tree's librecstore-client.so, the headers of the source tree it
     was configured from (its CMakeCache.txt says which) and the tree's
     generated include/, and an rpath to the tree; or else
  2. installed (cmake --install): pkg-config recstore-client gives its
     include directories and libdir (PKG_CONFIG_PATH for a prefix
     pkg-config does not search); an rpath to libdir unless it is a
     system one.
Neither: the build stops and says how to give one. The library's headers
must be of this version's major and at least its minor (docs/client.md,
"ABI rules").
"""

import os
import re
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_SRC = os.path.join(os.path.dirname(HERE), "src")
TOP_CMAKE = os.path.join(os.path.dirname(HERE), "CMakeLists.txt")
VERSION_PY = ("# Generated from the project version when the package is "
              "built.\n__version__ = \"%s\"\n")


def fail(msg):
    raise SystemExit("error: recstore: " + msg)


def project_version(path):
    """(major, minor, patch) of the project(recstore VERSION ...) line."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        fail("cannot read %s (%s): build the package from the RecStore "
             "source tree" % (path, e.strerror))
    m = re.search(r"^project\(recstore VERSION ([0-9]+)\.([0-9]+)\.([0-9]+)"
                  r"[ )]", text, re.M)
    if not m:
        fail("%s has no line 'project(recstore VERSION X.Y.Z ...'" % path)
    return tuple(int(g) for g in m.groups())


def header_version(includes):
    """(major, minor, patch) of the first recstore/version.h in includes."""
    for include in includes:
        path = os.path.join(include, "recstore", "version.h")
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        parts = [re.search(r"^#define RS_VERSION_%s ([0-9]+)$" % part, text,
                           re.M) for part in ("MAJOR", "MINOR", "PATCH")]
        if not all(parts):
            fail("%s has no lines '#define RS_VERSION_* N'" % path)
        return tuple(int(m.group(1)) for m in parts)
    fail("no recstore/version.h in %s" % " ".join(includes))


VERSION = project_version(TOP_CMAKE)


def cmake_cache(build_dir, key):
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            text = f.read()
    except OSError:
        return None
    m = re.search(r"^%s:[A-Z]+=(.*)$" % re.escape(key), text, re.M)
    return m.group(1) if m else None


def from_build_tree(build_dir):
    """(include dirs, lib dir, rpath dirs) of a CMake build tree."""
    d = os.path.abspath(os.path.expanduser(build_dir))
    where = "RECSTORE_BUILD_DIR=%s" % build_dir
    if not os.path.isfile(os.path.join(d, "CMakeCache.txt")):
        fail("%s is not a CMake build tree (no CMakeCache.txt there)" % where)
    if not os.path.exists(os.path.join(d, "librecstore-client.so")):
        fail("%s has no librecstore-client.so: build it first "
             "(cmake --build %s --target recstore_client_shared)" % (where, d))
    src = (cmake_cache(d, "recstore_SOURCE_DIR")
           or cmake_cache(d, "CMAKE_HOME_DIRECTORY"))
    if not src:
        fail("%s: its CMakeCache.txt does not name the source tree" % where)
    return [os.path.join(d, "include"), os.path.join(src, "include")], d, [d]


def pkg_config(*args):
    """(output, None) or (None, why not)."""
    try:
        r = subprocess.run(["pkg-config", "--print-errors"] + list(args)
                           + ["recstore-client"],
                           capture_output=True, text=True, check=False)
    except OSError as e:
        return None, "pkg-config: %s" % e.strerror
    if r.returncode:
        why = (r.stderr.strip().splitlines() or ["failed"])[0].rstrip(".")
        return None, "pkg-config recstore-client: " + why
    return r.stdout.strip(), None


def from_pkg_config():
    _, why = pkg_config("--exists")
    include = libdir = None
    if not why:
        include, why = pkg_config("--variable=includedir")
    if not why:
        libdir, why = pkg_config("--variable=libdir")
    if not why and not (include and libdir):
        why = "recstore-client.pc names no includedir or libdir"
    if why:
        fail("cannot find the client library librecstore-client "
             "(%s).\nEither install it (cmake --install BUILD; if pkg-config "
             "does not search its prefix, set PKG_CONFIG_PATH=PREFIX/LIBDIR/"
             "pkgconfig) or name a CMake build tree:\n"
             "  RECSTORE_BUILD_DIR=/path/to/build python3 -m pip install "
             "--no-build-isolation ./python" % why)
    # the build tree's .pc adds its generated include/; pkg-config drops
    # system directories from --cflags, hence includedir after them
    cflags, _ = pkg_config("--cflags-only-I")
    includes = [f[2:] for f in (cflags or "").split() if f.startswith("-I")]
    system = re.match(r"^/(usr/)?lib(32|64)?(/[^/]*-linux-[^/]*)?/?$",
                      os.path.realpath(libdir))
    return includes + [include], libdir, [] if system else [libdir]


class BuildExt(build_ext):
    def build_extensions(self):
        build_dir = os.environ.get("RECSTORE_BUILD_DIR")
        if build_dir:
            includes, libdir, rpath = from_build_tree(build_dir)
        else:
            includes, libdir, rpath = from_pkg_config()
        have = header_version(includes)
        include = " ".join(includes)
        if have[0] != VERSION[0] or have[1] < VERSION[1]:
            fail("the client library in %s has headers of version %d.%d.%d "
                 "(%s); this package is %d.%d.%d and needs a library of "
                 "%d.%d or a later %d.x" % ((libdir,) + have + (include,)
                                            + VERSION + VERSION[:2]
                                            + VERSION[:1]))
        try:
            import numpy
        except ImportError:
            fail("numpy is needed to build (Debian: python3-numpy)")
        print("recstore: building against the client library in %s "
              "(headers %s, %s)" % (libdir, include,
                                    "RECSTORE_BUILD_DIR" if build_dir
                                    else "pkg-config"))
        for ext in self.extensions:
            # SOURCE_SRC: src/common/spec_fields.h (the spec's field
            # table, a header-only macro) of this source tree
            ext.include_dirs += includes + [SOURCE_SRC, numpy.get_include()]
            ext.library_dirs.append(libdir)
            ext.runtime_library_dirs += rpath
        super().build_extensions()


class BuildPy(build_py):
    def run(self):
        super().run()
        # editable installs import the package from this directory
        out = (os.path.join(HERE, "recstore")
               if getattr(self, "editable_mode", False)
               else os.path.join(self.build_lib, "recstore"))
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "_version.py"), "w") as f:
            f.write(VERSION_PY % ("%d.%d.%d" % VERSION))


setup(
    version="%d.%d.%d" % VERSION,
    ext_modules=[Extension("recstore._native", ["recstore/_native.c"],
                           libraries=["recstore-client"])],
    cmdclass={"build_ext": BuildExt, "build_py": BuildPy},
)
