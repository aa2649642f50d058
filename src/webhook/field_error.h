/*
 * field_error.h - apimachinery's field errors and the StatusError text a webhook denial carries,
 * spelled the way a Go admission webhook's caller sees them.
 *
 * One error reads "<path>: <type>: <detail>" (k8s.io/apimachinery/pkg/util/validation/field):
 *   Required   spec.os: Required value: must be specified
 *   Invalid    spec.unitResources.cpu: Invalid value: "2": must be 1 when acceleratable is false
 *              (a string value is quoted as Go's %q quotes it; a number is printed bare)
 *   Forbidden  spec: Forbidden: is immutable except displayName and inactive
 *   NotFound   spec.type: Not found: "gpustack--generic-linux-amd64"
 * A list denied as kerrors.NewInvalid reads
 *   <Kind>.<group> "<name>" is invalid: <one error>        or  ... is invalid: [<e1>, <e2>]
 * with code 422 and reason "Invalid"; a single field error returned bare is denied 403 Forbidden
 * with the error's own text (controller-runtime's admission.Denied).
 *
 * Ownership: a struct tsr_field_list is a plain value (usually on the stack); nothing allocates.
 * Errors past TSR_FIELD_LIST_MAX are dropped and counted in n_dropped, a message past
 * TSR_FIELD_LIST_LEN is truncated. Pure; safe from any thread.
 */
#ifndef TSR_WEBHOOK_FIELD_ERROR_H
#define TSR_WEBHOOK_FIELD_ERROR_H

#include <stddef.h>
#include <stdint.h>

struct tsr_verdict;

#define TSR_FIELD_LIST_MAX 16
#define TSR_FIELD_LIST_LEN 512

struct tsr_field_list {
        size_t n;
        size_t n_dropped;
        char item[TSR_FIELD_LIST_MAX][TSR_FIELD_LIST_LEN];
};

/* Empties l. */
void tsr_field_list_clear(struct tsr_field_list *l);

/* Appends "<path>: Required value: <detail>" ("<path>: Required value" when detail is empty). */
void tsr_field_required(struct tsr_field_list *l, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Appends "<path>: Forbidden: <detail>". */
void tsr_field_forbidden(struct tsr_field_list *l, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Appends "<path>: Invalid value: <%q of value>: <detail>". */
void tsr_field_invalid_str(struct tsr_field_list *l, const char *path, const char *value,
                           const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Appends "<path>: Invalid value: <value>: <detail>" (a number, unquoted). */
void tsr_field_invalid_int(struct tsr_field_list *l, const char *path, int64_t value,
                           const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Appends "<path>: Not found: <%q of value>". */
void tsr_field_not_found(struct tsr_field_list *l, const char *path, const char *value);

/*
 * Denies v with 422 "Invalid" and "<kind> \"<name>\" is invalid: ..." over the errors of l (which
 * must hold at least one). kind is the qualified kind, "InstanceType.worker.gpustack.ai".
 */
void tsr_field_list_deny_invalid(struct tsr_verdict *v, const char *kind, const char *name,
                                 const struct tsr_field_list *l);

/*
 * Writes s quoted as Go's %q writes a string (backslash escapes for '"', '\\' and control bytes)
 * into out (len bytes, truncated, always NUL-terminated) and returns out.
 */
char *tsr_go_quote(const char *s, char *out, size_t len);

#endif
