#!/usr/bin/env python3
"""tessera's gRPC stack (src/grpc/) against python3-grpcio over unix sockets, both ways.

Usage: grpc_interop.py GRPC_PEER PEERS_DIR

python client -> C server (grpc_peer serve): unary GetDevicePluginOptions and Allocate, an
unknown method (UNIMPLEMENTED), ListAndWatch with updates pushed from another C thread, a client
cancel seen by the server's closed callback, and a stop that ends an open stream with status OK.
C client (grpc_peer register / watch) -> python server: unary Register, and a server stream read
and then cancelled, which the python server sees. Prints TAP.
"""
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc

PEER = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from protos import deviceplugin as dp  # noqa: E402

results = []


def check(name, ok, detail=""):
    results.append((name, bool(ok), detail))


def lines_of(proc):
    q = queue.Queue()

    def pump():
        for line in proc.stdout:
            q.put(line.rstrip("\n"))
        q.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return q


def expect(q, want, timeout=5.0):
    end = time.time() + timeout
    seen = []
    while time.time() < end:
        try:
            line = q.get(timeout=max(0.01, end - time.time()))
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if line == want:
            return True, seen
    return False, seen


def unary(ch, method, req_cls_obj, resp_cls):
    return ch.unary_unary(method, request_serializer=lambda m: m.SerializeToString(),
                          response_deserializer=resp_cls.FromString)(req_cls_obj, timeout=5)


def c_server(tmp):
    sock = os.path.join(tmp, "plugin.sock")
    proc = subprocess.Popen([PEER, "serve", sock, "3"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    q = lines_of(proc)
    ok, seen = expect(q, "ready")
    check("C server starts", ok, seen)
    ch = grpc.insecure_channel("unix:" + sock)

    opts = unary(ch, "/v1beta1.DevicePlugin/GetDevicePluginOptions", dp.Empty(),
                 dp.DevicePluginOptions)
    check("python -> C: GetDevicePluginOptions", opts.get_preferred_allocation_available
          and not opts.pre_start_required, opts)

    req = dp.AllocateRequest(container_requests=[
        dp.ContainerAllocateRequest(devices_ids=["dev-0", "dev-1"])])
    resp = unary(ch, "/v1beta1.DevicePlugin/Allocate", req, dp.AllocateResponse)
    check("python -> C: Allocate echoes the devices",
          resp.container_responses[0].envs["DEVICES"] == "dev-0,dev-1", resp)

    big = dp.AllocateRequest(container_requests=[
        dp.ContainerAllocateRequest(devices_ids=["d%06d" % i for i in range(40000)])])
    resp = unary(ch, "/v1beta1.DevicePlugin/Allocate", big, dp.AllocateResponse)
    check("python -> C: a 320 kB request across many DATA frames",
          len(resp.container_responses[0].envs["DEVICES"]) == 40000 * 8 - 1)

    try:
        unary(ch, "/v1beta1.DevicePlugin/Nope", dp.Empty(), dp.Empty)
        check("python -> C: unknown method is UNIMPLEMENTED", False, "no error")
    except grpc.RpcError as e:
        check("python -> C: unknown method is UNIMPLEMENTED",
              e.code() == grpc.StatusCode.UNIMPLEMENTED and "Nope" in e.details(), e)

    law = ch.unary_stream("/v1beta1.DevicePlugin/ListAndWatch",
                          request_serializer=lambda m: m.SerializeToString(),
                          response_deserializer=dp.ListAndWatchResponse.FromString)
    stream = law(dp.Empty())
    counts = []
    for msg in stream:
        counts.append([d.ID for d in msg.devices])
        if len(counts) == 3:
            break
    check("python -> C: ListAndWatch gets pushed updates",
          counts == [["dev-0"], ["dev-0", "dev-1"], ["dev-0", "dev-1", "dev-2"]], counts)
    stream.cancel()
    ok, seen = expect(q, "closed cancelled")
    check("python cancel reaches the C server's closed callback", ok, seen)

    stream = law(dp.Empty())
    first = next(stream)
    check("python -> C: a second ListAndWatch starts with the full list",
          [d.ID for d in first.devices] == ["dev-0"])
    proc.stdin.close()
    try:
        rest = list(stream)
        check("C server stop ends an open stream with status OK", rest == [] and
              stream.code() == grpc.StatusCode.OK, stream.code())
    except grpc.RpcError as e:
        check("C server stop ends an open stream with status OK", False, e)
    ok, seen = expect(q, "stopped")
    check("C server stops and reports the stream shut down", ok and "closed shutdown" in seen,
          seen)
    check("C server exits 0", proc.wait(timeout=10) == 0)
    check("C server removes its socket", not os.path.exists(sock))
    ch.close()


def python_server(tmp):
    sock = os.path.join(tmp, "kubelet.sock")
    registered = []
    cancelled = threading.Event()

    def register(req, ctx):
        registered.append(req)
        if req.version != "v1beta1":
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad version")
        return dp.Empty()

    def list_and_watch(req, ctx):
        ctx.add_callback(cancelled.set)
        for i in range(1, 4):
            yield dp.ListAndWatchResponse(devices=[
                dp.Device(ID="py-%d" % j, health="Healthy") for j in range(i)])
        while ctx.is_active():
            time.sleep(0.02)

    def fail(req, ctx):
        ctx.abort(grpc.StatusCode.FAILED_PRECONDITION, "100% caf\u00e9\nnot ready")

    handlers = {
        "Register": grpc.unary_unary_rpc_method_handler(
            register, request_deserializer=dp.RegisterRequest.FromString,
            response_serializer=lambda m: m.SerializeToString()),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((
        grpc.method_handlers_generic_handler("v1beta1.Registration", handlers),
        grpc.method_handlers_generic_handler("v1beta1.DevicePlugin", {
            "ListAndWatch": grpc.unary_stream_rpc_method_handler(
                list_and_watch, request_deserializer=dp.Empty.FromString,
                response_serializer=lambda m: m.SerializeToString()),
            "GetDevicePluginOptions": grpc.unary_unary_rpc_method_handler(
                fail, request_deserializer=dp.Empty.FromString,
                response_serializer=lambda m: m.SerializeToString()),
        })))
    server.add_insecure_port("unix:" + sock)
    server.start()

    out = subprocess.run([PEER, "register", sock], capture_output=True, text=True, timeout=30)
    check("C -> python: Register returns OK", out.stdout.strip() == "status 0", out.stdout)
    check("C -> python: the server decoded the RegisterRequest",
          len(registered) == 1 and registered[0].resource_name == "tessera.io/gpu"
          and registered[0].endpoint == "tessera-gpu.sock"
          and registered[0].options.get_preferred_allocation_available, registered)

    out = subprocess.run([PEER, "watch", sock, "3"], capture_output=True, text=True, timeout=30)
    check("C -> python: ListAndWatch messages arrive in order",
          out.stdout.split("\n")[:3] == ["devices py-0", "devices py-0,py-1",
                                         "devices py-0,py-1,py-2"], out.stdout)
    check("C cancel reaches the python server", cancelled.wait(5))

    out = subprocess.run([PEER, "status", sock], capture_output=True, text=True, timeout=30)
    check("C -> python: an error status and its percent-encoded message",
          out.stdout == "status 9 100% caf\u00e9\nnot ready\n", repr(out.stdout))
    server.stop(0)

    out = subprocess.run([PEER, "register", os.path.join(tmp, "nobody.sock")],
                         capture_output=True, text=True, timeout=30)
    check("C -> nothing: UNAVAILABLE", out.stdout.startswith("status 14 "), out.stdout)


def main():
    with tempfile.TemporaryDirectory(prefix="tsr-grpc-") as tmp:
        for part in (c_server, python_server):
            try:
                part(tmp)
            except Exception as e:  # a crash in one part is one failure, not a lost run
                check(part.__name__ + " ran to the end", False, repr(e))
    print("1..%d" % len(results))
    failed = 0
    for i, (name, ok, detail) in enumerate(results, 1):
        print("%s %d - %s" % ("ok" if ok else "not ok", i, name))
        if not ok:
            failed += 1
            print("# %s" % str(detail).replace("\n", "\n# "))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
