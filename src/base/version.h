/*
 * version.h - what this build of tessera is: the release (meson's project version, also the Helm
 * chart's appVersion and the image's tag) and the source revision it was built from (the git
 * commit, "unknown" when built outside a checkout). Both are fixed at build time.
 * tsr_build_info_render writes the Prometheus gauge every tessera process exposes on /metrics:
 *   tessera_build_info{component,version,revision} 1
 */
#ifndef TSR_BASE_VERSION_H
#define TSR_BASE_VERSION_H

struct tsr_buf;

/* The release, e.g. "0.1.0". */
const char *tsr_version(void);

/* The source revision, a git commit id or "unknown". */
const char *tsr_revision(void);

/* Appends the tessera_build_info gauge (HELP, TYPE and one sample) for component ("webhook",
 * "controller", "device-manager"). Returns 0 or a buffer error. */
int tsr_build_info_render(const char *component, struct tsr_buf *out);

#endif
