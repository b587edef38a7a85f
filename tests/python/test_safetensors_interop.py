#!/usr/bin/env python3
"""PyTorch interop of runtime/model_io: the files we write load in torchvision, and torchvision's state
dicts read here bit for bit. Runs model_io_tool (the path in $MODEL_IO_TOOL, or build/tests/python/) and
Debian's python3-torch/python3-torchvision; uses no safetensors package: the format is written and read
below with struct, json and numpy, from its specification.

    MODEL_IO_TOOL=build/tests/python/model_io_tool /usr/bin/python3 tests/python/test_safetensors_interop.py -v
"""

import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

try:
    import numpy as np
    import torch
    import torchvision
except ImportError as error:
    sys.exit(f"test_safetensors_interop: {error}; this test needs Debian's python3-torch and "
             "python3-torchvision (scripts/setup.sh installs them) and must run under /usr/bin/python3")

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.environ.get("MODEL_IO_TOOL") or os.path.join(HERE, "..", "..", "build", "tests", "python", "model_io_tool")

TORCH_TO_DTYPE = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
                  torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8", torch.bool: "BOOL"}
DTYPE_TO_NUMPY = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "BF16": np.int16, "I64": np.int64,
                  "I32": np.int32, "U8": np.uint8, "BOOL": np.bool_}


def raw_bytes(tensor):
    tensor = tensor.detach().contiguous().cpu()
    if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16: its bits as int16
        tensor = tensor.view(torch.int16)
    return tensor.numpy().tobytes()


def write_safetensors(path, tensors, metadata=None):
    """The format from its specification: u64 little-endian header length, JSON header padded with spaces
    to 8 bytes, then the tensors' raw bytes in order."""
    header = {"__metadata__": metadata} if metadata else {}
    blobs = []
    offset = 0
    for name, tensor in tensors.items():
        data = raw_bytes(tensor)
        header[name] = {"dtype": TORCH_TO_DTYPE[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for data in blobs:
            out.write(data)


def read_safetensors(path):
    """Returns ({name: tensor} in header order, metadata, header order == data order)."""
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    assert (8 + length) % 8 == 0, "data is not 8-byte aligned"
    header = json.loads(data[8:8 + length])
    metadata = header.pop("__metadata__", {})
    tensors = {}
    ends = []
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        ends.append((begin, end))
        dtype = np.dtype(DTYPE_TO_NUMPY[entry["dtype"]])
        array = np.frombuffer(data, dtype=dtype, count=(end - begin) // dtype.itemsize, offset=8 + length + begin)
        tensor = torch.from_numpy(array.reshape(entry["shape"]).copy())
        if entry["dtype"] == "BF16":
            tensor = tensor.view(torch.bfloat16)
        tensors[name] = tensor
    contiguous_in_order = all(b == e for (_, e), (b, _) in zip(ends, ends[1:])) and (not ends or ends[0][0] == 0) \
        and (not ends or 8 + length + ends[-1][1] == len(data))
    return tensors, metadata, contiguous_in_order


def tool(*args, stdin=None, check=True):
    result = subprocess.run([TOOL, *args], input=stdin, capture_output=True, text=True, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"model_io_tool {' '.join(args)} failed ({result.returncode}): {result.stderr}")
    return result


def tool_json(*args, stdin=None):
    return json.loads(tool(*args, stdin=stdin).stdout)


def spec_of(state_dict):
    return [{"name": name, "shape": list(t.shape), "dtype": TORCH_TO_DTYPE[t.dtype]} for name, t in state_dict.items()]


def trained_resnet18(num_classes=1000):
    """A resnet18 whose BN buffers are not at their initial values (one training-mode forward)."""
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=num_classes)
    model.train()
    with torch.no_grad():
        model(torch.randn(2, 3, 64, 64))
    return model


class SafetensorsInterop(unittest.TestCase):
    def setUp(self):
        self.assertTrue(os.access(TOOL, os.X_OK), f"no model_io_tool at {TOOL}: build it (ninja model_io_tool)")
        self.directory = tempfile.TemporaryDirectory(prefix="safetensors_interop.")
        self.dir = self.directory.name

    def tearDown(self):
        self.directory.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def assert_dump_matches(self, dump, tensors):
        """The C++ reader saw exactly `tensors`: names in order, dtypes, shapes, bytes (crc32), values."""
        self.assertEqual([t["name"] for t in dump["tensors"]], list(tensors))
        for entry in dump["tensors"]:
            tensor = tensors[entry["name"]]
            with self.subTest(tensor=entry["name"]):
                self.assertEqual(entry["dtype"], TORCH_TO_DTYPE[tensor.dtype])
                self.assertEqual(entry["shape"], list(tensor.shape))
                self.assertEqual(entry["crc32"], zlib.crc32(raw_bytes(tensor)))
                # The C++ side sums the values as float (F16/BF16 -> float is exact, F64 -> float rounds as .float()).
                values = tensor.float().double() if tensor.is_floating_point() else tensor.double()
                self.assertLessEqual(abs(entry["sum"] - values.sum().item()),
                                     1e-9 * (values.abs().sum().item() + 1))

    def test_torchvision_state_dict_reads_in_cpp(self):
        state = trained_resnet18().state_dict()
        self.assertEqual(state["bn1.num_batches_tracked"].item(), 1)
        write_safetensors(self.path("resnet18.safetensors"), state, {"format": "pt"})
        dump = tool_json("dump", self.path("resnet18.safetensors"))
        self.assertEqual(dump["metadata"], {"format": "pt"})
        self.assertEqual(len(dump["tensors"]), 122)  # 62 parameters, 20 BNs x 3 buffers
        self.assert_dump_matches(dump, state)

    def test_cpp_file_loads_in_torchvision_strictly(self):
        spec = spec_of(torchvision.models.resnet18().state_dict())
        dump = tool_json("write-random", self.path("cpp.safetensors"), "5", stdin=json.dumps(spec))
        tensors, metadata, contiguous = read_safetensors(self.path("cpp.safetensors"))
        self.assertTrue(contiguous, "tensors are not stored contiguously in the order written")
        self.assertEqual(metadata, {"format": "pt", "writer": "model_io_tool"})
        self.assertEqual(list(tensors), [t["name"] for t in spec])
        self.assert_dump_matches(dump, tensors)

        model = torchvision.models.resnet18()
        model.load_state_dict(tensors, strict=True)
        for name, value in model.state_dict().items():
            self.assertTrue(torch.equal(value, tensors[name]), name)
        self.assertEqual(model.state_dict()["layer1.0.bn1.num_batches_tracked"].dtype, torch.int64)
        model.eval()
        with torch.no_grad():
            self.assertTrue(torch.isfinite(model(torch.randn(1, 3, 64, 64))).all())

    def test_our_resnet_spec_is_torchvisions(self):
        builders = {18: torchvision.models.resnet18, 34: torchvision.models.resnet34,
                    50: torchvision.models.resnet50, 101: torchvision.models.resnet101,
                    152: torchvision.models.resnet152}
        for depth, build in builders.items():
            with self.subTest(depth=depth):
                self.assertEqual(tool_json("spec", str(depth), "10"), spec_of(build(num_classes=10).state_dict()))

    def test_model_files_load_in_torchvision(self):
        model_dir = self.path("model")
        dump = tool_json("write-model", model_dir, "50", "7")
        self.assertEqual(sorted(os.listdir(model_dir)), ["model.json", "model.safetensors"])
        with open(os.path.join(model_dir, "model.json")) as f:
            description = json.load(f)
        self.assertEqual(description["arch"], "resnet50")
        self.assertEqual(description["num_classes"], 7)
        self.assertEqual(description["classes"], [f"class {i}" for i in range(7)])
        self.assertEqual(description["input_shape"], [3, 224, 224])
        self.assertEqual(description["normalization"]["mean"], [0.485, 0.456, 0.406])
        self.assertEqual(description["normalization"]["std"], [0.229, 0.224, 0.225])

        tensors, metadata, contiguous = read_safetensors(os.path.join(model_dir, "model.safetensors"))
        self.assertTrue(contiguous)
        self.assertEqual(metadata["format"], "pt")
        self.assert_dump_matches(dump, tensors)
        model = torchvision.models.resnet50(num_classes=7)
        model.load_state_dict(tensors, strict=True)
        self.assertEqual(sum(p.numel() for p in model.parameters()), 23522375)

    def test_half_precision_and_double_files_read_as_float(self):
        torch.manual_seed(1)
        base = torch.randn(3, 5, 7)
        tensors = {"f16": base.half(), "bf16": base.bfloat16(), "f64": base.double() * 1e10,
                   "special": torch.tensor([float("inf"), -0.0, 6e-8, 65504.0, -1.5], dtype=torch.float16)}
        write_safetensors(self.path("mixed.safetensors"), tensors)
        dump = tool_json("dump", self.path("mixed.safetensors"))
        self.assertEqual([t["dtype"] for t in dump["tensors"]], ["F16", "BF16", "F64", "F16"])
        finite = {name: t for name, t in tensors.items() if name != "special"}
        self.assert_dump_matches({"tensors": dump["tensors"][:3]}, finite)
        self.assertEqual(dump["tensors"][3]["crc32"], zlib.crc32(raw_bytes(tensors["special"])))
        self.assertEqual(dump["tensors"][3]["sum"], None)  # +inf: JSON has no infinity, nlohmann writes null

    def test_ohwi_to_oihw_is_torchs_permute(self):
        torch.manual_seed(2)
        weights = {"conv1.weight": torch.randn(64, 3, 7, 7), "layer.conv2.weight": torch.randn(8, 5, 3, 2),
                   "pointwise.weight": torch.randn(16, 4, 1, 1), "fc.weight": torch.randn(10, 4)}
        ohwi = {name: w.permute(0, 2, 3, 1).contiguous() if w.dim() == 4 else w for name, w in weights.items()}
        write_safetensors(self.path("ohwi.safetensors"), ohwi)
        tool("to-oihw", self.path("ohwi.safetensors"), self.path("oihw.safetensors"))
        back, _, _ = read_safetensors(self.path("oihw.safetensors"))
        for name, w in weights.items():
            self.assertTrue(torch.equal(back[name], w), name)

    def test_torchvision_weights_start_a_model_with_other_classes(self):
        state = trained_resnet18(1000).state_dict()
        write_safetensors(self.path("imagenet.safetensors"), state)
        result = tool_json("load-initial", self.path("imagenet.safetensors"), "18", "10")
        self.assertEqual(result["reinitialise"], ["fc.weight", "fc.bias"])
        self.assertEqual(len(result["taken"]), len(state) - 2)
        self.assertEqual(len(result["notes"]), 1)

        # Saved from DDP, in bfloat16, by an old PyTorch without num_batches_tracked: still taken.
        old = {"module." + name: (t.bfloat16() if t.is_floating_point() else t)
               for name, t in state.items() if not name.endswith("num_batches_tracked")}
        write_safetensors(self.path("old.safetensors"), old)
        result = tool_json("load-initial", self.path("old.safetensors"), "18", "1000")
        self.assertEqual(len(result["taken"]), 62 + 40)
        self.assertEqual(len(result["reinitialise"]), 20)

        # A ResNet-34 file for a ResNet-18: refused, naming the tensor.
        write_safetensors(self.path("resnet34.safetensors"), torchvision.models.resnet34().state_dict())
        refused = tool("load-initial", self.path("resnet34.safetensors"), "18", "1000", check=False)
        self.assertEqual(refused.returncode, 1)
        self.assertEqual(refused.stderr, f"model_io_tool: {self.path('resnet34.safetensors')}: tensor "
                                         "\"layer1.2.conv1.weight\": resnet18 has no tensor of this name (a different "
                                         "architecture?)\n")

    def test_damaged_torch_file_is_refused_with_its_name(self):
        path = self.path("damaged.safetensors")
        write_safetensors(path, {"conv1.weight": torch.zeros(4, 3, 3, 3)})
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - 1)
        result = tool("dump", path, check=False)
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stderr, f"model_io_tool: {path}: tensor \"conv1.weight\": data_offsets [0, 432] "
                                        "reach beyond the end of the data (431 bytes)\n")


if __name__ == "__main__":
    unittest.main()
