/*
 * object_revision.h - a Kubernetes object's revision as one string, "uid/resourceVersion": what
 * changes whenever the object does (any write moves resourceVersion; a deleted and recreated
 * object has a new uid). The one formatting shared by the watch cache's revision lookups
 * (kube/cache.h) and the readers that keep what they derived from an object until its revision
 * moves (webhook/pod.c).
 *
 * Pure; thread-safe on objects no one writes meanwhile.
 */
#ifndef TSR_CODEC_OBJECT_REVISION_H
#define TSR_CODEC_OBJECT_REVISION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * Writes obj's "uid/resourceVersion" into out (len bytes). False, out unspecified, when obj is
 * NULL, either field is missing or empty, or the string does not fit.
 */
bool tsr_object_revision(json_t *obj, char *out, size_t len);

#endif
