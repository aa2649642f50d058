"""api_proxy.py - a recording, optionally failing, TLS proxy in front of the test control plane's
API server, for the cluster tests that watch what a tessera daemon asks of it
(tests/cluster/test_device_manager.py) or make the API server fail under it
(tests/cluster/test_dm_chaos.py)."""

import http.client
import http.server
import json
import ssl
import threading
import urllib.parse

# What an injected failure answers: a Status as the API server writes one.
INJECTED = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                       "message": "injected by the test's proxy", "reason": "InternalError",
                       "code": 500}).encode()


class Recorder:
    """A TLS proxy in front of the API server that records every request: (method, path, request
    body, HTTP status, the server's Warning headers). It serves the control plane's webhook
    certificate (signed by the CA the kubeconfig trusts, for 127.0.0.1) and passes the client's
    Authorization on, so the server sees the device manager's own identity.

    fault (optional), called with (method, path) for every request, injects API server failures:
    None forwards it; "before" answers 500 without forwarding (the request never happened);
    "after" forwards it and then answers 500 (it happened, the client is told it failed). Each
    injected failure is recorded with "fault" set."""

    def __init__(self, cp, fault=None):
        self.cp, self.calls, self.lock, self.fault = cp, [], threading.Lock(), fault
        upstream = urllib.parse.urlsplit(cp.url)
        client_ctx = ssl.create_default_context(cafile=cp.ca)
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _forward(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "connection", "accept-encoding",
                                                "content-length", "expect")}
                fault = recorder.fault(self.command, self.path) if recorder.fault else None
                if fault == "before":
                    status, rheaders, data = 500, [("Content-Type", "application/json")], INJECTED
                else:
                    conn = http.client.HTTPSConnection(upstream.hostname, upstream.port,
                                                       context=client_ctx, timeout=60)
                    try:
                        conn.request(self.command, self.path, body=body, headers=headers)
                        r = conn.getresponse()
                        data = r.read()
                        status, rheaders = r.status, r.getheaders()
                    finally:
                        conn.close()
                    if fault == "after":
                        status, rheaders, data = 500, [("Content-Type", "application/json")], INJECTED
                try:
                    sent = json.loads(body) if body else None
                except ValueError:
                    sent = body.decode(errors="replace")
                with recorder.lock:
                    recorder.calls.append({
                        "method": self.command, "path": self.path, "body": sent,
                        "status": status, "fault": fault,
                        "content_type": self.headers.get("Content-Type"),
                        "warnings": [v for k, v in rheaders if k.lower() == "warning"],
                        "answer": data[:400].decode(errors="replace") if status >= 300 else ""})
                self.send_response(status)
                for k, v in rheaders:
                    if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _forward

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a client gone mid-answer (a daemon killed) is no error of the proxy's

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cp.webhook_cert, cp.webhook_key)
        ctx.set_alpn_protocols(["http/1.1"])
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def kubeconfig(self, name, token):
        """A kubeconfig for token whose server is this proxy."""
        path = self.cp.write_kubeconfig(name, token=token)
        with open(path) as f:
            cfg = json.load(f)
        cfg["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:%d" % self.port
        with open(path, "w") as f:
            json.dump(cfg, f, indent=1)
        return path

    def snapshot(self):
        with self.lock:
            return list(self.calls)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
