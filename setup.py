"""The `mpc` extension module for `pip install .`, built by CMake.

setuptools only packages it: build_ext runs the project's CMake build (the one
`make` runs, in build/ or $MPC_BUILD_DIR) for the target mpc_python and copies
build/python/mpc<EXT_SUFFIX> into the wheel, with the CUDA backend's plugin
beside it when the build has one. A build configured for another
Python version is left alone: the module is then built in build-py<X.Y>/
against the interpreter pip runs.
"""
import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
# setuptools' own scratch (build/lib.*, egg-info) under the CMake build
# directory, which git ignores, not beside the sources.
SCRATCH = os.path.join(ROOT, "build", "setuptools")


def cmake(*args):
    print("mpc: cmake " + " ".join(args), flush=True)
    subprocess.run(["cmake", *args], check=True)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        jobs = os.environ.get("MPC_JOBS", str(os.cpu_count() or 2))
        build = os.environ.get("MPC_BUILD_DIR", os.path.join(ROOT, "build"))
        built = os.path.join(build, "python", "mpc" + suffix)
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            cmake("-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                  "-DPython3_EXECUTABLE=" + sys.executable)
        cmake("--build", build, "--target", "mpc_python", "-j", jobs)
        if not os.path.exists(built):
            # build/ holds the module for another Python: one of this one's.
            other = os.path.join(ROOT, "build-py%d.%d" % sys.version_info[:2])
            cmake("-S", ROOT, "-B", other, "-DCMAKE_BUILD_TYPE=Release",
                  "-DPython3_EXECUTABLE=" + sys.executable)
            cmake("--build", other, "--target", "mpc_python", "-j", jobs)
            built = os.path.join(other, "python", "mpc" + suffix)
        if not os.path.exists(built):
            sys.exit("mpc: the build made no " + built + " (is pybind11-dev "
                     "installed? `make` runs tools/setup.sh, which installs "
                     "it)")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(built, target)
        # device="cuda" loads the CUDA backend's plugin from beside the
        # module: a CUDA build's plugin travels with it.
        plugin = os.path.join(os.path.dirname(os.path.dirname(built)), "bin",
                              "libmpc_cuda_backend.so")
        if os.path.exists(plugin):
            shutil.copy2(plugin, os.path.dirname(target))


os.makedirs(SCRATCH, exist_ok=True)
setup(
    ext_modules=[Extension("mpc", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": SCRATCH},
             "egg_info": {"egg_base": SCRATCH}},
)
