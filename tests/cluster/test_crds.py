#!/usr/bin/env python3
"""test_crds.py [TESSERA] - deploy/chart/tessera/files/crds/ against a real kube-apiserver
(tests/cluster/controlplane.py, no Kueue, no scheduler).

Checked: the CRDs apply with `kubectl apply --server-side -f deploy/chart/tessera/files/crds/` (as deploy/chart/tessera/files/crds/README.md
says) with no warning, and each is Established with a structural schema; each kind's status
subresource is there (Setting: none, as upstream); for each kind an object with every field filled
(spec, then status through /status where there is one) round-trips with nothing pruned or changed
(what GET returns holds every field sent); for each kind malformed objects are rejected by the
schema with HTTP 422 and a message naming the field; the printer columns (`kubectl get
instancetypes` prints exactly NAME ENTRANCE UNIT(CPU/RAM)/STORAGE ACCELERATOR(EX/SH/SL/PT) CPU
PHASE and `-o wide` adds PARTITIONS; the KV kinds' columns), the short names and the `gpustack`
category.

With TESSERA, also: the InstanceType and Devices objects `tessera sim` prints for one 8 x H100 node
(GPUs 0-2 in MIG mode, so both populations and the PARTITIONS cell show) are created (spec, then
status) on the real server and must be accepted with no field pruned, a failure listing each
rejected or pruned field; and the real kubectl's `get instancetypes` and `get instancetypes -o wide`
over those objects print byte for byte what the simulator prints for the same cluster.

Prints TAP.
"""
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from controlplane import ApiError, ControlPlane  # noqa: E402
from tap import Tap  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CRDS = os.path.join(ROOT, "deploy", "chart", "tessera", "files", "crds")
W = "worker.gpustack.ai/v1alpha1"
G = "gpustack.ai/v1"
SYSTEM_NS = "gpustack-system"

# kind -> (CRD name, plural, short name, namespace or None, has a status subresource)
KINDS = {
    "InstanceType": ("instancetypes.worker.gpustack.ai", "instancetypes", "instype", None, True),
    "Instance": ("instances.worker.gpustack.ai", "instances", "inst", "default", True),
    "Devices": ("devices.worker.gpustack.ai", "devices", "devs", None, True),
    "KVCacheBackend": ("kvcachebackends.worker.gpustack.ai", "kvcachebackends", "kvcb", None,
                       True),
    "KVCachePool": ("kvcachepools.worker.gpustack.ai", "kvcachepools", "kvcp", None, True),
    "KVCachePoolBinding": ("kvcachepoolbindings.worker.gpustack.ai", "kvcachepoolbindings",
                           "kvcpb", "default", True),
    "Setting": ("settings.gpustack.ai", "settings", "set", SYSTEM_NS, False),
}

T0 = "2025-01-02T03:04:05Z"
COND = {"type": "Ready", "status": "True", "lastTransitionTime": T0, "observedGeneration": 2,
        "reason": "AllGood", "message": "ready"}
USED_BY = [{"kind": "ModelDeployment", "namespace": "default", "name": "qwen"}]
PLACEMENTS = [{"start": 0, "length": 1}]

# ---- valid objects, every field filled ----------------------------------------------------------

INSTANCETYPE = {
    "apiVersion": W, "kind": "InstanceType",
    "metadata": {"name": "gpustack--nvidia-h100-80gb-hbm3-linux-amd64",
                 "labels": {"schedule.gpustack.ai/queue-entrance": "gpustack-fnv64-e4768a65"}},
    "spec": {"displayName": "H100 80GB", "description": "eight H100 per node", "inactive": False,
             "acceleratorGroup": "nvidia-h100-80gb-hbm3", "generalGroup": "generic",
             "acceleratable": True, "os": "linux", "arch": "amd64",
             "unitResources": {"cpu": "12", "ram": "192Gi"}, "localStorage": "100Gi",
             "memory": "80Gi"},
    "status": {
        "phase": "Active", "phaseMessage": "", "entrance": "gpustack-fnv64-e4768a65",
        "detail": {
            "manufacturer": "nvidia", "product": "NVIDIA H100 80GB HBM3", "family": "hopper",
            "physicalCores": "64", "threadsPerPhysicalCore": "2", "logicalCores": "128",
            "stepping": "8", "clockSpeed": "2.0GHz", "maxClockSpeed": "3.8GHz",
            "cacheLine": "64", "cache": {"l1i": "32K", "l1d": "48K", "l2": "2M", "l3": "320M"},
            "memory": "81559Mi", "cores": "16896", "computeCapability": "9.0",
            "runtimeVersion": "12.4", "runtimeVersions": ["12.4", "12.8"],
            "slicedDetail": {
                "logical": {"coresPercentageOvercommit": True, "count": 1024},
                "physical": {"count": 56, "profiles": [
                    {"name": "1g.10gb", "count": 56, "memoryMib": 9856},
                    {"name": "7g.80gb", "count": 8, "memoryMib": 80896}]}},
            "cpu": {"manufacturer": "intel", "product": "Xeon Platinum 8480+",
                    "family": "sapphire-rapids", "physicalCores": "56",
                    "threadsPerPhysicalCore": "2", "logicalCores": "112", "stepping": "8",
                    "clockSpeed": "2.0GHz", "maxClockSpeed": "3.8GHz", "cacheLine": "64",
                    "cache": {"l1i": "32K", "l1d": "48K", "l2": "2M", "l3": "105M"}}},
        "accelerator": {"onceMaxRequest": 8, "remaining": 8, "capacity": 8},
        "acceleratorShared": {"onceMaxRequest": 8, "remaining": 80, "capacity": 80},
        "acceleratorSliced": {"onceMaxRequest": 100, "remaining": 800, "capacity": 800},
        "acceleratorPartitioned": {
            "onceMaxRequest": 1, "remaining": "52", "capacity": "56",
            "allocatedProfiles": [{"name": "1g.10gb", "count": 1}],
            "remainingProfiles": [{"name": "1g.10gb", "count": 6},
                                  {"name": "7g.80gb", "count": 0}]},
        "cpu": {"onceMaxRequest": "0", "remaining": "0", "capacity": "0"},
        "printable": {"unit": "12/192Gi/100Gi", "accelerator": "8/8 8/80 100/800 1/52",
                      "cpu": "0/0", "partitions": "1g.10gb:6 7g.80gb:0"}},
}

INSTANCE = {
    "apiVersion": W, "kind": "Instance",
    "metadata": {"name": "notebook", "namespace": "default"},
    "spec": {
        "type": "gpustack--nvidia-h100-80gb-hbm3-linux-amd64", "displayName": "Notebook",
        "description": "a notebook", "image": "registry.example/jupyter:1",
        "imagePullPolicy": "Always", "imagePullSecret": {"name": "regcred"},
        "command": ["jupyter", "lab"], "privileged": False,
        "ports": [{"port": 8888, "protocol": "TCP", "name": "http"},
                  {"port": 8888, "protocol": "UDP", "name": "quic"}],
        "env": [{"name": "HOME", "value": "/workspace"}],
        "resources": {"cpu": "12", "ram": "192Gi", "localStorage": "100Gi", "accelerator": 1,
                      "acceleratorSlicedMemoryPercentage": 0,
                      "acceleratorSlicedCoresPercentage": 0,
                      "acceleratorPartitionedProfile": "3g.40gb"},
        "volumeMount": "/workspace",
        "volume": {"ephemeral": {"capacity": "100Gi"}, "persistent": {"name": "pv-1"}},
        "sshPublicKey": {"name": "key-1"}, "stop": False, "nodeName": "node-h100",
        "additionalVolumes": [
            {"mountPath": "/data", "readOnly": True, "subPath": "a",
             "persistent": {"name": "pv-2"}},
            {"mountPath": "/etc/app", "configMap": {"name": "cm"}},
            {"mountPath": "/etc/secret", "secret": {"name": "s"}},
            {"mountPath": "/host", "hostPath": {"path": "/mnt", "type": "Directory"}},
            {"mountPath": "/models", "model": {"artifactRef": {"name": "qwen"}}}]},
    "status": {
        "phase": "Running", "phaseMessage": "", "nodeName": "node-h100",
        "accessAddresses": ["10.0.0.7:8888"], "hostIPs": [{"ip": "10.0.0.7"}],
        "podIPs": [{"ip": "10.244.0.9"}],
        "ports": [{"port": 8888, "protocol": "TCP", "name": "http", "nodePort": 30888}],
        "allocations": [{"id": "h100-80gb-hbm3", "manufacturer": "nvidia", "accelerators": [
            {"id": "GPU-1", "index": 0, "mode": 4, "allocated": 100, "remaining": 0,
             "allocatedSlices": 0, "allocatedPhysicalProfile": "3g.40gb",
             "allocatedPhysicalPlacements": [{"start": 4, "length": 4}],
             "allocatedPhysicalID": "MIG-1", "allocatedLogicalPlacements": PLACEMENTS}]}]},
}

LINK = {"state": "ok", "reason": "", "firstSeenTime": T0}
DEVICES = {
    "apiVersion": W, "kind": "Devices", "metadata": {"name": "node-h100"},
    "spec": {
        "groups": [{
            "id": "h100-80gb-hbm3", "manufacturer": "nvidia", "name": "NVIDIA H100 80GB HBM3",
            "memory": 81559, "cores": 16896, "driverVersion": "550.54.15",
            "runtimeVersion": "12.4", "computeCapability": "9.0", "family": "hopper",
            "acceleratorSlicedDetail": {
                "logical": {"coresPercentageOvercommit": True, "count": 128},
                "physical": {"count": 7, "profiles": [
                    {"name": "1g.10gb", "count": 7, "memoryMib": 9856}]}},
            "accelerators": [{
                "id": "GPU-5ab1692e", "index": 0, "physicalIndexes": [0],
                "topology": {"pciBusId": "0000:18:00.0", "pciRootId": "pci0000:17",
                             "pciClass": "0x030200", "numaAffinity": "0", "cpuAffinity": "0-55",
                             "pciSwitches": ["0000:16:00.0"],
                             "roce": {"ip": "10.1.0.2", "subnetMask": "255.255.255.0",
                                      "gateway": "10.1.0.1"},
                             "fabric": {"kind": "nvlink", "id": "f1", "cliqueId": "c1",
                                        "endpoints": ["e1"], "memberCount": 8, "nodeIndex": "0",
                                        "rackId": "r1", "type": "server-8p"}},
                "status": {"unhealthy": False,
                           "logicalSliced": {"coresPercentageOvercommit": True, "count": 128},
                           "physicalSliced": {"count": 7, "profiles": [
                               {"name": "1g.10gb", "memoryMib": 9856, "computeSlices": 1,
                                "memorySlices": 1, "count": 7,
                                "placements": [{"start": 0, "length": 1},
                                               {"start": 1, "length": 1}]}]}}}]}],
        "interfaces": [{
            "name": "eth0", "bus": "pci", "pciBusId": "0000:19:00.0", "pciRootId": "pci0000:17",
            "pciSwitches": ["0000:16:00.0"], "pciVendor": "0x15b3", "pciDevice": "0x101b",
            "numaAffinity": "0", "cpuAffinity": "0-55", "mtu": 9000, "up": True,
            "virtual": False, "rdma": True, "rdmaDevice": "mlx5_0", "sriov": True,
            "virtualFunctions": [{"name": "eth0v0", "pciBusId": "0000:19:00.1",
                                  "numaAffinity": "0", "cpuAffinity": "0-55", "mtu": 9000,
                                  "up": True, "rdma": True, "rdmaDevice": "mlx5_1", "link": LINK}],
            "link": LINK}]},
    "status": {"groups": [{"id": "h100-80gb-hbm3", "manufacturer": "nvidia", "accelerators": [
        {"id": "GPU-5ab1692e", "index": 0, "mode": 3, "allocated": 400000,
         "remaining": 1200000, "allocatedSlices": 32,
         "allocatedProfiles": [{"name": "1g.10gb", "count": 0}],
         "remainingProfiles": [{"name": "1g.10gb", "count": 7}],
         "allocatedPhysicalProfile": "", "allocatedPhysicalPlacements": PLACEMENTS,
         "allocatedPhysicalID": "", "allocatedLogicalPlacements": PLACEMENTS}]}]},
}

KVCB = {
    "apiVersion": W, "kind": "KVCacheBackend", "metadata": {"name": "mooncake"},
    "spec": {
        "type": "Mooncake", "image": "registry.example/mooncake:1",
        "imagePullPolicy": "IfNotPresent", "imagePullSecrets": [{"name": "regcred"}],
        "transport": {"protocol": "RDMA"},
        "connection": {"managed": {
            "leader": {"allocationStrategy": "Random", "extraArgs": ["--v=2"],
                       "extraEnv": [{"name": "A", "value": "1"}], "multiTenancy": True,
                       "replicas": 3,
                       "highAvailability": {"memberAddressing": "Service", "snapshot": {
                           "persistentVolumeClaimName": "snap", "intervalSeconds": 60,
                           "retentionCount": 3}}},
            "members": [{
                "nodeSelector": {"kubernetes.io/hostname": "node-h100"}, "medium": "VRAM",
                "capacityPerMember": "64Gi", "localBufferSize": "1Gi",
                "fabricInterfaceCount": 2, "image": "registry.example/mooncake:1",
                "runtimeClassName": "nvidia", "extraArgs": ["--x"],
                "extraEnv": [{"name": "B", "value": "2"}],
                "hostPaths": [{"path": "/dev/shm", "mountPath": "/dev/shm", "readOnly": False,
                               "type": "Directory"}],
                "localDisks": [{"path": "/mnt/nvme", "capacity": "1Ti", "keyLimit": 100000,
                                "cleanAfterDelete": True, "eviction": {
                                    "enabled": True, "policy": "LRU",
                                    "watermark": {"high": 90, "low": 70}}}],
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "appArmorProfile": {"type": "RuntimeDefault"},
                    "capabilities": {"add": ["IPC_LOCK"], "drop": ["ALL"]},
                    "privileged": False, "procMount": "Default", "readOnlyRootFilesystem": True,
                    "runAsGroup": 1000, "runAsNonRoot": True, "runAsUser": 1000,
                    "seLinuxOptions": {"level": "s0", "role": "r", "type": "t", "user": "u"},
                    "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"},
                    "windowsOptions": {"gmsaCredentialSpec": "x", "gmsaCredentialSpecName": "y",
                                       "hostProcess": False, "runAsUserName": "z"}},
                "transport": {"protocol": "TCP"}}],
            "scaleIn": {"gracePeriodSeconds": 30}}}},
    "status": {
        "phase": "Ready", "phaseMessage": "", "conditions": [dict(COND, type="LeaderAvailable")],
        "capacity": {"total": "64Gi", "used": "1Gi"},
        "endpoints": [{"name": "Client", "address": "10.0.0.7:50051"},
                      {"name": "Admin", "address": "10.0.0.7:9003"}],
        "members": [{"segmentID": "s1", "clientID": "c1", "segmentName": "node-h100",
                     "medium": "VRAM", "nodeName": "node-h100", "protocol": "rdma",
                     "state": "Mounted"}],
        "usedBy": USED_BY},
}

KVCP = {
    "apiVersion": W, "kind": "KVCachePool", "metadata": {"name": "pool-a"},
    "spec": {"backends": ["mooncake"], "quota": {"total": "32Gi"}},
    "status": {"phase": "Ready", "phaseMessage": "", "clientEndpoint": "10.0.0.7:50051",
               "conditions": [COND],
               "domains": [{"name": "qwen", "binding": {"namespace": "default", "name": "b"},
                            "blockSize": 16, "dtype": "bfloat16", "blocks": 1024,
                            "hitRate": "0.25"}],
               "usage": {"total": "1Gi"}, "usedBy": USED_BY},
}

KVCPB = {
    "apiVersion": W, "kind": "KVCachePoolBinding",
    "metadata": {"name": "binding-a", "namespace": "default"},
    "spec": {"poolRef": {"name": "pool-a"},
             "domain": {"name": "qwen", "blockSize": 16, "dtype": "bfloat16"},
             "quota": {"ceiling": "8Gi"}},
    "status": {"phase": "Bound", "phaseMessage": "", "conditions": [COND],
               "requestedQuota": "8Gi", "effectiveQuota": "8Gi", "usage": "512Mi",
               "overQuota": False, "blocks": 4096, "hitRate": "1.0", "usedBy": USED_BY},
}

SETTING = {
    "apiVersion": G, "kind": "Setting",
    "metadata": {"name": "kv-cache-backend-image", "namespace": SYSTEM_NS},
    "spec": {"value": "registry.example/mooncake:2"},
    "status": {"description": "the image of managed KV-cache backends", "editable": True,
               "sensitive": False, "value": "registry.example/mooncake:2"},
}

VALID = {"InstanceType": INSTANCETYPE, "Instance": INSTANCE, "Devices": DEVICES,
         "KVCacheBackend": KVCB, "KVCachePool": KVCP, "KVCachePoolBinding": KVCPB,
         "Setting": SETTING}


# ---- malformed objects ------------------------------------------------------------------------
# (kind, what, written through "spec" (create) or "status" (/status), path set, value (DEL:
# removed), the field the 422's message must name)

def setp(obj, path, value):
    """obj with path ("spec.a[0].b") set to value; a value of DEL removes the key."""
    obj = copy.deepcopy(obj)
    cur = obj
    steps = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    for i, s in enumerate(steps):
        last = i == len(steps) - 1
        key = int(s[1:-1]) if s.startswith("[") else s
        if last:
            if value is DEL:
                del cur[key]
            else:
                cur[key] = value
        else:
            cur = cur[key]
    return obj


DEL = object()
ACC = "spec.groups[0].accelerators[0]"
MEMBER = "spec.connection.managed.members[0]"

MALFORMED = [
    ("InstanceType", "spec.os: 5", "spec", "spec.os", 5, "spec.os"),
    ("InstanceType", "spec.unitResources.cpu a number", "spec", "spec.unitResources.cpu", 12,
     "spec.unitResources.cpu"),
    ("InstanceType", "no spec.localStorage", "spec", "spec.localStorage", DEL,
     "spec.localStorage"),
    ("InstanceType", "spec.memory \"12 cores\"", "spec", "spec.memory", "12 cores",
     "spec.memory"),
    ("InstanceType", "spec.displayName of 65 characters", "spec", "spec.displayName", "x" * 65,
     "spec.displayName"),
    ("InstanceType", "status.accelerator.capacity \"12 cores\"", "status",
     "status.accelerator.capacity", "12 cores", "status.accelerator.capacity"),
    ("InstanceType", "status without phase", "status", "status.phase", DEL, "status.phase"),
    ("InstanceType", "status.printable.unit a number", "status", "status.printable.unit", 1,
     "status.printable.unit"),
    ("Instance", "no spec.type", "spec", "spec.type", DEL, "spec.type"),
    ("Instance", "spec.resources.cpu \"12 cores\"", "spec", "spec.resources.cpu", "12 cores",
     "spec.resources.cpu"),
    ("Instance", "spec.imagePullPolicy Sometimes", "spec", "spec.imagePullPolicy", "Sometimes",
     "spec.imagePullPolicy"),
    ("Instance", "spec.volumeMount relative", "spec", "spec.volumeMount", "workspace",
     "spec.volumeMount"),
    ("Instance", "spec.ports[0].protocol HTTP", "spec", "spec.ports[0].protocol", "HTTP",
     "spec.ports[0].protocol"),
    ("Devices", "an accelerator without index", "spec", ACC + ".index", DEL, ACC + ".index"),
    ("Devices", "an accelerator without topology", "spec", ACC + ".topology", DEL,
     ACC + ".topology"),
    ("Devices", "spec.groups[0].memory \"80GB\"", "spec", "spec.groups[0].memory", "80GB",
     "spec.groups[0].memory"),
    ("Devices", "two accelerators with one id", "spec", "spec.groups[0].accelerators",
     [DEVICES["spec"]["groups"][0]["accelerators"][0]] * 2, "spec.groups[0].accelerators[1]"),
    ("Devices", "ledger allocatedSlices \"two\"", "status",
     "status.groups[0].accelerators[0].allocatedSlices", "two",
     "status.groups[0].accelerators[0].allocatedSlices"),
    ("Devices", "ledger entry without mode", "status", "status.groups[0].accelerators[0].mode",
     DEL, "status.groups[0].accelerators[0].mode"),
    ("KVCacheBackend", "spec.type Redis", "spec", "spec.type", "Redis", "spec.type"),
    ("KVCacheBackend", "spec.transport.protocol HIP (the retired name)", "spec",
     "spec.transport.protocol", "HIP", "spec.transport.protocol"),
    ("KVCacheBackend", "a member on medium SSD", "spec", MEMBER + ".medium", "SSD",
     MEMBER + ".medium"),
    ("KVCacheBackend", "leader replicas 9", "spec", "spec.connection.managed.leader.replicas", 9,
     "spec.connection.managed.leader.replicas"),
    ("KVCacheBackend", "no spec.connection", "spec", "spec.connection", DEL, "spec.connection"),
    ("KVCacheBackend", "capacityPerMember \"12 cores\"", "spec", MEMBER + ".capacityPerMember",
     "12 cores", MEMBER + ".capacityPerMember"),
    ("KVCacheBackend", "status.endpoints[0].name Peer", "status", "status.endpoints[0].name",
     "Peer", "status.endpoints[0].name"),
    ("KVCachePool", "spec.quota.total \"12 cores\"", "spec", "spec.quota.total", "12 cores",
     "spec.quota.total"),
    ("KVCachePool", "no spec.backends", "spec", "spec.backends", DEL, "spec.backends"),
    ("KVCachePool", "status.domains[0].hitRate 1.5", "status", "status.domains[0].hitRate", "1.5",
     "status.domains[0].hitRate"),
    ("KVCachePoolBinding", "spec.domain.dtype of 33 characters", "spec", "spec.domain.dtype",
     "d" * 33, "spec.domain.dtype"),
    ("KVCachePoolBinding", "no spec.quota.ceiling", "spec", "spec.quota.ceiling", DEL,
     "spec.quota.ceiling"),
    ("KVCachePoolBinding", "a condition with status Maybe", "status",
     "status.conditions[0].status", "Maybe", "status.conditions[0].status"),
    ("Setting", "spec.value a number", "spec", "spec.value", 5, "spec.value"),
    ("Setting", "status.editable \"yes\"", "spec", "status.editable", "yes", "status.editable"),
]


# ---- helpers ----------------------------------------------------------------------------------

def missing(sent, got, path=""):
    """The paths of what sent holds that got lacks or holds differently (pruned or changed)."""
    out = []
    if isinstance(sent, dict):
        if not isinstance(got, dict):
            return ["%s: %r became %r" % (path or ".", sent, got)]
        for k, v in sent.items():
            p = "%s.%s" % (path, k) if path else k
            if k not in got:
                out.append("%s: pruned" % p)
            else:
                out.extend(missing(v, got[k], p))
    elif isinstance(sent, list):
        if not isinstance(got, list) or len(got) != len(sent):
            return ["%s: %s became %s" % (path, json.dumps(sent)[:200], json.dumps(got)[:200])]
        for i, (a, b) in enumerate(zip(sent, got)):
            out.extend(missing(a, b, "%s[%d]" % (path, i)))
    elif sent != got or type(sent) is not type(got):
        out.append("%s: %r became %r" % (path, sent, got))
    return out


def path_of(cp, obj):
    return cp.object_path(obj)


def strip_status(obj):
    o = copy.deepcopy(obj)
    o.pop("status", None)
    return o


def put_status(cp, obj):
    """PUT obj's status through /status on top of the stored object."""
    cur = cp.api("GET", path_of(cp, obj))
    body = copy.deepcopy(cur)
    body["status"] = copy.deepcopy(obj["status"])
    return cp.api("PUT", path_of(cp, obj) + "/status", body)


def create_full(cp, kind, obj):
    """Creates obj and writes its status the way that kind takes it; returns what GET returns."""
    has_status = KINDS[kind][4]
    cp.create(strip_status(obj) if has_status else obj)
    if has_status and "status" in obj:
        put_status(cp, obj)
    return cp.api("GET", path_of(cp, obj))


def rejected(cp, fn, field):
    """(ok, detail): fn() raised a 422 ApiError whose message names field."""
    try:
        fn()
    except ApiError as e:
        msg = e.body.get("message", "") if isinstance(e.body, dict) else str(e.body)
        return e.status == 422 and field in msg, "HTTP %d: %s" % (e.status, msg)
    return False, "accepted"


def words(line):
    return line.split()


def table(r):
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    return lines


# ---- checks -----------------------------------------------------------------------------------

def check_crds(t, cp):
    files = sorted(f for f in os.listdir(CRDS) if f.endswith(".yaml"))
    want = sorted("%s_%s.yaml" % (n.split(".", 1)[1], n.split(".", 1)[0])
                  for n, *_ in KINDS.values())
    t.ok(files == want, "deploy/chart/tessera/files/crds/ holds one <group>_<plural>.yaml per kind",
         "have %s\nwant %s" % (files, want))
    r = cp.kubectl("apply", "--server-side", "-f", CRDS + "/")
    t.ok(r.returncode == 0 and "warning" not in r.stderr.lower(),
         "kubectl apply --server-side -f deploy/chart/tessera/files/crds/ applies them with no warning",
         r.stdout + r.stderr)
    r = cp.kubectl("wait", "--for", "condition=Established", "-f", CRDS + "/", "--timeout=60s")
    t.ok(r.returncode == 0 and r.stdout.count("condition met") == len(KINDS),
         "kubectl wait --for condition=Established -f deploy/chart/tessera/files/crds/ (README) returns", r.stdout +
         r.stderr)
    try:
        cp.wait_established([v[0] for v in KINDS.values()])
    except RuntimeError as e:
        t.note(str(e))
    for kind, (name, plural, short, ns, status) in KINDS.items():
        crd = cp.api("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + name)
        conds = {c["type"]: c for c in crd.get("status", {}).get("conditions", [])}
        good = (conds.get("Established", {}).get("status") == "True" and
                conds.get("NamesAccepted", {}).get("status") == "True" and
                conds.get("NonStructuralSchema", {}).get("status") != "True")
        t.ok(good, "%s is Established with a structural schema" % name,
             json.dumps(list(conds.values()), indent=1))
        gv = G if kind == "Setting" else W
        res = {x["name"]: x for x in cp.api("GET", "/apis/" + gv)["resources"]}
        main = res.get(plural, {})
        ok = (main.get("kind") == kind and main.get("namespaced") == (ns is not None) and
              main.get("shortNames") == [short] and main.get("categories") == ["gpustack"] and
              main.get("singularName") == crd["spec"]["names"]["singular"] and
              ((plural + "/status") in res) == status)
        t.ok(ok, "%s: discovery has its scope, short name %s, category gpustack and %s" % (
            kind, short, "a status subresource" if status else "no status subresource"),
            json.dumps(main) + "\nsubresources: %s" % [
                k for k in res if k.startswith(plural + "/")])


def check_round_trips(t, cp):
    for kind, obj in VALID.items():
        try:
            got = create_full(cp, kind, obj)
            diff = missing({k: obj[k] for k in ("spec", "status") if k in obj},
                           {k: got.get(k) for k in ("spec", "status")})
            diff += missing(obj["metadata"].get("labels", {}),
                            got["metadata"].get("labels", {}), "metadata.labels")
            t.ok(not diff, "%s: spec%s round-trip with every field intact" % (
                kind, " + status via /status" if KINDS[kind][4] else " + status"),
                "\n".join(diff))
        except ApiError as e:
            t.ok(False, "%s: spec + status round-trip with every field intact" % kind, str(e))
    # The status subresource isolates: a spec write leaves status alone and vice versa.
    it = cp.api("GET", path_of(cp, INSTANCETYPE))
    it["status"]["phase"] = "Overwritten"
    it["spec"]["displayName"] = "renamed"
    cp.api("PUT", path_of(cp, INSTANCETYPE), it)
    got = cp.api("GET", path_of(cp, INSTANCETYPE))
    t.ok(got["status"]["phase"] == "Active" and got["spec"]["displayName"] == "renamed",
         "InstanceType: a write of the object does not touch status (status subresource)",
         json.dumps({"phase": got["status"]["phase"], "displayName": got["spec"]["displayName"]}))
    # Defaults upstream's schema carries are applied.
    bare = {"apiVersion": W, "kind": "Instance",
            "metadata": {"name": "bare", "namespace": "default"},
            "spec": {"type": "x", "ports": [{"port": 22}]}}
    got = cp.create(bare)["spec"]
    t.ok(got.get("imagePullPolicy") == "IfNotPresent" and got.get("privileged") is False and
         got.get("volumeMount") == "/workspace" and got["ports"][0].get("protocol") == "TCP",
         "Instance: the schema defaults imagePullPolicy, privileged, volumeMount, port protocol",
         json.dumps(got))
    kv = {"apiVersion": W, "kind": "KVCacheBackend", "metadata": {"name": "external"},
          "spec": {"connection": {"external": {"endpoints": [
              {"name": "Client", "address": "10.0.0.8:50051"}]}}}}
    got = cp.create(kv)["spec"]
    t.ok(got.get("type") == "Mooncake" and got.get("transport") == {"protocol": "Auto"},
         "KVCacheBackend: the schema defaults type Mooncake and transport {protocol: Auto}",
         json.dumps(got))


def check_malformed(t, cp):
    for i, (kind, what, where, path, value, field) in enumerate(MALFORMED):
        base = copy.deepcopy(VALID[kind])
        base["metadata"] = dict(base["metadata"], name="bad-%d" % i)
        base["metadata"].pop("labels", None)
        bad = setp(base, path, value)
        if where == "spec":
            body = strip_status(bad) if KINDS[kind][4] else bad

            def fn(body=body):
                return cp.create(body)
        else:
            cp.create(strip_status(base))

            def fn(bad=bad):
                return put_status(cp, bad)
        ok, detail = rejected(cp, fn, field)
        t.ok(ok, "%s: %s is rejected with 422 naming %s" % (kind, what, field), detail)


def check_printing(t, cp):
    want = "NAME  ENTRANCE  UNIT(CPU/RAM)/STORAGE  ACCELERATOR(EX/SH/SL/PT)  CPU  PHASE"
    r = cp.kubectl("get", "instancetypes")
    lines = table(r)
    header = re.sub(r" {2,}", "  ", lines[0].rstrip()) if lines else ""
    t.ok(r.returncode == 0 and header == want,
         "kubectl get instancetypes prints the header %s" % want, r.stdout + r.stderr)
    row = next((ln for ln in lines[1:] if ln.startswith(INSTANCETYPE["metadata"]["name"] + " ")),
               "")
    p = INSTANCETYPE["status"]["printable"]
    cells = re.split(r" {2,}", row.strip())
    t.ok(cells == [INSTANCETYPE["metadata"]["name"], INSTANCETYPE["status"]["entrance"],
                   p["unit"], p["accelerator"], p["cpu"], "Active"],
         "kubectl get instancetypes: the row's cells are entrance, status.printable, phase",
         r.stdout)
    r = cp.kubectl("get", "instancetypes", "-o", "wide")
    lines = table(r)
    header = re.sub(r" {2,}", "  ", lines[0].rstrip()) if lines else ""
    row = next((ln for ln in lines[1:] if ln.startswith(INSTANCETYPE["metadata"]["name"] + " ")),
               "")
    t.ok(r.returncode == 0 and header == want + "  PARTITIONS" and
         row.rstrip().endswith(p["partitions"]),
         "kubectl get instancetypes -o wide adds PARTITIONS", r.stdout + r.stderr)
    r = cp.kubectl("get", "instype")
    t.ok(r.returncode == 0 and table(r) and
         re.sub(r" {2,}", "  ", table(r)[0].rstrip()) == want,
         "kubectl get instype (short name) prints the same table", r.stdout + r.stderr)

    for short, ns, name, cols in [
            ("devs", None, "node-h100", ["NAME", "AGE"]),
            ("inst", "default", "notebook", ["NAME", "AGE"]),
            ("kvcb", None, "mooncake", ["NAME", "TYPE", "PHASE", "ENDPOINT", "CAPACITY", "AGE"]),
            ("kvcp", None, "pool-a", ["NAME", "QUOTA", "USAGE", "PHASE", "ENDPOINT", "AGE"]),
            ("kvcpb", "default", "binding-a", ["NAME", "POOL", "DOMAIN", "BLOCKSIZE", "DTYPE",
                                               "EFFECTIVE", "USAGE", "PHASE", "AGE"]),
            ("set", SYSTEM_NS, "kv-cache-backend-image", ["NAME", "AGE"])]:
        r = cp.kubectl("get", short, *(["-n", ns] if ns else []))
        lines = table(r)
        ok = (r.returncode == 0 and lines and words(lines[0]) == cols and
              any(ln.split()[0] == name for ln in lines[1:]))
        t.ok(ok, "kubectl get %s (short name) lists %s with columns %s" % (
            short, name, " ".join(cols)), r.stdout + r.stderr)
    # Upstream's printer columns read the right fields.
    r = cp.kubectl("get", "kvcb", "mooncake", "--no-headers")
    t.ok(r.returncode == 0 and words(r.stdout)[:4] == ["mooncake", "Mooncake", "Ready",
                                                       "10.0.0.7:50051"] and
         words(r.stdout)[4] == "64Gi",
         "kubectl get kvcb: Type, Phase, the Client endpoint's address, Capacity", r.stdout)
    r = cp.kubectl("get", "kvcpb", "-n", "default", "binding-a", "--no-headers")
    t.ok(r.returncode == 0 and words(r.stdout)[:8] == [
        "binding-a", "pool-a", "qwen", "16", "bfloat16", "8Gi", "512Mi", "Bound"],
        "kubectl get kvcpb: Pool, Domain, BlockSize, Dtype, Effective, Usage, Phase", r.stdout)
    r = cp.kubectl("get", "gpustack", "-A", "-o", "name")
    got = set(r.stdout.split())
    want_names = {"instancetype.worker.gpustack.ai/" + INSTANCETYPE["metadata"]["name"],
                  "instance.worker.gpustack.ai/notebook", "devices.worker.gpustack.ai/node-h100",
                  "kvcachebackend.worker.gpustack.ai/mooncake",
                  "kvcachepool.worker.gpustack.ai/pool-a",
                  "kvcachepoolbinding.worker.gpustack.ai/binding-a",
                  "setting.gpustack.ai/kv-cache-backend-image"}
    t.ok(r.returncode == 0 and want_names <= got,
         "kubectl get gpustack -A (the category) lists every kind",
         "missing: %s\n%s" % (sorted(want_names - got), r.stdout + r.stderr))


SCENARIO = """cluster:
  nodes:
  - name: node-h100
    cpu: 128
    memory: 2Ti
    accelerators:
      model: NVIDIA H100 80GB HBM3
      count: 8
      mig: [0, 1, 2]
steps:
- kubectl get instancetypes -o json
- kubectl get devices node-h100 -o json
- kubectl get instancetypes
- kubectl get instancetypes -o wide
"""


def sim_outputs(tessera):
    """The JSON each step of SCENARIO prints, in order."""
    with tempfile.TemporaryDirectory(prefix="tsr-crds-sim-") as d:
        path = os.path.join(d, "crds.yaml")
        with open(path, "w") as f:
            f.write(SCENARIO)
        r = subprocess.run([tessera, "sim", path], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError("tessera sim exited %d: %s" % (r.returncode, r.stderr))
    blocks = re.split(r"^\$ .*\n", r.stdout, flags=re.M)[1:]
    # Each step's output ends with the blank line the runner prints after it.
    its, devs, table, wide = (b[:-1] if b.endswith("\n\n") else b for b in blocks)
    return json.loads(its), json.loads(devs), table, wide


def warn_call(cp, method, path, body):
    """method path with ?fieldValidation=Warn: (HTTP status, decoded body, the server's warnings,
    which name every unknown field, i.e. every field the schema would prune)."""
    sep = "&" if "?" in path else "?"
    req = urllib.request.Request(cp.url + path + sep + "fieldValidation=Warn", method=method,
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, context=cp.ssl, timeout=30) as r:
            status, text, headers = r.status, r.read().decode(), r.headers
    except urllib.error.HTTPError as e:
        status, text, headers = e.code, e.read().decode(), e.headers
    try:
        decoded = json.loads(text)
    except ValueError:
        decoded = {"message": text}
    warnings = [re.sub(r'^\d+ \S+ "|"$', "", w).replace('\\"', '"')
                for w in headers.get_all("Warning") or []]
    return status, decoded, warnings


def sim_object(cp, kind, obj, label):
    """Problems creating obj (spec, then status through /status) on the real server: each
    rejection's message, each unknown (pruned) field the server warns of, each field GET does not
    return as sent. When the spec is rejected, the status is still checked, on a stand-in object of
    that name with this suite's valid spec."""
    problems = []
    obj = copy.deepcopy(obj)
    meta = obj.get("metadata", {})
    obj["metadata"] = {k: v for k, v in meta.items() if k in ("name", "labels", "annotations")}
    try:
        cp.api("DELETE", path_of(cp, obj))
    except ApiError:
        pass
    code, got, warnings = warn_call(cp, "POST", cp.collection_path(obj), strip_status(obj))
    problems += ["spec: the server warns: %s" % w for w in warnings]
    if code >= 300:
        problems.append("spec: rejected (HTTP %d): %s" % (code, got.get("message")))
        stand_in = dict(strip_status(VALID[kind]), metadata=obj["metadata"])
        cp.create(stand_in)
    else:
        problems += missing(obj.get("spec", {}), got.get("spec", {}), "spec")
    if "status" in obj:
        cur = cp.api("GET", path_of(cp, obj))
        cur["status"] = obj["status"]
        code, got, warnings = warn_call(cp, "PUT", path_of(cp, obj) + "/status", cur)
        problems += ["status: the server warns: %s" % w for w in warnings]
        if code >= 300:
            problems.append("status: rejected (HTTP %d): %s" % (code, got.get("message")))
        else:
            problems += missing(obj["status"], got.get("status", {}), "status")
    return ["%s: %s" % (label, p) for p in problems]


def check_sim(t, cp, tessera):
    if not tessera:
        t.skip("the simulator's InstanceType objects are accepted unpruned", "no TESSERA given")
        t.skip("the simulator's Devices object is accepted unpruned", "no TESSERA given")
        return
    try:
        its, devs, table, wide = sim_outputs(tessera)
    except Exception as e:  # noqa: BLE001 - reported as the two checks' failure
        t.ok(False, "the simulator's InstanceType objects are accepted unpruned", str(e))
        t.ok(False, "the simulator's Devices object is accepted unpruned", str(e))
        return
    names = {it["metadata"]["name"] for it in its.get("items", [])}
    for other in cp.api("GET", "/apis/worker.gpustack.ai/v1alpha1/instancetypes")["items"]:
        if other["metadata"]["name"] not in names:
            cp.api("DELETE", path_of(cp, other))
    # The round-trip objects above hold the same names; sim_object replaces them.
    problems = []
    for it in its.get("items", []):
        problems += sim_object(cp, "InstanceType", it, "InstanceType %s" % it["metadata"]["name"])
    t.ok(its.get("items") and not problems,
         "the simulator's InstanceType objects (%d) are accepted unpruned" % len(
             its.get("items", [])), "\n".join(problems))
    problems = sim_object(cp, "Devices", devs, "Devices %s" % devs["metadata"]["name"])
    t.ok(not problems, "the simulator's Devices object is accepted unpruned", "\n".join(problems))
    for args, sim in ((("get", "instancetypes"), table), (("get", "instancetypes", "-o", "wide"),
                                                            wide)):
        r = cp.kubectl(*args)
        t.ok(r.returncode == 0 and r.stdout == sim,
             "the real `kubectl %s` prints what the simulator prints, byte for byte" % " ".join(args),
             "kubectl:\n%s%s\nsimulator:\n%s" % (r.stdout, r.stderr, sim))


def main():
    tessera = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TSR_TESSERA")
    t = Tap()
    try:
        with ControlPlane("crds", kueue=False, scheduler=False) as cp:
            try:
                check_crds(t, cp)
                check_round_trips(t, cp)
                check_malformed(t, cp)
                check_printing(t, cp)
                check_sim(t, cp, tessera)
            except Exception:  # noqa: BLE001 - one failed check with the traceback
                t.crash("test_crds")
    except Exception:  # noqa: BLE001 - the control plane did not start
        t.crash("the control plane")
    sys.exit(t.done())


if __name__ == "__main__":
    main()
