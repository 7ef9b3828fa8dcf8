# lit configuration for mpc's FileCheck tests (one .onnxtext graph per file).
import os
import lit.formats

config.name = "mpc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".onnxtext", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mpc_build_dir, "tests", "lit-out")
config.excludes = ["Inputs"]
# mpc-run's default device is auto (cuda where a GPU is); the tests expect
# the CPU unless they ask for a device, on every machine.
config.environment["MPC_DEVICE"] = "cpu"
config.environment["PATH"] = os.pathsep.join(
    [config.mpc_bin_dir, config.filecheck_dir, config.environment.get("PATH", "/usr/bin:/bin")])
config.substitutions.append(("%models", os.path.join(config.mpc_source_dir, "models")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
# The interpreter lit runs under (Debian's /usr/bin/python3, which has
# python3-numpy and python3-onnx); the python3 first on PATH may be another.
import sys
config.substitutions.append(("%python", sys.executable))
# Graphviz renders mpc-opt --dot files; tests that run it say REQUIRES: dot.
import shutil
if shutil.which("dot"):
    config.available_features.add("dot")
# Sanitizer builds (make test-asan) run several times slower in twice the
# memory: tests that hold gigabytes say UNSUPPORTED: sanitize.
if getattr(config, "mpc_sanitize", False):
    config.available_features.add("sanitize")
# "%timeout N cmd" bounds a command that must finish in seconds (a quadratic
# pass would take minutes): N seconds, ten times N (one more digit) in
# sanitizer builds, whose 5x slowdown on CI's two busy cores passed a minute.
config.substitutions.append(
    (r"%timeout (\d+)",
     r"timeout \g<1>0" if getattr(config, "mpc_sanitize", False) else r"timeout \1"))
# Tests that hold gigabytes (external-data-over-2gib.test: a model past 2 GiB
# trained on the CPU, ~7 GB per mpc-run) say REQUIRES: memory-12g.
try:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:") and int(line.split()[1]) >= 12 << 20:
                config.available_features.add("memory-12g")
except OSError:
    pass
# A CUDA device is present (tests that expect "no GPU" mark UNSUPPORTED).
if os.path.exists("/dev/nvidiactl"):
    config.available_features.add("cuda-device")
# A CUDA build: mpc-run loads its CUDA backend from a plugin; %cudatestlibs
# holds a fake CUDA driver and a plugin of another build for its tests.
if config.mpc_cuda_plugin:
    config.available_features.add("cuda-plugin")
config.substitutions.append(("%cudatestlibs", config.mpc_cuda_test_libs))
# Open MPI's mpirun and the MPI world plugin are there: the data-parallel
# tests of mpc-run (REQUIRES: mpirun) launch it, as root where CI runs.
if shutil.which("mpirun") and os.path.exists(
        os.path.join(config.mpc_bin_dir, "libmpc_mpi_world.so")):
    config.available_features.add("mpirun")
    config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    for name in ("HOME", "TMPDIR"):
        if name in os.environ:
            config.environment[name] = os.environ[name]
# %mpirun launches ranks. Under ASan, Open MPI's own allocations outlive
# MPI_Finalize and LeakSanitizer would fail every rank at exit: the ranks
# run without leak detection there (mpc's side of data parallelism is
# leak-checked in-process, tests/e2e/data_parallel_test.cpp).
mpirun = "mpirun --oversubscribe"
if getattr(config, "mpc_sanitize", False):
    mpirun += " -x LSAN_OPTIONS=detect_leaks=0"
config.substitutions.append(("%mpirun", mpirun))
# torchrun (pip's torch) starts mpc-run's ranks over Gloo (REQUIRES: torchrun);
# its full path, since lit's PATH may not hold pip's scripts.
torchrun = shutil.which("torchrun")
if torchrun:
    config.available_features.add("torchrun")
    config.substitutions.append(("%torchrun", torchrun))
    for name in ("HOME", "PYENV_ROOT", "PYENV_VERSION"):
        if name in os.environ:
            config.environment[name] = os.environ[name]
