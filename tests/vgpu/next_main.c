/*
 * next_main.c - the program check_rtld_next.sh runs: it asks for the next puts from the program
 * itself (a sanitizer runtime's question, made before anything else) and prints the file that
 * defines the answer, then calls puts.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
        void *next = dlsym(RTLD_NEXT, "puts");
        Dl_info info;
        const char *file = "none";

        if (next && dladdr(next, &info) && info.dli_fname)
                file = strrchr(info.dli_fname, '/') ? strrchr(info.dli_fname, '/') + 1
                                                    : info.dli_fname;
        printf("next puts: %s\n", file);
        return puts("hello") < 0;
}
