/*
 * nvidia_smi.h - nvidia-smi on a simulated node, over its fake GPUs: MIG mode switches, the
 * mig.mode query, `mig -lgi`, and `mig -cgi PROFILE[,PROFILE...] -C` carving out of band.
 */
#ifndef TSR_SIM_NVIDIA_SMI_H
#define TSR_SIM_NVIDIA_SMI_H

#include "sim/argv.h"
#include "sim/cluster.h"

struct tsr_buf;
struct tsr_diag;

/* Runs nvidia-smi args on node. Returns 0 (tool errors are output) or TSR_EPARSE for usage. */
int sim_nvidia_smi(struct tsr_cluster *c, size_t node, const struct sim_argv *args,
                   struct tsr_buf *out, struct tsr_diag *diag);

#endif
