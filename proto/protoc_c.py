#!/usr/bin/env python3
"""protoc-c over a copy of one api.proto with its `service` blocks removed.

Usage: protoc_c.py PROTOC_C SRC_ROOT REL_PATH OUT_ROOT

tessera speaks gRPC itself (src/grpc/), so it needs only the message code. Debian's protoc-c
1.4.1 would also emit protobuf-c RPC service stubs, and for the kubelet's `Register` method it
names a struct member `register`, a C keyword, which does not compile. The copy is written to
OUT_ROOT/REL_PATH, so the generated files keep the package path ("deviceplugin/v1beta1/...").
"""
import os
import re
import subprocess
import sys


def strip_services(text):
    out, i = [], 0
    for m in re.finditer(r"^service\s+\w+\s*\{", text, re.M):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 0, m.end() - 1
        while j < len(text):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        i = j + 1
    out.append(text[i:])
    return "".join(out)


def main():
    protoc_c, src_root, rel, out_root = sys.argv[1:5]
    with open(os.path.join(src_root, rel), encoding="utf-8") as f:
        text = strip_services(f.read())
    dst = os.path.join(out_root, rel)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(dst, "w", encoding="utf-8") as f:
        f.write(text)
    subprocess.run([protoc_c, "--proto_path=" + out_root, "--c_out=" + out_root, dst], check=True)


if __name__ == "__main__":
    main()
