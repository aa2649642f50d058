/*
 * table.c - tabwriter-style layout over a growable array of cell copies.
 */
#include "sim/table.h"

#include "base/buf.h"
#include "base/err.h"

#include <stdlib.h>
#include <string.h>

int sim_table_init(struct sim_table *t, const char *const *header)
{
        memset(t, 0, sizeof(*t));
        while (header[t->cols] && t->cols < SIM_TABLE_COLS)
                t->cols++;
        return sim_table_row(t, header);
}

int sim_table_row(struct sim_table *t, const char *const *cells)
{
        char **row;

        if (t->rows == t->cap_rows) {
                size_t cap = t->cap_rows ? t->cap_rows * 2 : 16;
                char **grown = realloc(t->cell, cap * t->cols * sizeof(*grown));

                if (!grown)
                        return TSR_ENOMEM;
                t->cell = grown;
                t->cap_rows = cap;
        }
        row = &t->cell[t->rows * t->cols];
        for (size_t c = 0; c < t->cols; c++) {
                row[c] = strdup(cells[c] ? cells[c] : "");
                if (!row[c]) {
                        while (c > 0)
                                free(row[--c]);
                        return TSR_ENOMEM;
                }
        }
        t->rows++;
        return 0;
}

int sim_table_print(const struct sim_table *t, struct tsr_buf *out)
{
        size_t width[SIM_TABLE_COLS] = {0};
        int rc = 0;

        for (size_t r = 0; r < t->rows; r++)
                for (size_t c = 0; c < t->cols; c++)
                        if (strlen(t->cell[r * t->cols + c]) > width[c])
                                width[c] = strlen(t->cell[r * t->cols + c]);
        for (size_t r = 0; r < t->rows && !rc; r++) {
                for (size_t c = 0; c < t->cols && !rc; c++) {
                        const char *s = t->cell[r * t->cols + c];

                        rc = tsr_buf_adds(out, s);
                        if (!rc && c + 1 < t->cols)
                                rc = tsr_buf_pad(out, ' ', width[c] - strlen(s) + 3);
                }
                if (!rc)
                        rc = tsr_buf_addch(out, '\n');
        }
        return rc;
}

void sim_table_release(struct sim_table *t)
{
        for (size_t i = 0; i < t->rows * t->cols; i++)
                free(t->cell[i]);
        free(t->cell);
        memset(t, 0, sizeof(*t));
}
