"""names.py - the upstream names the suites use: the NVIDIA device-plugin resource of each family
and the allocation annotation (spec/upstream-behavior.md §1, §8), and the one they compute the way
the operator does (§9): the entrance LocalQueue of a ClusterQueue,
`gpustack-fnv64-<FNV-1a-64 of the ClusterQueue name, 16 hex digits>`."""

NVIDIA_RESOURCES = {
    "exclusive": "nvidia.com/gpu",
    "shared": "nvidia.com/gpu.shared",
    "sliced": "nvidia.com/gpu.sliced",
    "partitioned": "nvidia.com/gpu.partitioned",
    "visibility": "device.gpustack.ai/nvidia.visibility",
}
ALLOC_ANNOTATION = "device.gpustack.ai/accelerator.allocated"


def fnv1a64(text):
    """FNV-1a-64 of text's UTF-8 bytes, as 16 lower-case hex digits."""
    h = 0xcbf29ce484222325
    for b in text.encode():
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def entrance(cluster_queue):
    """The LocalQueue name fronting cluster_queue (and its InstanceType's queue-entrance label)."""
    return "gpustack-fnv64-" + fnv1a64(cluster_queue)
