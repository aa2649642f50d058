/*
 * isolation.h - a logical slice's runtime isolation: the interposer library (libtessera-vgpu.so,
 * src/vgpu/) installed on the host when the device manager starts, and injected into every
 * container Allocate grants a logical slice, with the environment that caps it (the contract of
 * src/vgpu/config.h, HAMi-core's).
 *
 * Modes (--slice-isolation):
 *   preload  the library and a one-line ld.so.preload naming it are bind-mounted read-only into the
 *            container, the latter at /etc/ld.so.preload: the dynamic loader maps the library into
 *            every process, and nothing in the container's own environment can unset it;
 *   env      the library is mounted and LD_PRELOAD names it (a process that clears its
 *            environment escapes the caps: for images whose /etc cannot take the mount);
 *   off      nothing is injected and nothing installed: a slice is accounting only.
 * Only a logical slice gets any of it: whole GPUs, shares and MIG partitions never do.
 *
 * Install (tsr_dm_isolation_install): the library is copied into the install directory (a host
 * directory the device manager mounts) as libtessera-vgpu.so, and ld.so.preload is written beside
 * it holding the library's container path. Each file is rewritten only when its content differs,
 * and then atomically (a temporary file in the same directory, written, fsynced, renamed over the
 * old one, the directory fsynced): a container starting meanwhile mounts the old file or the new
 * one, never half of one, and a running container keeps the inode it mounted.
 *
 * Inject (tsr_dm_isolation_inject): the mounts name the files by the install directory as the
 * host (the kubelet, the container runtime) sees it, which may differ from the device manager's
 * own view of it. The environment: CUDA_DEVICE_MEMORY_LIMIT, the slice's memory in MiB ("24576m");
 * CUDA_DEVICE_SM_LIMIT, its share of the cores in percent; CUDA_DEVICE_MEMORY_SHARED_CACHE, the
 * budget file the container's processes share, named by the Pod's UID and the container's name so
 * that no two containers' files meet even where they share a volume; and in env mode LD_PRELOAD.
 * Pure but for install's file system work; no state, thread-safe.
 */
#ifndef TSR_DEVICEMANAGER_ISOLATION_H
#define TSR_DEVICEMANAGER_ISOLATION_H

#include <stdbool.h>
#include <stddef.h>

#include "base/diag.h"
#include "devicemanager/agent.h"

enum tsr_dm_isolation_mode {
        TSR_DM_ISOLATION_PRELOAD,
        TSR_DM_ISOLATION_ENV,
        TSR_DM_ISOLATION_OFF,
};

/* Where the image carries the library (--vgpu-library's default). */
#define TSR_DM_VGPU_LIBRARY "/usr/lib/tessera/libtessera-vgpu.so"
/* The install directory (--vgpu-dir's default; the chart's hostPath). */
#define TSR_DM_VGPU_DIR "/usr/local/tessera/vgpu"
/* The file names in the install directory. */
#define TSR_DM_VGPU_LIBRARY_NAME "libtessera-vgpu.so"
#define TSR_DM_VGPU_PRELOAD_NAME "ld.so.preload"
/* Where a container sees the library, and the preload list. */
#define TSR_DM_VGPU_CONTAINER_LIBRARY "/usr/local/tessera/vgpu/libtessera-vgpu.so"
#define TSR_DM_VGPU_CONTAINER_PRELOAD "/etc/ld.so.preload"
/* The shared budget file: this prefix, "<Pod UID>-<container>", ".cache". */
#define TSR_DM_VGPU_CACHE_PREFIX "/tmp/tessera-vgpu-"

#define TSR_DM_ISOLATION_PATH_MAX   4096
#define TSR_DM_INJECT_ENVS_MAX      4
#define TSR_DM_INJECT_MOUNTS_MAX    2
#define TSR_DM_INJECT_ENV_VALUE_MAX 256

struct tsr_dm_isolation {
        enum tsr_dm_isolation_mode mode;
        char host_dir[TSR_DM_ISOLATION_PATH_MAX]; /* the install directory as the host sees it */
};

struct tsr_dm_env {
        char key[40];
        char value[TSR_DM_INJECT_ENV_VALUE_MAX];
};

struct tsr_dm_mount {
        char container_path[64];
        char host_path[TSR_DM_ISOLATION_PATH_MAX + 32];
};

/* What one container gets beside NVIDIA_VISIBLE_DEVICES; every mount is read-only. */
struct tsr_dm_injection {
        size_t n_envs, n_mounts;
        struct tsr_dm_env envs[TSR_DM_INJECT_ENVS_MAX];
        struct tsr_dm_mount mounts[TSR_DM_INJECT_MOUNTS_MAX];
};

/* Reads "preload", "env" or "off" into *out. Returns 0, or TSR_EINVAL. */
int tsr_dm_isolation_parse_mode(const char *s, enum tsr_dm_isolation_mode *out);

/* The mode's name ("preload", "env", "off"). */
const char *tsr_dm_isolation_mode_name(enum tsr_dm_isolation_mode mode);

/*
 * Installs library (a file) into dir (created when missing, its parent must exist) as
 * TSR_DM_VGPU_LIBRARY_NAME, and TSR_DM_VGPU_PRELOAD_NAME beside it, each only when its content
 * differs (see the file comment). *written counts the files rewritten (0, 1 or 2). Returns 0, or
 * an error with diag naming the path and the cause (a library that is missing, unreadable or
 * empty: TSR_ENOTFOUND / TSR_EIO / TSR_EINVAL); a failed write leaves the old file in place and
 * no temporary file behind.
 */
int tsr_dm_isolation_install(const char *library, const char *dir, unsigned *written,
                             struct tsr_diag *diag);

/*
 * What a container granted ans (an OK answer) gets under iso (NULL: off) into *out: nothing unless
 * ans->slice.granted and the mode is not off. Never fails (values too long are truncated; a UID
 * and a container name always fit).
 */
void tsr_dm_isolation_inject(const struct tsr_dm_isolation *iso, const struct tsr_dm_answer *ans,
                             struct tsr_dm_injection *out);

#endif
