"""The kubelet's protobuf messages for the Python test peers, compiled from the project's own
copies in proto/ by Debian's protoc (protobuf-compiler) into a private temporary directory the
first time they are asked for.

    from protos import deviceplugin, podresources
    req = deviceplugin.RegisterRequest(version="v1beta1", ...)

Both modules are the protoc-generated `api_pb2` of each package; nothing here is hand-written
protobuf code. The directory is removed when the interpreter exits.
"""
import atexit
import importlib.util
import os
import shutil
import subprocess
import tempfile

_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")
_SOURCES = {
    "deviceplugin": "deviceplugin/v1beta1/api.proto",
    "podresources": "podresources/v1/api.proto",
}


def _compile():
    out = tempfile.mkdtemp(prefix="tsr-protos-")
    atexit.register(shutil.rmtree, out, True)
    subprocess.run(["protoc", "--proto_path=" + _ROOT, "--python_out=" + out]
                   + list(_SOURCES.values()), check=True)
    modules = {}
    for name, rel in _SOURCES.items():
        path = os.path.join(out, rel[:-len(".proto")] + "_pb2.py")
        spec = importlib.util.spec_from_file_location("tsr_" + name + "_pb2", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules[name] = module
    return modules


_MODULES = _compile()
deviceplugin = _MODULES["deviceplugin"]
podresources = _MODULES["podresources"]
