"""fp16_convert_time.py -- times onnxconverter-common's convert_float_to_float16 on a forward model.

The tool users reach for to put an ONNX model in fp16 (inference only: no backward, no loss
scaling, no master weights); the side-by-side reference for mpc-opt's compile time.
Prints the median milliseconds of the conversion call over --repeat runs (each on a fresh
copy of the loaded model; Python start-up and file I/O not counted). Exits 3 with a line
when onnxconverter-common is not installed.

Usage: python3 bench/fp16_convert_time.py MODEL.onnx [--repeat=3]
"""
import argparse
import copy
import statistics
import sys
import time
import warnings

try:
    import onnx
    from onnxconverter_common import float16
except ImportError as e:
    print(f"onnxconverter-common not importable ({e})")
    sys.exit(3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    model = onnx.load(a.model)
    times = []
    for _ in range(a.repeat):
        fresh = copy.deepcopy(model)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # it warns about every value it clamps
            float16.convert_float_to_float16(fresh)
        times.append((time.perf_counter() - start) * 1e3)
    print(f"{statistics.median(times):.3f}")


if __name__ == "__main__":
    main()
