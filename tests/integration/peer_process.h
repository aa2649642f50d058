/*
 * peer_process.h - a test peer started as a process with both ends of its standard streams in
 * the test's hands: its stdin (closing it asks the peer to stop) and its stdout (where it prints
 * that it is ready). stderr is inherited. Used by fake_apiserver.c and cluster_apiserver.c.
 *
 * Ownership: argv is borrowed (copied for the spawn); the caller owns the returned pid and both
 * descriptors (close-on-exec), and waits for the process.
 */
#ifndef TSR_TESTS_PEER_PROCESS_H
#define TSR_TESTS_PEER_PROCESS_H

#include <sys/types.h>

/*
 * Starts argv[0] with argv (NULL-terminated) and the environment; sets *pid, *stdin_fd (write
 * end) and *stdout_fd (read end). Fails the running cmocka test when it cannot.
 */
void peer_spawn(const char *const *argv, pid_t *pid, int *stdin_fd, int *stdout_fd);

#endif
