/*
 * version.c - the release and revision of this build (version.h). The revision comes from
 * revision.c, which meson's vcs_tag writes from revision.c.in on every build.
 */
#include "base/version.h"

#include "base/buf.h"

extern const char tsr_build_revision[];

const char *tsr_version(void)
{
        return TSR_BUILD_VERSION;
}

const char *tsr_revision(void)
{
        return tsr_build_revision[0] ? tsr_build_revision : "unknown";
}

int tsr_build_info_render(const char *component, struct tsr_buf *out)
{
        return tsr_buf_addf(
            out,
            "# HELP tessera_build_info The tessera build this process runs.\n"
            "# TYPE tessera_build_info gauge\n"
            "tessera_build_info{component=\"%s\",version=\"%s\",revision=\"%s\"} 1\n",
            component, tsr_version(), tsr_revision());
}
