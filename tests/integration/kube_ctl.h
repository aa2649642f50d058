/*
 * kube_ctl.h - the REST calls a test makes through its control client (a tsr_kube_client on the
 * API server under test, real or fake) to arrange objects: any request with a JSON body, and a
 * JSON merge patch. Both fail the running cmocka test, naming the method, path and error, when
 * the call does not succeed.
 *
 * Ownership: ctl is borrowed; each call returns a new reference to the decoded answer (NULL when
 * the body was empty; json_decref).
 */
#ifndef TSR_TESTS_KUBE_CTL_H
#define TSR_TESTS_KUBE_CTL_H

#include <jansson.h>

struct tsr_kube_client;

/* method path with body (JSON text, NULL for none). */
json_t *kube_ctl_request(struct tsr_kube_client *ctl, const char *method, const char *path,
                         const char *body);

/* Merge-patches the object at path with patch (JSON text). */
json_t *kube_ctl_merge_patch(struct tsr_kube_client *ctl, const char *path, const char *patch);

#endif
