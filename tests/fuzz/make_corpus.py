"""Writes the checked-in seed corpus of the fuzz targets: tests/fuzz/corpus/.

Run from anywhere with the folder holding mpc-opt and mpc-run (a build's
bin/): `python3 tests/fuzz/make_corpus.py build/bin`. Needs numpy and onnx
(Debian's python3-numpy, python3-onnx). Deterministic; every file is small
(the whole corpus is a few hundred KB), as make test replays all of it.
"""
import glob
import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")


def out_dir(target):
    d = os.path.join(CORPUS, target)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def npy_bytes(a, version=None):
    buf = io.BytesIO()
    if version is None:
        np.lib.format.write_array(buf, a, allow_pickle=False)
    else:
        np.lib.format.write_array(buf, a, version=version, allow_pickle=False)
    return buf.getvalue()


def npz_bytes(arrays, compressed):
    # np.savez writes timestamps; a fixed date keeps the file deterministic.
    buf = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED
    with zipfile.ZipFile(buf, "w", method) as z:
        for name, a in arrays.items():
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            z.writestr(info, npy_bytes(a))
    return buf.getvalue()


def onnx_model(bin_dir):
    d = out_dir("onnx-model")
    # cnn_dynamo.onnx: torch's dynamo exporter, its signature and node
    # metadata in fields ONNX 1.12's proto keeps as unknown ones.
    for src in ["models/mlp_seed.onnx", "models/resmlp.onnx", "models/cnn.onnx",
                "tests/lit/Inputs/train_mlp_fp16.onnx", "models/cnn_dynamo.onnx"]:
        shutil.copy(os.path.join(ROOT, src), d)
    # An initializer in external data (the fuzzer provides weights.bin).
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 5])
    w.data_location = TensorProto.EXTERNAL
    for k, v in [("location", "weights.bin"), ("offset", "16"), ("length", "40")]:
        e = w.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    write(os.path.join(d, "external_data.onnx"), m.SerializeToString())
    # A symbolic batch and shape arithmetic (Shape -> Gather -> Concat).
    g = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"], name="shape"),
         helper.make_node("Gather", ["s", "zero"], ["b"], name="gather", axis=0),
         helper.make_node("Concat", ["b", "minus1"], ["shape2"], name="cat",
                          axis=0),
         helper.make_node("Reshape", ["x", "shape2"], ["y"], name="reshape")],
        "shapes",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([0], np.int64), "zero"),
         numpy_helper.from_array(np.array([-1], np.int64), "minus1")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    write(os.path.join(d, "shape_arithmetic.onnx"), m.SerializeToString())
    # mpc-opt's own output: training_info, update_binding, mpc functions.
    subprocess.run([os.path.join(bin_dir, "mpc-opt"),
                    os.path.join(ROOT, "tests/lit/Inputs/train_mlp.onnxtext"),
                    "-o", os.path.join(d, "train_mlp.compiled.onnx"),
                    "--optimizer=adam"], check=True)


def onnx_text():
    d = out_dir("onnx-text")
    chunks = []
    files = sorted(glob.glob(os.path.join(ROOT, "tests/lit/**/*.onnxtext"),
                             recursive=True))
    files.append(os.path.join(ROOT, "models/mlp_seed.onnxtext"))
    for path in files:
        text = open(path).read()
        for chunk in text.split("// -----\n"):
            # RUN/CHECK lines are noise to the parser; keep the model.
            lines = [l for l in chunk.splitlines()
                     if not l.lstrip().startswith("//")]
            body = "\n".join(lines).strip() + "\n"
            if "=>" in body and body not in chunks:
                chunks.append(body)
    for i, body in enumerate(chunks):
        write(os.path.join(d, "lit_%03d.onnxtext" % i), body.encode())


def npy():
    d = out_dir("npy")
    for src in sorted(glob.glob(os.path.join(ROOT, "tests/unit/Inputs/*.npy"))):
        shutil.copy(src, d)
    arrays = {
        "f4": np.arange(6, dtype="<f4").reshape(2, 3),
        "f2": np.array([1.5, -0.0, np.inf], "<f2"),
        "f8": np.array(3.25, "<f8"),
        "i8": np.array([[-1, 2**40]], "<i8"),
        "i4": np.array([7, -7], "<i4"),
        "i1": np.array([-128, 127], "|i1"),
        "u1": np.array([0, 255], "|u1"),
        "b1": np.array([[True, False]], "|b1"),
        "empty": np.zeros((0, 4), "<f4"),
        "rank5": np.ones((1, 2, 1, 2, 1), "<f4"),
    }
    for name, a in arrays.items():
        write(os.path.join(d, name + ".npy"), npy_bytes(a))
    write(os.path.join(d, "v2_i8.npy"), npy_bytes(arrays["i8"], (2, 0)))


def npz():
    d = out_dir("npz")
    for src in sorted(glob.glob(os.path.join(ROOT, "tests/unit/Inputs/*.npz")) +
                      [os.path.join(ROOT, "tests/lit/Inputs/not_a_zip.npz")]):
        shutil.copy(src, d)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 10)).astype("<f4")
    y = (np.arange(8) % 2).astype("<i8")
    write(os.path.join(d, "mlp_stored.npz"), npz_bytes({"x": x, "y": y}, False))
    write(os.path.join(d, "mlp_deflate.npz"), npz_bytes({"x": x, "y": y}, True))
    y_ignore = y.copy()
    y_ignore[3] = -100
    write(os.path.join(d, "mlp_ignore_index.npz"),
          npz_bytes({"x": x, "y": y_ignore.astype("<i4")}, False))
    x_nan = x.copy()
    x_nan[5, 2] = np.nan
    write(os.path.join(d, "mlp_nan.npz"), npz_bytes({"x": x_nan, "y": y}, True))


def tensor_pb():
    d = out_dir("tensor-pb")
    samples = {
        "raw_f4": numpy_helper.from_array(np.arange(6, dtype=np.float32)
                                          .reshape(2, 3), "x"),
        "raw_f2": numpy_helper.from_array(np.array([1, 2], np.float16), "h"),
        "raw_i8": numpy_helper.from_array(np.array([-3, 4], np.int64), "i"),
        "raw_bool": numpy_helper.from_array(np.array([True, False]), "b"),
        "raw_u8": numpy_helper.from_array(np.array([1, 250], np.uint8), "u"),
        "scalar_f8": numpy_helper.from_array(np.array(2.5, np.float64), "s"),
        "empty": numpy_helper.from_array(np.zeros((0, 3), np.float32), "e"),
        "typed_float": helper.make_tensor("tf", TensorProto.FLOAT, [3],
                                          [1.0, 2.0, 3.0]),
        "typed_int64": helper.make_tensor("ti", TensorProto.INT64, [2], [5, -5]),
        "typed_int32": helper.make_tensor("t32", TensorProto.INT32, [2], [1, 2]),
        "typed_fp16": TensorProto(name="th", data_type=TensorProto.FLOAT16,
                                  dims=[2], int32_data=[0x3c00, 0xc000]),
        "typed_bf16": TensorProto(name="tb", data_type=TensorProto.BFLOAT16,
                                  dims=[1], int32_data=[0x3f80]),
        "typed_double": helper.make_tensor("td", TensorProto.DOUBLE, [2],
                                           [0.5, -0.5]),
        "typed_bool": helper.make_tensor("tbool", TensorProto.BOOL, [3],
                                         [1, 0, 1]),
    }
    for name, t in samples.items():
        write(os.path.join(d, name + ".pb"), t.SerializeToString())
    shutil.copy(os.path.join(ROOT, "tests/unit/Inputs/npy_v2.npy"),
                os.path.join(d, "npy_v2.npy"))


def checkpoint(bin_dir):
    d = out_dir("checkpoint")
    opt = os.path.join(bin_dir, "mpc-opt")
    run = os.path.join(bin_dir, "mpc-run")
    mlp = os.path.join(ROOT, "tests/lit/Inputs/train_mlp.onnxtext")
    with tempfile.TemporaryDirectory() as tmp:
        # The fuzzer's fixture: train_mlp compiled with mpc-opt's defaults.
        model = os.path.join(d, "compiled.onnx")
        subprocess.run([opt, mlp, "-o", model], check=True)
        subprocess.run([run, model, "--synthetic", "--steps=2", "--quiet",
                        "--save=" + os.path.join(d, "after_2_steps.onnx")],
                       check=True)
        subprocess.run([run, model, "--synthetic", "--steps=3", "--shuffle",
                        "--seed=5", "--quiet",
                        "--save=" + os.path.join(d, "shuffled.onnx")],
                       check=True)
        # Checkpoints of other models: refused with "does not match".
        adam = os.path.join(tmp, "adam.onnx")
        subprocess.run([opt, mlp, "-o", adam, "--optimizer=adam"], check=True)
        subprocess.run([run, adam, "--synthetic", "--steps=1", "--quiet",
                        "--save=" + os.path.join(d, "other_optimizer.onnx")],
                       check=True)
        subprocess.run([opt, os.path.join(ROOT, "tests/lit/Inputs/train_mlp_fp16.onnx"),
                        "-o", os.path.join(d, "other_model.onnx")], check=True)


def external_data():
    # external_data_fuzzer.cpp's input: location index, data type, flags
    # (1 offset, 2 length, 4 sparse terabyte file, 8 checksum key, 16 a
    # second location, top two bits the rank), one byte per dim and per
    # offset/length (0xf0.. absurd values), then the data file's bytes.
    d = out_dir("external-data")
    f32 = np.arange(6, dtype=np.float32).tobytes()

    def seed(name, loc, dtype, flags, dims, numbers, data):
        head = bytes([loc, dtype, flags]) + bytes(dims) + bytes(numbers)
        write(os.path.join(d, name + ".bin"), head + data)

    rank2 = 2 << 6
    seed("float_2x3", 0, TensorProto.FLOAT, rank2, [2, 3], [], f32)
    seed("subfolder_offset", 1, TensorProto.FLOAT, rank2 | 1 | 2, [1, 3],
         [4, 12, 4, 12], b"x" * 12 + f32)  # offset 12, length 12
    seed("symlink_inside", 2, TensorProto.FLOAT, 1 << 6, [6], [], f32)
    seed("symlink_out", 4, TensorProto.UINT8, 1 << 6, [16], [], b"a" * 16)
    seed("folder_link_out", 5, TensorProto.UINT8, 1 << 6, [16], [], b"a" * 16)
    seed("dotdot", 6, TensorProto.FLOAT, 1 << 6, [1], [], f32[:4])
    seed("absolute", 8, TensorProto.UINT8, 1 << 6, [4], [], b"abcd")
    seed("fifo", 11, TensorProto.UINT8, 1 << 6, [4], [], b"abcd")
    seed("sparse_terabyte", 0, TensorProto.FLOAT, (1 << 6) | 4, [0xf1], [],
         f32)  # [2^38] fp32 on a sparse 2^40-byte file
    seed("sparse_2gib", 0, TensorProto.UINT8, (1 << 6) | 4 | 2, [0xf0],
         [4, 0xf0], f32)  # [2^31] uint8, length 2^31: under the 16 GiB cap
    seed("undefined_type_no_length", 0, 0, 4, [], [], f32)
    seed("bool_bytes", 0, TensorProto.BOOL, 1 << 6, [5], [], b"\0\1\2\0\xff")
    seed("length_not_a_number", 0, TensorProto.FLOAT, (1 << 6) | 2, [6],
         [0], f32)
    seed("second_location", 0, TensorProto.FLOAT, (1 << 6) | 16, [6], [], f32)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_corpus.py BUILD/bin")
    bin_dir = os.path.abspath(sys.argv[1])
    onnx_model(bin_dir)
    onnx_text()
    npy()
    npz()
    tensor_pb()
    checkpoint(bin_dir)
    external_data()


if __name__ == "__main__":
    main()
