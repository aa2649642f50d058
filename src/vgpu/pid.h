/*
 * pid.h - this process's pid without a system call per use: cached, and forgotten in a fork
 * child (pthread_atfork), so the budget's slot and the held table notice the child at once.
 * Thread-safe.
 */
#ifndef TSR_VGPU_PID_H
#define TSR_VGPU_PID_H

#include <sys/types.h>

pid_t tsr_vgpu_pid(void);

#endif
