/*
 * replay.c - runs every file of a corpus directory through a fuzz target's LLVMFuzzerTestOneInput,
 * so the committed corpus is replayed by the ordinary test run in every build (gcc included).
 * Prints TAP: one "ok" line per file. A crash or sanitizer report fails the test by itself; an
 * empty or missing corpus is a failure too, so a target can never silently replay nothing.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
        char *names[4096];
        size_t n = 0;
        DIR *d;
        struct dirent *e;

        if (argc != 2) {
                fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
                return 2;
        }
        d = opendir(argv[1]);
        if (!d) {
                printf("1..0 # cannot open %s\nnot ok\n", argv[1]);
                return 1;
        }
        while ((e = readdir(d)) && n < sizeof(names) / sizeof(names[0])) {
                if (e->d_name[0] == '.')
                        continue;
                names[n] = strdup(e->d_name);
                if (!names[n])
                        return 1;
                n++;
        }
        closedir(d);
        if (n == 0) {
                printf("1..1\nnot ok 1 - corpus %s is empty\n", argv[1]);
                return 1;
        }
        qsort(names, n, sizeof(names[0]), cmp);
        printf("1..%zu\n", n);
        for (size_t i = 0; i < n; i++) {
                char path[4096];
                FILE *f;
                uint8_t *buf;
                long len;

                snprintf(path, sizeof(path), "%s/%s", argv[1], names[i]);
                f = fopen(path, "rb");
                if (!f || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0) {
                        printf("not ok %zu - %s unreadable\n", i + 1, names[i]);
                        return 1;
                }
                rewind(f);
                buf = malloc((size_t)len + 1);
                if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
                        printf("not ok %zu - %s unreadable\n", i + 1, names[i]);
                        return 1;
                }
                fclose(f);
                LLVMFuzzerTestOneInput(buf, (size_t)len);
                free(buf);
                printf("ok %zu - %s\n", i + 1, names[i]);
                free(names[i]);
        }
        return 0;
}
