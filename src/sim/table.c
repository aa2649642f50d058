/*
 * table.c - tabwriter-style layout.
 */
#include "sim/table.h"

#include "base/buf.h"

#include <stdio.h>
#include <string.h>

void sim_table_init(struct sim_table *t, const char *const *header)
{
        t->cols = 0;
        t->rows = 0;
        while (header[t->cols] && t->cols < SIM_TABLE_COLS)
                t->cols++;
        sim_table_row(t, header);
}

void sim_table_row(struct sim_table *t, const char *const *cells)
{
        if (t->rows >= SIM_TABLE_ROWS)
                return;
        for (size_t c = 0; c < t->cols; c++)
                snprintf(t->cell[t->rows][c], SIM_CELL_MAX, "%s", cells[c] ? cells[c] : "");
        t->rows++;
}

int sim_table_print(const struct sim_table *t, struct tsr_buf *out)
{
        size_t width[SIM_TABLE_COLS] = {0};
        int rc = 0;

        for (size_t r = 0; r < t->rows; r++)
                for (size_t c = 0; c < t->cols; c++)
                        if (strlen(t->cell[r][c]) > width[c])
                                width[c] = strlen(t->cell[r][c]);
        for (size_t r = 0; r < t->rows && !rc; r++) {
                for (size_t c = 0; c < t->cols && !rc; c++) {
                        rc = tsr_buf_adds(out, t->cell[r][c]);
                        if (!rc && c + 1 < t->cols)
                                rc = tsr_buf_pad(out, ' ', width[c] - strlen(t->cell[r][c]) + 3);
                }
                if (!rc)
                        rc = tsr_buf_addch(out, '\n');
        }
        return rc;
}
