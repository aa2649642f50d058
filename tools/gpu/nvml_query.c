/*
 * nvml_query.c - prints NVML's memory view of every device (nvml_view.h), for the vgpu check.
 *
 * Usage: nvml_query [tag]. Plain C, built with the host compiler; vgpu_check.sh runs it with
 * and without LD_PRELOAD of the slice interposer while another process holds memory.
 * Exit 0 always (the lines say what failed).
 */
#include "nvml_view.h"

int main(int argc, char **argv)
{
        nvml_view(argc > 1 ? argv[1] : "query");
        return 0;
}
