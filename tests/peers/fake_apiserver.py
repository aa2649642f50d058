#!/usr/bin/env python3
"""fake_apiserver.py - a Kubernetes API server for tests, on the standard library only.

The C integration tests of src/kube/ and devicemanager/publish run on the real kube-apiserver of
tests/cluster/controlplane.py (tests/integration/cluster_apiserver.c); they use this fake only
for the faults a real server does not make on demand. Exactly these cases, and why:
  test_kube_client.c test_watch_gone_http: a watch answered with HTTP 410 (watch410 "http")
  test_kube_client.c test_watch_dropped: a watch cut mid-body, without its end (drop)
  test_kube_client.c test_retry_after: a 429 with Retry-After on demand (fail)
  test_kube_cache.c test_bookmarks: BOOKMARKs every 0.2 s that other kinds' writes move (a real
      watch cache sends one a minute, at its own resource's version), then compact + drop
  test_kube_cache.c test_compaction_event: history compacted while watches are held (pause,
      drop, compact): an ERROR 410 event to every watcher
  test_kube_cache.c test_compaction_http: the same, answered with HTTP 410
  test_kube_cache.c test_expire_mid_stream: an ERROR 410 sent to live watches (expire)
  test_kube_cache.c test_stale_until_relisted: the re-list after an ERROR 410 answered 500
      (expire and fail, each with a match)
  test_kube_cache.c test_dropped_watch: every open watch cut (drop)
  test_kube_cache.c test_failures_backoff: injected 500s on the re-watch (fail)
  test_kube_cache.c test_stalled_watch: a watch that sends nothing, bookmarks included (mute),
      and a watch request held unanswered (pause)
  test_kube_cache.c test_not_found_later_keeps_objects: injected 404s after the first list
  test_kube_cache.c test_token_rotation: a token revoked mid-run (token), the watches cut
  test_kube_cache.c test_shutdown_held_and_gone: watch requests held unanswered (pause), then
      the server gone at once
  test_dm_publish.c test_api_errors: injected 500s on the Node and Devices status patches
      (fail), and which patch Content-Types came (a real server counts none)
  tests/integration/controller_faults.py: the real `tessera controller` under lists answered
      500 (fail), watches answered 410, ERROR 410, cut, 500 and 429 with Retry-After (watch410,
      expire, drop, fail), one resource's watch held (pause with a match), 500s on one node's
      Pods (fail with a query), a token revoked (token), and every request it made counted
      and timed (requests)
Every other cluster-facing test runs on the real control plane (tests/cluster/);
check_fake_apiserver.py checks this fake itself against python3-kubernetes.

It serves (spec/kubernetes-contracts.md section 4):
  * the core group /api/v1: Pods (namespaced; /api/v1/pods lists and watches across namespaces,
    /api/v1/namespaces/<ns>/pods one namespace) and Nodes (cluster scoped), each with its status
    subresource, as the node agent (tessera's device manager) talks to them; Namespaces (with
    status; a new one gets phase Active and the kubernetes finalizer) and Events (namespaced);
  * custom resources the way kube-apiserver serves CRDs: worker.gpustack.ai/v1alpha1
    InstanceTypes, KVCachePools, KVCacheBackends and Devices (kind Devices) (cluster scoped) and
    KVCachePoolBindings (namespaced); kueue.x-k8s.io/v1beta2 LocalQueues and Workloads
    (namespaced), ClusterQueues, ResourceFlavors, Topologies and AdmissionChecks (cluster
    scoped); gpustack.ai/v1 Settings (namespaced);
  * coordination.k8s.io/v1 Leases and events.k8s.io/v1 Events (namespaced);
  * discovery: /api (APIVersions), /api/v1 and /apis/<group>/<version> (APIResourceList: each
    served resource and, when it has one, its <plural>/status).
The kinds are rows of one table (RESOURCES), with their status behaviour in three sets
(STATUS_RESET, STATUS_DROPPED_ON_CREATE, NO_STATUS). Any other resource is a 404, as for a CRD
not installed; so is .../status of a kind without that subresource (ResourceFlavors,
Topologies, Leases, Events).

Semantics kept from the real server:
  * one global resourceVersion counter; every create, update, patch and delete is an event in a
    history, and an object carries the resourceVersion of its last change;
  * list returns {kind: XList, apiVersion, metadata: {resourceVersion, continue,
    remainingItemCount}, items}; core (Pod, Node) list items carry no kind or apiVersion, CRD
    items do; limit/continue page through one snapshot (the state at the first page's
    resourceVersion, rebuilt from the history); an expired continue token is HTTP 410 Expired;
  * watch (watch=1|true) streams {"type","object"} lines in HTTP/1.1 chunked encoding from a
    resourceVersion (unset or "0": synthetic ADDED events for the current state first);
    allowWatchBookmarks=true adds BOOKMARK events (kind, apiVersion, metadata.resourceVersion
    only) every --bookmark-interval seconds and on command; timeoutSeconds ends the stream
    cleanly; a resourceVersion older than the compaction point gets 200 and an ERROR event whose
    object is a Status with code 410 (or an HTTP 410, in "http" mode), as the real server does;
  * labelSelector (equality, inequality, existence) and fieldSelector on list and watch; with a
    selector, a watch sends an object that comes to match as ADDED and one that stops matching
    as DELETED (with its new state), as the watch cache does;
  * fieldSelector: "label=value", "label==value", "label!=value", comma-separated (AND), values
    with backslash escapes (of ",", "=", backslash); metadata.name and metadata.namespace on
    every kind; on pods also spec.nodeName, spec.restartPolicy, spec.schedulerName,
    spec.serviceAccountName, spec.hostNetwork, status.phase, status.podIP,
    status.nominatedNodeName; on nodes spec.unschedulable (an absent field reads as its
    server default, e.g. spec.nodeName as "", so "spec.nodeName=" is the unscheduled pods).
    Any other label is 400 BadRequest "field label not supported: <label>"; a term without
    an operator is 400 "invalid selector";
  * POST (create, 409 AlreadyExists; metadata.generateName honoured; metadata.uid (uuid4),
    creationTimestamp, generation 1 and resourceVersion set), PUT (409 Conflict on a stale
    resourceVersion), DELETE (the object goes at once: gracePeriodSeconds, in the query or a
    DeleteOptions body, is accepted and ignored; DeleteOptions.preconditions uid and
    resourceVersion that fail are 409), PATCH as merge-patch (RFC 7386), json-patch (RFC 6902,
    with test), apply (below) and strategic-merge: 415 UnsupportedMediaType for every CRD, and
    for the core kinds
    this subset of apimachinery's strategicpatch: maps merge, null deletes a key,
    {"$patch": "delete"} deletes the map holding it, {"$patch": "replace"} replaces it,
    "$deleteFromPrimitiveList/<k>" works, "$setElementOrder/<k>" and "$retainKeys" are
    ignored; lists merge by key for containers/initContainers/ephemeralContainers/volumes
    (name), their ports (containerPort), env (name), volumeMounts (mountPath),
    status.conditions and status.addresses (type), metadata.ownerReferences (uid), with
    {key, "$patch": "delete"} removing an element; metadata.finalizers take the union; every
    other list and every scalar is replaced. GET /_test/stats counts patches by Content-Type
    (patch_types, last_patch_type);
  * a PATCH body's metadata.resourceVersion and metadata.uid are preconditions: another value
    than the stored object's is 409 Conflict (every patch type, apply included);
  * server-side apply (application/apply-patch+yaml; fieldManager required; JSON bodies only,
    JSON being YAML), faithful enough for what tessera applies: maps merge, lists of maps with
    a name merge by name (Workload status.admissionChecks), other lists (a list-map keyed by
    anything else, such as conditions by type, included) and scalars are replaced; each
    manager owns, per subresource, the fields it applied last (leaves, and list-map elements
    by name), so a field it applied before and leaves out now is removed unless another
    applier owns it or something below it. Simplified: only appliers own fields (writes of other kinds are
    nobody's, so an apply never removes them and never conflicts with them), every apply is
    taken as forced (no 409 for a field another manager owns), and metadata.managedFields is
    not shown. An apply creates a missing object on the main resource; on .../status it is
    404 NotFound, as on the real server;
  * the status subresource: PUT or PATCH on .../status keeps only status; for Pods, Nodes,
    Namespaces, Devices, Workloads and AdmissionChecks a PUT or PATCH on the main resource
    ignores status (and the CRDs among them drop a status sent on create); the older CRDs keep
    what a main-resource write sends;
  * a new Pod gets status.phase "Pending" when it has none (the real server resets the whole
    status on create; this fake keeps a status the test sent, so a Running pod takes one step);
  * Node status.capacity / status.allocatable values (quantity strings, extended resources
    such as "example.com/dongle": "4") are stored as sent: nothing is computed, allocatable
    does not follow capacity (the kubelet does that, not the API server);
  * bearer-token authentication (or a client certificate signed by --client-ca), 401 Status
    otherwise; TLS with the certificate the test made.

Not served: pods/binding, pods/eviction, pods/log and other subresources (namespaces/finalize
among them), graceful deletion (deletionTimestamp: a deleted Namespace goes at once, with its
objects left in place), validation of pod spec immutability, field selectors of Namespaces and
Events, server-side defaulting beyond the fields above.

Known differences the real server showed (tests that need these run there): it validates custom
resources against their CRD's schema and prunes unknown fields (an InstanceType's spec needs
acceleratable, os, arch, unitResources and localStorage; a v1beta2 ClusterQueue's cohort is
spec.cohortName) and refuses duplicate keys of a list-map (two Devices accelerators with one id);
it rewrites quantities to their canonical form ("1280000" reads back "1280k"); it copies
status.capacity into an absent status.allocatable (Node defaulting); a namespaced object needs
its Namespace; deleting a bound Pod without gracePeriodSeconds=0 only marks it
(deletionTimestamp) while no kubelet runs.

Control, for tests only, without authentication, under /_test/ (POST bodies are JSON):
  token {"tokens": [..]}        replace the accepted bearer tokens
  compact                       watches and continue tokens older than now get 410
  drop {"match": ""}            cut every open watch whose path holds match without ending its
                                chunked body
  expire {"match": ""}          send every open watch whose path holds match an ERROR 410
                                event and end it
  bookmark                      send every open watch that allows them a BOOKMARK now
  mute {"muted": bool, "match": ""}
                                open and new watches whose path holds match send nothing (no
                                event, no bookmark; a wedged server or proxy) until unmuted,
                                then what they held back
  pause {"paused": bool, "match": "", "lists": false}
                                hold new watch requests whose path holds match (and lists too
                                with "lists") until unpaused
  watch410 {"mode": "event"|"http"}
  loop_continue {"match": ""}   every list whose path holds match and asks a limit answers its
                                first page with the same continue token, again and again (a
                                server paging in a loop); match null turns it off
  fail {"status": 429, "count": n, "retry_after": s, "match": "substring of the path",
        "query": "substring of the raw query", "method": "GET", "watch": true|false}
                                answer the next n matching requests with status (count -1:
                                until unfail); watch true matches only watches, false only
                                the rest; every field but status optional
  unfail                        forget every fail
  GET stats                     counters: lists, watches, active watches, auth failures, the
                                fails and how often each hit, ...
  GET requests?since=SEQ        every API request after SEQ (the last 50000): seq, t (the
                                fake's monotonic clock), method, path, query, watch, agent
                                (User-Agent), code (the answer's status) and body (a JSON
                                body it read)

Usage: fake_apiserver.py --cert server.crt --key server.key --token TOKEN [--client-ca ca.crt]
       [--port 0] [--bookmark-interval 1.0] [--unserved PLURAL ...]
It prints "READY <port>" on stdout once listening, and exits when stdin reaches end of file
(so it never outlives the test that started it) or on SIGTERM.
"""

import argparse
import base64
import collections
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
    ("worker.gpustack.ai", "v1alpha1", "devices"): ("Devices", False),
    ("", "v1", "pods"): ("Pod", True),
    ("", "v1", "nodes"): ("Node", False),
    # what `tessera controller` reads and writes besides (tests/integration/controller_faults.py)
    ("", "v1", "namespaces"): ("Namespace", False),
    ("", "v1", "events"): ("Event", True),
    ("events.k8s.io", "v1", "events"): ("Event", True),
    ("coordination.k8s.io", "v1", "leases"): ("Lease", True),
    ("kueue.x-k8s.io", "v1beta2", "workloads"): ("Workload", True),
    ("kueue.x-k8s.io", "v1beta2", "resourceflavors"): ("ResourceFlavor", False),
    ("kueue.x-k8s.io", "v1beta2", "topologies"): ("Topology", False),
    ("kueue.x-k8s.io", "v1beta2", "admissionchecks"): ("AdmissionCheck", False),
    ("worker.gpustack.ai", "v1alpha1", "instances"): ("Instance", True),
}

# Kinds whose main resource ignores status on create, update and patch (only .../status changes
# it): the core kinds' registry strategies, and a CRD whose status subresource is enabled. The
# older CRDs above keep their earlier behaviour here (a main-resource write keeps what it sent).
STATUS_RESET = {("", "v1", "pods"), ("", "v1", "nodes"), ("", "v1", "namespaces"),
                ("worker.gpustack.ai", "v1alpha1", "devices"),
                ("kueue.x-k8s.io", "v1beta2", "workloads"),
                ("kueue.x-k8s.io", "v1beta2", "admissionchecks"),
                ("worker.gpustack.ai", "v1alpha1", "instances")}
# CRDs with a status subresource drop a status sent on create (customResourceStrategy).
STATUS_DROPPED_ON_CREATE = {("worker.gpustack.ai", "v1alpha1", "devices"),
                            ("kueue.x-k8s.io", "v1beta2", "workloads"),
                            ("kueue.x-k8s.io", "v1beta2", "admissionchecks"),
                            ("worker.gpustack.ai", "v1alpha1", "instances")}
# Kinds without a status subresource: .../status is a 404 and discovery does not list it (Kueue's
# ResourceFlavor and Topology CRDs enable none; Leases and Events have none).
NO_STATUS = {("", "v1", "events"), ("events.k8s.io", "v1", "events"),
             ("coordination.k8s.io", "v1", "leases"),
             ("kueue.x-k8s.io", "v1beta2", "resourceflavors"),
             ("kueue.x-k8s.io", "v1beta2", "topologies")}

# fieldSelector labels beyond metadata.name and metadata.namespace (which every kind has), from
# kubernetes pkg/registry/core/{pod,node}/strategy.go; a value the server defaults is read with
# that default when the stored object lacks it.
FIELD_LABELS = {
    "pods": {"spec.nodeName": ("spec", "nodeName", ""),
             "spec.restartPolicy": ("spec", "restartPolicy", "Always"),
             "spec.schedulerName": ("spec", "schedulerName", "default-scheduler"),
             "spec.serviceAccountName": ("spec", "serviceAccountName", ""),
             "spec.hostNetwork": ("spec", "hostNetwork", False),
             "status.phase": ("status", "phase", ""),
             "status.podIP": ("status", "podIP", ""),
             "status.nominatedNodeName": ("status", "nominatedNodeName", "")},
    "nodes": {"spec.unschedulable": ("spec", "unschedulable", False)},
}

# Strategic merge patch (core kinds only): lists merged by key, from the patchMergeKey /
# patchStrategy=merge tags of k8s.io/api/core/v1 for the fields a Pod or a Node has. Paths leave
# out list indices. Every other list is replaced whole.
SMP_MERGE_KEYS = {
    ("metadata", "ownerReferences"): "uid",
    ("spec", "containers"): "name",
    ("spec", "initContainers"): "name",
    ("spec", "ephemeralContainers"): "name",
    ("spec", "volumes"): "name",
    ("status", "conditions"): "type",
    ("status", "addresses"): "type",
}
for _c in ("containers", "initContainers", "ephemeralContainers"):
    SMP_MERGE_KEYS[("spec", _c, "ports")] = "containerPort"
    SMP_MERGE_KEYS[("spec", _c, "env")] = "name"
    SMP_MERGE_KEYS[("spec", _c, "volumeMounts")] = "mountPath"
SMP_PRIMITIVE_MERGE = {("metadata", "finalizers")}

TRUE_VALUES = ("1", "t", "T", "true", "TRUE", "True")
LOG_MAX = 50000  # requests kept for GET /_test/requests


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
        self.core = group == ""
        self.api_version = version if self.core else "%s/%s" % (group, version)
        self.qualified = plural if self.core else "%s.%s" % (plural, group)
        self.status_reset = (group, version, plural) in STATUS_RESET
        self.status_dropped_on_create = (group, version, plural) in STATUS_DROPPED_ON_CREATE
        self.has_status = (group, version, plural) not in NO_STATUS
        self.field_labels = FIELD_LABELS.get(plural, {}) if self.core else {}

    def key(self, ns, name):
        return (ns or "", name)


# ---- the store ------------------------------------------------------------------------------

class Store:
    def __init__(self, tokens):
        self.cond = threading.Condition()
        self.rv = 1
        self.compacted = 1
        self.history = []  # (rv, resource, type, object, previous object or None)
        self.objects = {}  # resource -> {(ns, name): object}
        self.tokens = set(tokens)
        self.drop_gen = 0
        self.drop_match = ""
        self.expire_gen = 0
        self.expire_match = ""
        self.bookmark_gen = 0
        self.paused = None  # None, or the path substring of the held requests ("": all)
        self.muted = None  # None, or the path substring of the silent watches ("": all)
        self.pause_lists = False  # whether lists are held too
        self.watch410 = "event"
        self.loop_continue = None
        self.failures = []
        self.owners = {}  # (resource, key) -> {field manager: set of field paths it applied}
        self.log = collections.deque(maxlen=LOG_MAX)  # the API requests, oldest first
        self.seq = 0
        self.stats = {"lists": {}, "watches": {}, "active_watches": 0, "auth_failures": 0,
                      "requests": 0, "connections": 0, "last_token": "", "relists": 0, "gone_sent": 0,
                      "dropped": 0, "patch_types": {}, "last_patch_type": ""}

    def bump(self, what, res):
        d = self.stats[what]
        d[res.plural] = d.get(res.plural, 0) + 1

    def record(self, res, etype, obj, prev=None):
        """Appends an event; the caller holds cond and has set obj's resourceVersion. prev is
        the object before a MODIFIED (what a watch with a selector compares against)."""
        self.history.append((int(obj["metadata"]["resourceVersion"]), res, etype,
                             copy.deepcopy(obj), prev))
        self.cond.notify_all()

    def next_rv(self):
        self.rv += 1
        return self.rv

    def table(self, res):
        return self.objects.setdefault(res, {})

    def state_at(self, res, rv):
        """The objects of res as they were at resourceVersion rv."""
        state = {}
        for (erv, eres, etype, obj, _prev) in self.history:
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


def split_unescaped(text, sep):
    """Splits on sep where it is not escaped by a backslash (fields.ParseSelector's rule)."""
    parts, cur, i = [], "", 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            cur += text[i:i + 2]
            i += 2
            continue
        if c == sep:
            parts.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    parts.append(cur)
    return parts


def unescape_field_value(v):
    out, i = "", 0
    while i < len(v):
        if v[i] == "\\" and i + 1 < len(v) and v[i + 1] in "\\,=":
            out += v[i + 1]
            i += 2
        else:
            out += v[i]
            i += 1
    return out


def parse_field_selector(res, text):
    """[(op, label, value)] for a fieldSelector, or HttpError 400 as the real server answers:
    a term without an operator is "invalid selector", a label the kind does not index is
    "field label not supported: <label>"."""
    reqs = []
    if not text:
        return reqs
    for term in split_unescaped(text, ","):
        if term == "":
            continue
        for op, sym in (("ne", "!="), ("eq", "=="), ("eq", "=")):
            if sym in term:
                label, value = term.split(sym, 1)
                break
        else:
            raise HttpError(400, "BadRequest", "invalid selector: '%s'; can't understand '%s'"
                            % (text, term))
        label = label.strip()
        if label not in ("metadata.name", "metadata.namespace") and \
                label not in res.field_labels:
            raise HttpError(400, "BadRequest", "field label not supported: %s" % label)
        reqs.append((op, label, unescape_field_value(value)))
    return reqs


def field_value(res, obj, label):
    md = obj.get("metadata") or {}
    if label == "metadata.name":
        return md.get("name", "")
    if label == "metadata.namespace":
        return md.get("namespace", "")
    part, field, default = res.field_labels[label]
    v = (obj.get(part) or {}).get(field, default)
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else str(v)


def fields_match(res, reqs, obj):
    for op, label, value in reqs:
        if (field_value(res, obj, label) == value) != (op == "eq"):
            return False
    return True


class _Delete:
    """What a map holding {"$patch": "delete"} becomes in a strategic merge."""


SMP_DELETE = _Delete()


def smp_strip(patch):
    """A patch map's content without directives (a new object built from a patch)."""
    if isinstance(patch, dict):
        return {k: smp_strip(v) for k, v in patch.items()
                if not k.startswith("$") and v is not None}
    if isinstance(patch, list):
        return [smp_strip(e) for e in patch]
    return copy.deepcopy(patch)


def strategic_merge(target, patch, path=()):
    """Strategic merge patch (apimachinery pkg/util/strategicpatch), the subset this fake knows:
    maps merge key by key, a null deletes a key, {"$patch": "delete"} deletes the map holding
    it, {"$patch": "replace"} replaces the map with the rest of the patch map;
    "$deleteFromPrimitiveList/<k>" removes values from a list of scalars; "$setElementOrder/<k>"
    and "$retainKeys" are accepted and ignored. Lists in SMP_MERGE_KEYS merge element by element
    on their key (an element {key, "$patch": "delete"} removes one, an element {"$patch":
    "replace"} makes the list the patch's other elements); SMP_PRIMITIVE_MERGE lists
    (finalizers) take the union; every other list and scalar is replaced."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "delete":
        return SMP_DELETE
    if directive == "replace":
        return smp_strip(patch)
    if directive is not None:
        raise ValueError("unknown patch type: %s in map: %s" % (directive, patch))
    result = dict(target) if isinstance(target, dict) else {}
    deletions = []
    for k, v in patch.items():
        if k.startswith("$setElementOrder/") or k == "$retainKeys":
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            deletions.append((k.split("/", 1)[1], v))
            continue
        if k.startswith("$"):
            raise ValueError("unknown patch directive %s" % k)
        if v is None:
            result.pop(k, None)
            continue
        sub = path + (k,)
        if isinstance(v, list):
            result[k] = strategic_merge_list(result.get(k), v, sub)
            continue
        merged = strategic_merge(result.get(k), v, sub)
        if merged is SMP_DELETE:
            result.pop(k, None)
        else:
            result[k] = merged
    for k, values in deletions:
        if isinstance(result.get(k), list) and isinstance(values, list):
            result[k] = [e for e in result[k] if e not in values]
    return result


def strategic_merge_list(target, patch, path):
    if path in SMP_PRIMITIVE_MERGE:
        result = list(target) if isinstance(target, list) else []
        for e in patch:
            if e not in result:
                result.append(copy.deepcopy(e))
        return result
    key = SMP_MERGE_KEYS.get(path)
    if key is None:
        return smp_strip(patch)
    if any(isinstance(e, dict) and e.get("$patch") == "replace" for e in patch):
        return [smp_strip(e) for e in patch
                if not (isinstance(e, dict) and e.get("$patch") == "replace")]
    result = [copy.deepcopy(e) for e in target] if isinstance(target, list) else []
    for e in patch:
        if not isinstance(e, dict) or key not in e:
            raise ValueError("map: %s does not contain declared merge key: %s" % (e, key))
        idx = next((i for i, t in enumerate(result)
                    if isinstance(t, dict) and t.get(key) == e[key]), None)
        if e.get("$patch") == "delete":
            if idx is not None:
                del result[idx]
            continue
        if idx is None:
            result.append(smp_strip(e))
        else:
            merged = strategic_merge(result[idx], e, path)
            result[idx] = merged
    return result


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


# Fields an apply never owns: the object's identity and the server's bookkeeping.
APPLY_UNOWNED = {("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace"),
                 ("metadata", "uid"), ("metadata", "resourceVersion"),
                 ("metadata", "generation"), ("metadata", "creationTimestamp"),
                 ("metadata", "managedFields")}


def is_list_map(v):
    return isinstance(v, list) and bool(v) and all(isinstance(e, dict) and "name" in e
                                                   for e in v)


def apply_fields(body, path=()):
    """The field set an apply body claims, as structured-merge-diff lists it: every leaf (a
    scalar, an atomic list, an empty map) by its path, and every element of a list of named
    maps as ("k", name) with its own fields below it. Identity and bookkeeping are left out."""
    out = set()
    if isinstance(body, dict) and body:
        for k, v in body.items():
            out |= apply_fields(v, path + (k,))
    elif is_list_map(body):
        for e in body:
            elem = path + (("k", e["name"]),)
            out.add(elem)
            for k, v in e.items():
                out |= apply_fields(v, elem + (k,))
    else:
        out.add(path)
    return {p for p in out if p[:1] not in APPLY_UNOWNED and p[:2] not in APPLY_UNOWNED}


def remove_field(obj, path):
    """Removes the field at path (apply_fields' form) from obj in place, when it is there."""
    cur = obj
    for i, comp in enumerate(path):
        last = i == len(path) - 1
        if isinstance(comp, tuple):
            if not isinstance(cur, list):
                return
            idx = next((j for j, e in enumerate(cur)
                        if isinstance(e, dict) and e.get("name") == comp[1]), None)
            if idx is None:
                return
            if last:
                del cur[idx]
                return
            cur = cur[idx]
        else:
            if not isinstance(cur, dict) or comp not in cur:
                return
            if last:
                del cur[comp]
                return
            cur = cur[comp]


def apply_ownership(owners, manager, new, fields):
    """Server-side apply's field ownership, for appliers only: the fields manager applied
    before and leaves out now are removed from new, unless another applier owns them or
    something below them; manager then owns fields, taken from every other applier (force).
    owners: {(manager, subresource): set of paths} of one object, updated in place."""
    before = owners.get(manager, set())
    others = set()
    for m, f in owners.items():
        if m != manager:
            others |= f
    for p in sorted(before - fields, key=len, reverse=True):
        if not any(o[:len(p)] == p for o in others):
            remove_field(new, p)
    for m in list(owners):
        if m != manager:
            owners[m] = owners[m] - fields
    owners[manager] = fields


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
    logged = {}  # this request's entry of the request log (dispatch sets it)
    body = None  # this request's body, once read

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
            with STORE.cond:
                STORE.stats["connections"] += 1  # TLS connections made
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
        """The request's body, read once (dispatch reads it before anything can fail, so that
        an answer refused early leaves the connection at the next request)."""
        if self.body is None:
            n = int(self.headers.get("Content-Length") or 0)
            self.body = self.rfile.read(n) if n else b""
        return self.body

    def read_json(self):
        data = self.read_body()
        try:
            obj = json.loads(data or b"null")
        except ValueError as e:
            raise HttpError(400, "BadRequest", "the body is not JSON: %s" % e)
        self.logged["body"] = obj
        return obj

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

    def send_response(self, code, message=None):
        self.logged["code"] = code
        super().send_response(code, message)

    def dispatch(self, method):
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        self.logged = {}
        self.body = None
        self.read_body()
        try:
            if url.path.startswith("/_test/"):
                return self.control(method, url.path[len("/_test/"):], query)
            watching = method == "GET" and query.get("watch") in TRUE_VALUES
            with STORE.cond:
                STORE.seq += 1
                self.logged = {"seq": STORE.seq, "t": time.monotonic(), "method": method,
                               "path": url.path, "query": url.query, "watch": watching,
                               "agent": self.headers.get("User-Agent", ""), "code": None}
                STORE.log.append(self.logged)
            self.authenticate()
            self.inject_failure(method, url.path, url.query, watching)
            self.api(method, url.path, query)
        except HttpError as e:
            self.reply_error(e)
        finally:
            self.logged = {}  # an answer outside dispatch (a malformed request) logs nothing

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

    def inject_failure(self, method, path, query, watching):
        with STORE.cond:
            for f in STORE.failures:
                if f["count"] != 0 and f["match"] in path and f["query"] in query and \
                        f["method"] in ("", method) and f["watch"] in (None, watching):
                    if f["count"] > 0:
                        f["count"] -= 1
                    f["hits"] += 1
                    code = int(f.get("status", 500))
                    headers = {}
                    if f.get("retry_after") is not None:
                        headers["Retry-After"] = str(f["retry_after"])
                    reason = {429: "TooManyRequests", 503: "ServiceUnavailable"}.get(
                        code, "InternalError")
                    raise HttpError(code, reason, "injected failure", headers)

    # -- control --

    def control(self, method, what, query):
        body = (self.read_json() or {}) if method == "POST" else {}
        with STORE.cond:
            if what == "stats":
                out = dict(STORE.stats, rv=STORE.rv, compacted=STORE.compacted,
                           tokens=sorted(STORE.tokens),
                           failures=[dict(f) for f in STORE.failures])
                return self.reply(200, out)
            if what == "requests":
                since = int(query.get("since") or 0)
                return self.reply(200, {"seq": STORE.seq, "now": time.monotonic(),
                                        "requests": [dict(e) for e in STORE.log
                                                     if e["seq"] > since]})
            if what == "token":
                STORE.tokens = set(body["tokens"])
            elif what == "compact":
                STORE.compacted = STORE.rv
            elif what == "drop":
                STORE.drop_gen += 1
                STORE.drop_match = body.get("match", "")
            elif what == "expire":
                STORE.expire_gen += 1
                STORE.expire_match = body.get("match", "")
            elif what == "bookmark":
                STORE.bookmark_gen += 1
            elif what == "mute":
                STORE.muted = body.get("match", "") if body.get("muted") else None
            elif what == "pause":
                STORE.paused = body.get("match", "") if body.get("paused") else None
                STORE.pause_lists = bool(body.get("paused") and body.get("lists"))
            elif what == "loop_continue":
                STORE.loop_continue = body.get("match")
            elif what == "watch410":
                if body.get("mode") not in ("event", "http"):
                    raise HttpError(400, "BadRequest", "mode must be event or http")
                STORE.watch410 = body["mode"]
            elif what == "fail":
                STORE.failures.append({"status": body.get("status", 500),
                                       "count": body.get("count", 1),
                                       "retry_after": body.get("retry_after"),
                                       "match": body.get("match", ""),
                                       "query": body.get("query", ""),
                                       "method": body.get("method", ""),
                                       "watch": body.get("watch"), "hits": 0})
            elif what == "unfail":
                STORE.failures = []
            else:
                raise HttpError(404, "NotFound", "no control %r" % what)
            STORE.cond.notify_all()
            self.reply(200, {"rv": STORE.rv, "compacted": STORE.compacted})

    # -- the API --

    def route(self, path):
        """(resource, namespace, name, subresource) for an /api/v1 or /apis/ path, or
        ("discovery", group, version) for /api, /api/v1 and /apis/<group>/<version>."""
        parts = [p for p in path.split("/") if p]
        missing = HttpError(404, "NotFound", "the server could not find the requested resource")
        if parts[:1] == ["api"]:
            group, rest = "", parts[2:]
            version = parts[1] if len(parts) > 1 else None
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise missing
        if not rest:
            return "discovery", group, version
        ns = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            ns, rest = rest[1], rest[2:]
        key = (group, version, rest[0])
        if key not in RESOURCES or key[2] in OPTS.unserved or len(rest) > 3:
            raise missing
        kind, namespaced = RESOURCES[key]
        res = RESOURCE_OBJECTS[key]
        if ns is not None and not namespaced:
            raise missing
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub not in (None, "status") or (sub == "status" and not res.has_status):
            raise missing
        if name is not None and namespaced and ns is None:
            raise missing
        return res, ns, name, sub

    def discovery(self, group, version):
        if group == "" and version is None:
            host = "%s:%d" % self.server.server_address[:2]
            return self.reply(200, {"kind": "APIVersions", "versions": ["v1"],
                                    "serverAddressByClientCIDRs": [
                                        {"clientCIDR": "0.0.0.0/0", "serverAddress": host}]})
        served = [r for k, r in RESOURCE_OBJECTS.items()
                  if k[0] == group and k[1] == version and k[2] not in OPTS.unserved]
        if not served:
            raise HttpError(404, "NotFound", "the server could not find the requested resource")
        resources = []
        for r in served:
            entry = {"name": r.plural, "singularName": r.kind.lower(), "namespaced": r.namespaced,
                     "kind": r.kind, "verbs": ["create", "delete", "deletecollection", "get",
                                               "list", "patch", "update", "watch"]}
            short = {"pods": ["po"], "nodes": ["no"], "namespaces": ["ns"],
                     "events": ["ev"]}.get(r.plural) if r.core else None
            if short:
                entry["shortNames"] = short
            resources.append(entry)
            if r.has_status:
                resources.append({"name": r.plural + "/status", "singularName": "",
                                  "namespaced": r.namespaced, "kind": r.kind,
                                  "verbs": ["get", "patch", "update"]})
        self.reply(200, {"kind": "APIResourceList", "apiVersion": "v1",
                         "groupVersion": version if group == "" else group + "/" + version,
                         "resources": resources})

    def api(self, method, path, query):
        routed = self.route(path)
        if routed[0] == "discovery":
            if method != "GET":
                raise HttpError(405, "MethodNotAllowed", "method %s not allowed" % method)
            return self.discovery(routed[1], routed[2])
        res, ns, name, sub = routed
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
            return self.delete(res, ns, name, query)
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
            raise HttpError(422, "Invalid", "%s \"\" is invalid: metadata.name: Required value"
                            % (res.kind if res.core else "%s.%s" % (res.kind, res.group)))
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
        if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict) and \
                not obj["metadata"].get("name") and obj["metadata"].get("generateName"):
            obj["metadata"]["name"] = obj["metadata"]["generateName"] + \
                uuid.uuid4().hex[:5]
        obj = self.check_shape(res, ns, obj)
        md = obj["metadata"]
        if res.status_dropped_on_create:
            obj.pop("status", None)
        if res.core and res.plural == "pods":
            # The real server resets a new pod's status to {phase: Pending}; this fake keeps
            # a status the test sent (to create a Running pod in one step) and only fills in
            # the phase when it is absent.
            st = obj.get("status")
            if not isinstance(st, dict):
                st = obj["status"] = {}
            st.setdefault("phase", "Pending")
        if res.core and res.plural == "namespaces":
            # namespaceStrategy.PrepareForCreate: phase Active, the kubernetes finalizer.
            obj["status"] = {"phase": "Active"}
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
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
        prev = copy.deepcopy(old)
        if sub is None and res.status_reset:
            new = dict(new)
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
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
        STORE.record(res, "MODIFIED", new, prev)
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
        with STORE.cond:
            types = STORE.stats["patch_types"]
            types[ctype] = types.get(ctype, 0) + 1
            STORE.stats["last_patch_type"] = ctype
        if ctype == "application/strategic-merge-patch+json" and not res.core:
            raise HttpError(415, "UnsupportedMediaType",
                            "the body of the request was in an unknown format - accepted media "
                            "types include: application/json-patch+json, "
                            "application/merge-patch+json, application/apply-patch+yaml")
        if ctype not in ("application/merge-patch+json", "application/json-patch+json",
                         "application/apply-patch+yaml",
                         "application/strategic-merge-patch+json"):
            raise HttpError(415, "UnsupportedMediaType", "unsupported patch type %r" % ctype)
        if ctype == "application/apply-patch+yaml" and not query.get("fieldManager"):
            raise HttpError(422, "Invalid", 'PatchOptions.meta.k8s.io "" is invalid: '
                            'fieldManager: Required value: is required for apply patch')
        try:
            patch = json.loads(body or b"null")
        except ValueError:
            raise HttpError(400, "BadRequest", "the patch body is not JSON (this fake reads "
                            "apply bodies as JSON only)")
        self.logged["body"] = patch
        apply = ctype == "application/apply-patch+yaml"
        manager = (query.get("fieldManager"), sub or "")
        fields = set()
        if apply:
            # What this apply claims: status alone on .../status; all but status on the main
            # resource of a kind whose status is a subresource.
            fields = {f for f in apply_fields(patch)
                      if (f[0] == "status") == (sub == "status") or
                      (sub is None and not res.status_reset)}
        with STORE.cond:
            old = STORE.table(res).get(res.key(ns, name))
            if old is None and (not apply or sub == "status"):
                raise self.not_found(res, name)
            if isinstance(patch, dict) and old is not None:
                md = patch.get("metadata") or {}
                if md.get("uid") and md["uid"] != old["metadata"]["uid"]:
                    raise HttpError(409, "Conflict", "Precondition failed: UID in precondition: "
                                    "%s, UID in object meta: %s"
                                    % (md["uid"], old["metadata"]["uid"]))
                rv = md.get("resourceVersion")
                if rv and rv != old["metadata"]["resourceVersion"]:
                    raise self.conflict(res, name)
            if old is None:
                obj = self.check_shape(res, ns, copy.deepcopy(patch))
                if obj["metadata"]["name"] != name:
                    raise HttpError(400, "BadRequest", "the name of the object does not match")
                if res.status_dropped_on_create:
                    obj.pop("status", None)
                md = obj["metadata"]
                md["uid"] = str(uuid.uuid4())
                md["creationTimestamp"] = now_rfc3339()
                md["generation"] = 1
                md["resourceVersion"] = str(STORE.next_rv())
                STORE.table(res)[res.key(ns, name)] = obj
                STORE.owners[(res, res.key(ns, name))] = {manager: fields}
                STORE.record(res, "ADDED", obj)
                return self.reply(201, obj)
            try:
                if ctype == "application/merge-patch+json":
                    new = merge_patch(copy.deepcopy(old), patch)
                elif ctype == "application/json-patch+json":
                    new = json_patch(old, patch)
                elif ctype == "application/strategic-merge-patch+json":
                    if not isinstance(patch, dict):
                        raise ValueError("a strategic merge patch must be a JSON object")
                    new = strategic_merge(copy.deepcopy(old), patch)
                    if new is SMP_DELETE:
                        raise ValueError("$patch: delete of the whole object")
                else:
                    new = apply_merge(copy.deepcopy(old), patch)
            except (AssertionError, KeyError, IndexError, ValueError, TypeError) as e:
                raise HttpError(422, "Invalid", "the server rejected our request due to an "
                                "error in our request: %s" % e)
            new = self.check_shape(res, ns, new)
            if new["metadata"]["name"] != name:
                raise HttpError(422, "Invalid", "metadata.name cannot change")
            if query.get("dryRun") == "All":
                return self.reply(200, new)
            if apply:
                apply_ownership(STORE.owners.setdefault((res, res.key(ns, name)), {}), manager,
                                new, fields)
            new = self.replace_locked(res, ns, name, old, new, sub)
        self.reply(200, new)

    def delete(self, res, ns, name, query):
        """Removes the object at once (no graceful deletion: gracePeriodSeconds, in the query
        or in a DeleteOptions body, is accepted and ignored); DeleteOptions.preconditions (uid,
        resourceVersion) that do not hold are 409 Conflict, as on the real server."""
        opts = self.read_json() or {}
        if not isinstance(opts, dict):
            raise HttpError(400, "BadRequest", "the body must be a DeleteOptions object")
        for g in (query.get("gracePeriodSeconds"), opts.get("gracePeriodSeconds")):
            if g is not None:
                try:
                    int(g)
                except (TypeError, ValueError):
                    raise HttpError(400, "BadRequest", "gracePeriodSeconds: Invalid value: %r"
                                    % g)
        pre = opts.get("preconditions") or {}
        with STORE.cond:
            table = STORE.table(res)
            old = table.get(res.key(ns, name))
            if old is None:
                raise self.not_found(res, name)
            if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
                raise HttpError(409, "Conflict", "Precondition failed: UID in precondition: %s, "
                                "UID in object meta: %s" % (pre["uid"], old["metadata"]["uid"]))
            if pre.get("resourceVersion") and \
                    pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise HttpError(409, "Conflict", "Precondition failed: ResourceVersion in "
                                "precondition: %s, ResourceVersion in object meta: %s"
                                % (pre["resourceVersion"], old["metadata"]["resourceVersion"]))
            table.pop(res.key(ns, name))
            STORE.owners.pop((res, res.key(ns, name)), None)
            old = copy.deepcopy(old)
            old["metadata"]["resourceVersion"] = str(STORE.next_rv())
            STORE.record(res, "DELETED", old)
        self.reply(200, old)

    # -- list --

    def held(self):
        """Whether a pause holds this request now (the caller holds cond)."""
        return STORE.paused is not None and STORE.paused in self.path

    def list(self, res, ns, query):
        limit = int(query.get("limit") or 0)
        cont = query.get("continue") or ""
        reqs = parse_selector(query.get("labelSelector"))
        freqs = parse_field_selector(res, query.get("fieldSelector"))
        with STORE.cond:
            STORE.bump("lists", res)
            while STORE.pause_lists and self.held():
                STORE.cond.wait()
            looping = STORE.loop_continue is not None and STORE.loop_continue in self.path
            if cont and looping:
                cont = ""  # the first page again, under the same token
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
                     and selector_matches(reqs, objs[k]) and fields_match(res, freqs, objs[k])]
        md = {"resourceVersion": str(snap)}
        if limit and looping:
            md["continue"] = base64.b64encode(b'{"loop": true}').decode()
            items = items[:limit]
        elif limit and len(items) > limit:
            last = items[limit - 1]["metadata"]
            token = {"rv": snap, "start": [last.get("namespace", ""), last["name"]]}
            md["continue"] = base64.b64encode(json.dumps(token).encode()).decode()
            md["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        if res.core:
            # Built-in list items carry no kind or apiVersion (the list does).
            for i in items:
                i.pop("kind", None)
                i.pop("apiVersion", None)
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
        freqs = parse_field_selector(res, query.get("fieldSelector"))
        try:
            rv = int(rv_param) if rv_param not in ("", "0") else None
        except ValueError:
            raise HttpError(400, "BadRequest", "resourceVersion: Invalid value: %r" % rv_param)

        def wanted(obj):
            return (ns is None or obj["metadata"].get("namespace") == ns) and \
                selector_matches(reqs, obj) and fields_match(res, freqs, obj)

        def seen_as(etype, obj, prev):
            """The event a watcher with selectors gets, as the watch cache sends it: an object
            that comes to match is ADDED, one that stops matching is DELETED (with its new
            state), one that matched neither before nor after is not sent."""
            now_ok = wanted(obj)
            if etype != "MODIFIED" or prev is None:
                return etype if now_ok else None
            was_ok = wanted(prev)
            if now_ok:
                return "MODIFIED" if was_ok else "ADDED"
            return "DELETED" if was_ok else None

        with STORE.cond:
            STORE.bump("watches", res)
            while self.held():
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
                        muted = STORE.muted is not None and STORE.muted in self.path
                        events = [(erv, t, o, p) for (erv, r, t, o, p) in STORE.history
                                  if erv > last and r is res and not muted]
                        dropped = STORE.drop_gen != gens[0] and STORE.drop_match in self.path
                        expired = STORE.expire_gen != gens[1] and \
                            STORE.expire_match in self.path
                        bookmark_now = STORE.bookmark_gen != gens[2]
                        timed_out = deadline is not None and now >= deadline
                        bookmark_due = next_bookmark is not None and now >= next_bookmark
                        if muted:
                            bookmark_now = bookmark_due = False
                            if next_bookmark is not None and now >= next_bookmark:
                                next_bookmark = now + interval
                        if events or dropped or expired or bookmark_now or timed_out or \
                                bookmark_due:
                            break
                        waits = [t - now for t in (deadline, next_bookmark) if t is not None]
                        STORE.cond.wait(min(waits) if waits else None)
                    if not muted:
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
                for (erv, etype, obj, prev) in events:
                    etype = seen_as(etype, obj, prev)
                    if etype:
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
