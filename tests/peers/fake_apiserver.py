#!/usr/bin/env python3
"""fake_apiserver.py - a Kubernetes API server for tests, on the standard library only.

It serves custom resources the way kube-apiserver serves CRDs (spec/kubernetes-contracts.md
section 4): worker.gpustack.ai/v1alpha1 InstanceTypes, KVCachePools and KVCacheBackends (cluster
scoped) and KVCachePoolBindings (namespaced); kueue.x-k8s.io/v1beta2 LocalQueues (namespaced) and
ClusterQueues (cluster scoped); gpustack.ai/v1 Settings (namespaced). Any other resource is a
404, as for a CRD not installed.

Semantics kept from the real server:
  * one global resourceVersion counter; every create, update, patch and delete is an event in a
    history, and an object carries the resourceVersion of its last change;
  * list returns {kind: XList, apiVersion, metadata: {resourceVersion, continue,
    remainingItemCount}, items}; limit/continue page through one snapshot (the state at the first
    page's resourceVersion, rebuilt from the history); an expired continue token is HTTP 410
    Expired;
  * watch (watch=1|true) streams {"type","object"} lines in HTTP/1.1 chunked encoding from a
    resourceVersion (unset or "0": synthetic ADDED events for the current state first);
    allowWatchBookmarks=true adds BOOKMARK events (kind, apiVersion, metadata.resourceVersion
    only) every --bookmark-interval seconds and on command; timeoutSeconds ends the stream
    cleanly; a resourceVersion older than the compaction point gets 200 and an ERROR event whose
    object is a Status with code 410 (or an HTTP 410, in "http" mode), as the real server does;
  * labelSelector (equality, inequality, existence) on list and watch;
  * POST (create, 409 AlreadyExists), PUT (409 Conflict on a stale resourceVersion), DELETE,
    PATCH as merge-patch, json-patch (RFC 6902), apply (fieldManager required; JSON bodies only;
    lists of named maps merged by name) and strategic-merge (415, as for every CRD); the status
    subresource keeps only status;
  * bearer-token authentication (or a client certificate signed by --client-ca), 401 Status
    otherwise; TLS with the certificate the test made.

Control, for tests only, without authentication, under /_test/ (POST bodies are JSON):
  token {"tokens": [..]}        replace the accepted bearer tokens
  compact                       watches and continue tokens older than now get 410
  drop                          cut every open watch without ending its chunked body
  expire                        send every open watch an ERROR 410 event and end it
  bookmark                      send every open watch that allows them a BOOKMARK now
  pause {"paused": bool}        hold new watch requests (they wait) until unpaused
  watch410 {"mode": "event"|"http"}
  fail {"status": 429, "count": n, "retry_after": s, "match": "substring of the path"}
  GET stats                     counters: lists, watches, active watches, auth failures, ...

Usage: fake_apiserver.py --cert server.crt --key server.key --token TOKEN [--client-ca ca.crt]
       [--port 0] [--bookmark-interval 1.0] [--unserved PLURAL ...]
It prints "READY <port>" on stdout once listening, and exits when stdin reaches end of file
(so it never outlives the test that started it) or on SIGTERM.
"""

import argparse
import base64
import copy
import datetime
import json
import signal
import socket
import ssl
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

RESOURCES = {
    ("worker.gpustack.ai", "v1alpha1", "instancetypes"): ("InstanceType", False),
    ("kueue.x-k8s.io", "v1beta2", "localqueues"): ("LocalQueue", True),
    ("kueue.x-k8s.io", "v1beta2", "clusterqueues"): ("ClusterQueue", False),
    ("worker.gpustack.ai", "v1alpha1", "kvcachepoolbindings"): ("KVCachePoolBinding", True),
    ("worker.gpustack.ai", "v1alpha1", "kvcachepools"): ("KVCachePool", False),
    ("worker.gpustack.ai", "v1alpha1", "kvcachebackends"): ("KVCacheBackend", False),
    ("gpustack.ai", "v1", "settings"): ("Setting", True),
}

TRUE_VALUES = ("1", "t", "T", "true", "TRUE", "True")


def status(code, reason, message, details=None):
    s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason, "code": code}
    if details:
        s["details"] = details
    return s


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class HttpError(Exception):
    def __init__(self, code, reason, message, headers=None):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.headers = headers or {}


class Resource:
    def __init__(self, group, version, plural, kind, namespaced):
        self.group, self.version, self.plural = group, version, plural
        self.kind, self.namespaced = kind, namespaced
        self.api_version = "%s/%s" % (group, version)
        self.qualified = "%s.%s" % (plural, group)

    def key(self, ns, name):
        return (ns or "", name)


# ---- the store ------------------------------------------------------------------------------

class Store:
    def __init__(self, tokens):
        self.cond = threading.Condition()
        self.rv = 1
        self.compacted = 1
        self.history = []  # (rv, resource, type, object)
        self.objects = {}  # resource -> {(ns, name): object}
        self.tokens = set(tokens)
        self.drop_gen = 0
        self.expire_gen = 0
        self.bookmark_gen = 0
        self.paused = False
        self.watch410 = "event"
        self.failures = []
        self.stats = {"lists": {}, "watches": {}, "active_watches": 0, "auth_failures": 0,
                      "requests": 0, "last_token": "", "relists": 0, "gone_sent": 0,
                      "dropped": 0}

    def bump(self, what, res):
        d = self.stats[what]
        d[res.plural] = d.get(res.plural, 0) + 1

    def record(self, res, etype, obj):
        """Appends an event; the caller holds cond and has set obj's resourceVersion."""
        self.history.append((int(obj["metadata"]["resourceVersion"]), res, etype,
                             copy.deepcopy(obj)))
        self.cond.notify_all()

    def next_rv(self):
        self.rv += 1
        return self.rv

    def table(self, res):
        return self.objects.setdefault(res, {})

    def state_at(self, res, rv):
        """The objects of res as they were at resourceVersion rv."""
        state = {}
        for (erv, eres, etype, obj) in self.history:
            if erv > rv:
                break
            if eres is not res:
                continue
            k = res.key(obj["metadata"].get("namespace"), obj["metadata"]["name"])
            if etype == "DELETED":
                state.pop(k, None)
            else:
                state[k] = obj
        return state


STORE = None
OPTS = None


# ---- selectors and patches --------------------------------------------------------------------

def parse_selector(text):
    reqs = []
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        if "!=" in part:
            k, v = part.split("!=", 1)
            reqs.append(("ne", k.strip(), v.strip()))
        elif "==" in part:
            k, v = part.split("==", 1)
            reqs.append(("eq", k.strip(), v.strip()))
        elif "=" in part:
            k, v = part.split("=", 1)
            reqs.append(("eq", k.strip(), v.strip()))
        elif part.startswith("!"):
            reqs.append(("absent", part[1:].strip(), None))
        else:
            reqs.append(("exists", part, None))
    return reqs


def selector_matches(reqs, obj):
    labels = obj.get("metadata", {}).get("labels") or {}
    for op, k, v in reqs:
        if op == "eq" and labels.get(k) != v:
            return False
        if op == "ne" and labels.get(k) == v:
            return False
        if op == "exists" and k not in labels:
            return False
        if op == "absent" and k in labels:
            return False
    return True


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def apply_merge(target, patch):
    """Server-side apply, simplified: maps merge, lists of maps with a name merge by name."""
    if isinstance(patch, dict):
        result = dict(target) if isinstance(target, dict) else {}
        for k, v in patch.items():
            result[k] = apply_merge(result.get(k), v)
        return result
    if (isinstance(patch, list) and isinstance(target, list)
            and all(isinstance(e, dict) and "name" in e for e in patch + target)):
        result = [copy.deepcopy(e) for e in target]
        for e in patch:
            for i, t in enumerate(result):
                if t["name"] == e["name"]:
                    result[i] = apply_merge(t, e)
                    break
            else:
                result.append(copy.deepcopy(e))
        return result
    return copy.deepcopy(patch)


def pointer_tokens(ptr):
    if ptr == "":
        return []
    if not ptr.startswith("/"):
        raise ValueError("path %r does not start with /" % ptr)
    return [t.replace("~1", "/").replace("~0", "~") for t in ptr[1:].split("/")]


def pointer_parent(doc, tokens):
    cur = doc
    for t in tokens[:-1]:
        if isinstance(cur, dict):
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[int(t)]
        else:
            raise KeyError(t)
    return cur


def json_patch(doc, ops):
    doc = copy.deepcopy(doc)
    if not isinstance(ops, list):
        raise ValueError("a JSON patch must be an array")
    for op in ops:
        kind, path = op.get("op"), op.get("path")
        tokens = pointer_tokens(path)

        def get(tokens_):
            cur = doc
            for t in tokens_:
                cur = cur[t] if isinstance(cur, dict) else cur[int(t)]
            return cur

        def remove(tokens_):
            parent = pointer_parent(doc, tokens_)
            last = tokens_[-1]
            if isinstance(parent, dict):
                return parent.pop(last)
            return parent.pop(int(last))

        def add(tokens_, value):
            nonlocal doc
            if not tokens_:
                doc = value
                return
            parent = pointer_parent(doc, tokens_)
            last = tokens_[-1]
            if isinstance(parent, dict):
                parent[last] = value
            elif last == "-":
                parent.append(value)
            else:
                i = int(last)
                if i > len(parent):
                    raise IndexError(last)
                parent.insert(i, value)

        if kind == "add":
            add(tokens, copy.deepcopy(op["value"]))
        elif kind == "remove":
            remove(tokens)
        elif kind == "replace":
            get(tokens)
            if tokens:
                remove(tokens)
            add(tokens, copy.deepcopy(op["value"]))
        elif kind == "move":
            value = remove(pointer_tokens(op["from"]))
            add(tokens, value)
        elif kind == "copy":
            add(tokens, copy.deepcopy(get(pointer_tokens(op["from"]))))
        elif kind == "test":
            if get(tokens) != op.get("value"):
                raise AssertionError("test failed at %s" % path)
        else:
            raise ValueError("unknown op %r" % kind)
    return doc


# ---- the handler ------------------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-apiserver/1"

    def setup(self):
        # The TLS handshake happens here, in the connection's own thread, not in accept().
        try:
            self.request.settimeout(10)
            self.request.do_handshake()
            self.request.settimeout(None)
        except (ssl.SSLError, OSError):
            self.handshake_failed = True
        else:
            self.handshake_failed = False
        super().setup()

    def handle(self):
        if not self.handshake_failed:
            try:
                super().handle()
            except (ConnectionError, ssl.SSLError, OSError):
                pass

    def log_message(self, fmt, *args):
        if OPTS.verbose:
            sys.stderr.write("fake-apiserver: " + (fmt % args) + "\n")

    # -- replies --

    def reply(self, code, body, headers=None, content_type="application/json"):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def reply_error(self, e):
        self.reply(e.code, status(e.code, e.reason, e.message), e.headers)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(n) if n else b""
        return data

    def read_json(self):
        data = self.read_body()
        try:
            return json.loads(data or b"null")
        except ValueError as e:
            raise HttpError(400, "BadRequest", "the body is not JSON: %s" % e)

    # -- dispatch --

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def dispatch(self, method):
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        try:
            if url.path.startswith("/_test/"):
                return self.control(method, url.path[len("/_test/"):])
            self.authenticate()
            self.inject_failure(url.path)
            self.api(method, url.path, query)
        except HttpError as e:
            self.reply_error(e)

    def authenticate(self):
        auth = self.headers.get("Authorization", "")
        with STORE.cond:
            STORE.stats["requests"] += 1
            if auth.startswith("Bearer "):
                STORE.stats["last_token"] = auth[7:]
                if auth[7:] in STORE.tokens:
                    return
            elif self.request.getpeercert():
                return
            STORE.stats["auth_failures"] += 1
        raise HttpError(401, "Unauthorized", "Unauthorized")

    def inject_failure(self, path):
        with STORE.cond:
            for f in STORE.failures:
                if f["count"] > 0 and f.get("match", "") in path:
                    f["count"] -= 1
                    code = int(f.get("status", 500))
                    headers = {}
                    if f.get("retry_after") is not None:
                        headers["Retry-After"] = str(f["retry_after"])
                    reason = {429: "TooManyRequests", 503: "ServiceUnavailable"}.get(
                        code, "InternalError")
                    raise HttpError(code, reason, "injected failure", headers)

    # -- control --

    def control(self, method, what):
        body = self.read_json() if method == "POST" else None
        with STORE.cond:
            if what == "stats":
                out = dict(STORE.stats, rv=STORE.rv, compacted=STORE.compacted,
                           tokens=sorted(STORE.tokens))
                return self.reply(200, out)
            if what == "token":
                STORE.tokens = set(body["tokens"])
            elif what == "compact":
                STORE.compacted = STORE.rv
            elif what == "drop":
                STORE.drop_gen += 1
            elif what == "expire":
                STORE.expire_gen += 1
            elif what == "bookmark":
                STORE.bookmark_gen += 1
            elif what == "pause":
                STORE.paused = bool(body.get("paused"))
            elif what == "watch410":
                if body.get("mode") not in ("event", "http"):
                    raise HttpError(400, "BadRequest", "mode must be event or http")
                STORE.watch410 = body["mode"]
            elif what == "fail":
                STORE.failures.append({"status": body.get("status", 500),
                                       "count": body.get("count", 1),
                                       "retry_after": body.get("retry_after"),
                                       "match": body.get("match", "")})
            else:
                raise HttpError(404, "NotFound", "no control %r" % what)
            STORE.cond.notify_all()
            self.reply(200, {"rv": STORE.rv, "compacted": STORE.compacted})

    # -- the API --

    def route(self, path):
        """(resource, namespace, name, subresource) for an /apis/ path."""
        parts = [p for p in path.split("/") if p]
        if len(parts) < 4 or parts[0] != "apis":
            raise HttpError(404, "NotFound", "the server could not find the requested resource")
        group, version, rest = parts[1], parts[2], parts[3:]
        ns = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            ns, rest = rest[1], rest[2:]
        key = (group, version, rest[0])
        if key not in RESOURCES or key[2] in OPTS.unserved or len(rest) > 3:
            raise HttpError(404, "NotFound", "the server could not find the requested resource")
        kind, namespaced = RESOURCES[key]
        res = RESOURCE_OBJECTS[key]
        if ns is not None and not namespaced:
            raise HttpError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub not in (None, "status"):
            raise HttpError(404, "NotFound", "the server could not find the requested resource")
        if name is not None and namespaced and ns is None:
            raise HttpError(404, "NotFound", "the server could not find the requested resource")
        return res, ns, name, sub

    def api(self, method, path, query):
        res, ns, name, sub = self.route(path)
        if name is None:
            if method == "GET" and query.get("watch") in TRUE_VALUES:
                return self.watch(res, ns, query)
            if method == "GET":
                return self.list(res, ns, query)
            if method == "POST":
                return self.create(res, ns, self.read_json())
            raise HttpError(405, "MethodNotAllowed", "method %s not allowed" % method)
        if method == "GET":
            with STORE.cond:
                obj = STORE.table(res).get(res.key(ns, name))
            if obj is None:
                raise self.not_found(res, name)
            return self.reply(200, obj)
        if method == "PUT":
            return self.update(res, ns, name, sub, self.read_json())
        if method == "PATCH":
            return self.patch(res, ns, name, sub, query)
        if method == "DELETE":
            return self.delete(res, ns, name)
        raise HttpError(405, "MethodNotAllowed", "method %s not allowed" % method)

    def not_found(self, res, name):
        return HttpError(404, "NotFound", '%s "%s" not found' % (res.qualified, name))

    def conflict(self, res, name):
        return HttpError(409, "Conflict",
                         'Operation cannot be fulfilled on %s "%s": the object has been modified; '
                         'please apply your changes to the latest version and try again'
                         % (res.qualified, name))

    def check_shape(self, res, ns, obj):
        if not isinstance(obj, dict):
            raise HttpError(400, "BadRequest", "the body must be an object")
        if obj.get("kind", res.kind) != res.kind or \
                obj.get("apiVersion", res.api_version) != res.api_version:
            raise HttpError(400, "BadRequest", "the object is not a %s %s"
                            % (res.api_version, res.kind))
        md = obj.setdefault("metadata", {})
        if not isinstance(md, dict) or not md.get("name"):
            raise HttpError(422, "Invalid", "%s.%s \"\" is invalid: metadata.name: Required value"
                            % (res.kind, res.group))
        if res.namespaced:
            if md.get("namespace", ns) != ns:
                raise HttpError(400, "BadRequest", "the namespace of the provided object does "
                                "not match the namespace sent on the request")
            md["namespace"] = ns
        else:
            md.pop("namespace", None)
        obj["kind"], obj["apiVersion"] = res.kind, res.api_version
        return obj

    def create(self, res, ns, obj, code=201):
        if res.namespaced and ns is None:
            raise HttpError(405, "MethodNotAllowed", "create needs a namespace")
        obj = self.check_shape(res, ns, obj)
        md = obj["metadata"]
        with STORE.cond:
            table = STORE.table(res)
            k = res.key(ns, md["name"])
            if k in table:
                raise HttpError(409, "AlreadyExists", '%s "%s" already exists'
                                % (res.qualified, md["name"]))
            md["uid"] = str(uuid.uuid4())
            md["creationTimestamp"] = now_rfc3339()
            md["generation"] = 1
            md["resourceVersion"] = str(STORE.next_rv())
            table[k] = obj
            STORE.record(res, "ADDED", obj)
        self.reply(code, obj)

    def replace_locked(self, res, ns, name, old, new, sub):
        """Stores new in place of old (the caller holds cond and has checked everything)."""
        if sub == "status":
            merged = copy.deepcopy(old)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            new = merged
        md = new["metadata"]
        for k in ("uid", "creationTimestamp"):
            md[k] = old["metadata"][k]
        md["generation"] = old["metadata"].get("generation", 1) + \
            (1 if new.get("spec") != old.get("spec") else 0)
        md["resourceVersion"] = str(STORE.next_rv())
        STORE.table(res)[res.key(ns, name)] = new
        STORE.record(res, "MODIFIED", new)
        return new

    def update(self, res, ns, name, sub, obj):
        obj = self.check_shape(res, ns, obj)
        if obj["metadata"]["name"] != name:
            raise HttpError(400, "BadRequest", "the name of the object does not match the name "
                            "on the URL")
        with STORE.cond:
            old = STORE.table(res).get(res.key(ns, name))
            if old is None:
                raise self.not_found(res, name)
            rv = obj["metadata"].get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise self.conflict(res, name)
            new = self.replace_locked(res, ns, name, old, obj, sub)
        self.reply(200, new)

    def patch(self, res, ns, name, sub, query):
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        body = self.read_body()
        if ctype == "application/strategic-merge-patch+json":
            raise HttpError(415, "UnsupportedMediaType",
                            "the body of the request was in an unknown format - accepted media "
                            "types include: application/json-patch+json, "
                            "application/merge-patch+json, application/apply-patch+yaml")
        if ctype not in ("application/merge-patch+json", "application/json-patch+json",
                         "application/apply-patch+yaml"):
            raise HttpError(415, "UnsupportedMediaType", "unsupported patch type %r" % ctype)
        if ctype == "application/apply-patch+yaml" and not query.get("fieldManager"):
            raise HttpError(422, "Invalid", 'PatchOptions.meta.k8s.io "" is invalid: '
                            'fieldManager: Required value: is required for apply patch')
        try:
            patch = json.loads(body or b"null")
        except ValueError:
            raise HttpError(400, "BadRequest", "the patch body is not JSON (this fake reads "
                            "apply bodies as JSON only)")
        with STORE.cond:
            old = STORE.table(res).get(res.key(ns, name))
            if old is None and ctype != "application/apply-patch+yaml":
                raise self.not_found(res, name)
            if isinstance(patch, dict):
                rv = (patch.get("metadata") or {}).get("resourceVersion")
                if old is not None and rv and rv != old["metadata"]["resourceVersion"]:
                    raise self.conflict(res, name)
            if old is None:
                obj = self.check_shape(res, ns, copy.deepcopy(patch))
                if obj["metadata"]["name"] != name:
                    raise HttpError(400, "BadRequest", "the name of the object does not match")
                md = obj["metadata"]
                md["uid"] = str(uuid.uuid4())
                md["creationTimestamp"] = now_rfc3339()
                md["generation"] = 1
                md["resourceVersion"] = str(STORE.next_rv())
                STORE.table(res)[res.key(ns, name)] = obj
                STORE.record(res, "ADDED", obj)
                return self.reply(201, obj)
            try:
                if ctype == "application/merge-patch+json":
                    new = merge_patch(old, patch)
                elif ctype == "application/json-patch+json":
                    new = json_patch(old, patch)
                else:
                    new = apply_merge(old, patch)
            except (AssertionError, KeyError, IndexError, ValueError, TypeError) as e:
                raise HttpError(422, "Invalid", "the server rejected our request due to an "
                                "error in our request: %s" % e)
            new = self.check_shape(res, ns, new)
            if new["metadata"]["name"] != name:
                raise HttpError(422, "Invalid", "metadata.name cannot change")
            if query.get("dryRun") == "All":
                return self.reply(200, new)
            new = self.replace_locked(res, ns, name, old, new, sub)
        self.reply(200, new)

    def delete(self, res, ns, name):
        with STORE.cond:
            table = STORE.table(res)
            old = table.pop(res.key(ns, name), None)
            if old is None:
                raise self.not_found(res, name)
            old = copy.deepcopy(old)
            old["metadata"]["resourceVersion"] = str(STORE.next_rv())
            STORE.record(res, "DELETED", old)
        self.reply(200, old)

    # -- list --

    def list(self, res, ns, query):
        limit = int(query.get("limit") or 0)
        cont = query.get("continue") or ""
        reqs = parse_selector(query.get("labelSelector"))
        with STORE.cond:
            STORE.bump("lists", res)
            if cont:
                try:
                    tok = json.loads(base64.b64decode(cont))
                    snap, after = int(tok["rv"]), tuple(tok["start"])
                except (ValueError, KeyError, TypeError):
                    raise HttpError(400, "BadRequest", "invalid continue token")
                if snap < STORE.compacted:
                    raise HttpError(410, "Expired",
                                    "The provided continue parameter is too old to display a "
                                    "consistent list result. You can start a new list without "
                                    "the continue parameter.")
                objs = STORE.state_at(res, snap)
            else:
                snap, after = STORE.rv, None
                objs = dict(STORE.table(res))
            items = [copy.deepcopy(objs[k]) for k in sorted(objs)
                     if (ns is None or k[0] == ns) and (after is None or k > after)
                     and selector_matches(reqs, objs[k])]
        md = {"resourceVersion": str(snap)}
        if limit and len(items) > limit:
            last = items[limit - 1]["metadata"]
            token = {"rv": snap, "start": [last.get("namespace", ""), last["name"]]}
            md["continue"] = base64.b64encode(json.dumps(token).encode()).decode()
            md["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        self.reply(200, {"apiVersion": res.api_version, "kind": res.kind + "List",
                         "metadata": md, "items": items})

    # -- watch --

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def event(self, etype, obj):
        self.chunk(json.dumps({"type": etype, "object": obj}).encode() + b"\n")

    def end_chunks(self):
        self.wfile.write(b"0\r\n\r\n")

    def start_stream(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def gone(self, rv):
        with STORE.cond:
            STORE.stats["gone_sent"] += 1
            return status(410, "Expired", "too old resource version: %s (%s)"
                          % (rv, STORE.compacted))

    def watch(self, res, ns, query):
        rv_param = query.get("resourceVersion") or ""
        bookmarks = query.get("allowWatchBookmarks") in TRUE_VALUES
        timeout = float(query.get("timeoutSeconds") or 0)
        reqs = parse_selector(query.get("labelSelector"))
        try:
            rv = int(rv_param) if rv_param not in ("", "0") else None
        except ValueError:
            raise HttpError(400, "BadRequest", "resourceVersion: Invalid value: %r" % rv_param)

        def wanted(obj):
            return (ns is None or obj["metadata"].get("namespace") == ns) and \
                selector_matches(reqs, obj)

        with STORE.cond:
            STORE.bump("watches", res)
            while STORE.paused:
                STORE.cond.wait()
            if rv is not None and rv < STORE.compacted:
                mode = STORE.watch410
                gone = None
            else:
                mode = None
            if rv is None:
                initial = [copy.deepcopy(o) for k, o in sorted(STORE.table(res).items())
                           if wanted(o)]
                last = STORE.rv
            else:
                initial, last = [], rv
            gens = (STORE.drop_gen, STORE.expire_gen, STORE.bookmark_gen)
        if mode == "http":
            gone = self.gone(rv)
            return self.reply(410, gone)
        self.start_stream()
        if mode == "event":
            self.event("ERROR", self.gone(rv))
            self.end_chunks()
            return
        for o in initial:
            self.event("ADDED", o)

        deadline = time.monotonic() + timeout if timeout > 0 else None
        interval = OPTS.bookmark_interval
        next_bookmark = time.monotonic() + interval if interval > 0 else None
        with STORE.cond:
            STORE.stats["active_watches"] += 1
        try:
            while True:
                with STORE.cond:
                    while True:
                        now = time.monotonic()
                        events = [(erv, t, o) for (erv, r, t, o) in STORE.history
                                  if erv > last and r is res]
                        dropped = STORE.drop_gen != gens[0]
                        expired = STORE.expire_gen != gens[1]
                        bookmark_now = STORE.bookmark_gen != gens[2]
                        timed_out = deadline is not None and now >= deadline
                        bookmark_due = next_bookmark is not None and now >= next_bookmark
                        if events or dropped or expired or bookmark_now or timed_out or \
                                bookmark_due:
                            break
                        waits = [t - now for t in (deadline, next_bookmark) if t is not None]
                        STORE.cond.wait(min(waits) if waits else None)
                    last = STORE.rv
                    gens = (STORE.drop_gen, STORE.expire_gen, STORE.bookmark_gen)
                    if dropped:
                        STORE.stats["dropped"] += 1
                if dropped:
                    # Cut the connection with the chunked body unfinished and no TLS
                    # close_notify, as a crashed server or a broken network would.
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                for (erv, etype, obj) in events:
                    if wanted(obj):
                        self.event(etype, obj)
                if expired:
                    self.event("ERROR", self.gone(last))
                    self.end_chunks()
                    return
                if bookmarks and (bookmark_now or bookmark_due):
                    self.event("BOOKMARK", {"kind": res.kind, "apiVersion": res.api_version,
                                            "metadata": {"resourceVersion": str(last)}})
                if bookmark_due:
                    next_bookmark = time.monotonic() + interval
                if timed_out:
                    self.end_chunks()
                    return
        finally:
            with STORE.cond:
                STORE.stats["active_watches"] -= 1


RESOURCE_OBJECTS = {k: Resource(k[0], k[1], k[2], v[0], v[1]) for k, v in RESOURCES.items()}


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global STORE, OPTS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--client-ca")
    ap.add_argument("--token", action="append", default=[])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--bookmark-interval", type=float, default=1.0)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--unserved", action="append", default=[],
                    help="a resource (plural) to answer 404 for, as if its CRD were not installed")
    OPTS = ap.parse_args()
    STORE = Store(OPTS.token)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(OPTS.cert, OPTS.key)
    ctx.set_alpn_protocols(["http/1.1"])
    if OPTS.client_ca:
        ctx.load_verify_locations(OPTS.client_ca)
        ctx.verify_mode = ssl.CERT_OPTIONAL
    server = Server((OPTS.host, OPTS.port), Handler)
    server.socket = ctx.wrap_socket(server.socket, server_side=True,
                                    do_handshake_on_connect=False)
    port = server.server_address[1]

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)

    def watch_stdin():
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        stop()

    threading.Thread(target=watch_stdin, daemon=True).start()
    print("READY %d" % port, flush=True)
    server.serve_forever(poll_interval=0.1)
    server.server_close()


if __name__ == "__main__":
    main()
