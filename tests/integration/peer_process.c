/*
 * peer_process.c - a test peer with piped stdin and stdout (peer_process.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "peer_process.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

void peer_spawn(const char *const *argv, pid_t *pid, int *stdin_fd, int *stdout_fd)
{
        posix_spawn_file_actions_t fa;
        char *copy[64];
        int in[2], out[2], n = 0;

        while (argv[n] && n < 63) {
                copy[n] = strdup(argv[n]);
                n++;
        }
        copy[n] = NULL;
        if (pipe(in) || pipe(out))
                fail_msg("pipe: %s", strerror(errno));
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, in[0], 0);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_addclose(&fa, in[1]);
        posix_spawn_file_actions_addclose(&fa, out[0]);
        if (posix_spawn(pid, copy[0], &fa, NULL, copy, environ))
                fail_msg("cannot start %s", copy[0]);
        posix_spawn_file_actions_destroy(&fa);
        for (int i = 0; i < n; i++)
                free(copy[i]);
        close(in[0]);
        close(out[1]);
        fcntl(in[1], F_SETFD, FD_CLOEXEC);
        fcntl(out[0], F_SETFD, FD_CLOEXEC);
        *stdin_fd = in[1];
        *stdout_fd = out[0];
}
