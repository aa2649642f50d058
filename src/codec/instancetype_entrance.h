/*
 * instancetype_entrance.h - which InstanceType fronts a LocalQueue: the one labelled
 * schedule.gpustack.ai/queue-entrance=<the LocalQueue's name> (TSR_INSTANCETYPE_ENTRANCE). The
 * one scan behind the watch cache's lookups (kube/cache.h) and the fixtures that stand in for it
 * (the webhook bench, the admission fuzz target); a caller refuses anything but exactly one.
 *
 * Ownership: the object returned is borrowed from by_name. Pure; thread-safe on maps no one
 * writes meanwhile.
 */
#ifndef TSR_CODEC_INSTANCETYPE_ENTRANCE_H
#define TSR_CODEC_INSTANCETYPE_ENTRANCE_H

#include <jansson.h>
#include <stddef.h>

/*
 * The first InstanceType of by_name (an object of InstanceType objects) whose entrance label is
 * lq, or NULL; *n receives how many carry it (0 when lq is NULL).
 */
json_t *tsr_instancetype_entrance_scan(json_t *by_name, const char *lq, size_t *n);

#endif
