/*
 * table.h - kubectl's column layout (text/tabwriter, padding 3, left-aligned): every column as
 * wide as its widest cell plus three spaces, the last column unpadded. The table owns copies of
 * its cells.
 */
#ifndef TSR_SIM_TABLE_H
#define TSR_SIM_TABLE_H

#include <stddef.h>

struct tsr_buf;

#define SIM_TABLE_COLS 12
#define SIM_TABLE_ROWS 512
#define SIM_CELL_MAX   256

struct sim_table {
        size_t cols, rows;
        char cell[SIM_TABLE_ROWS][SIM_TABLE_COLS][SIM_CELL_MAX];
};

/* Starts a table whose header row is the cols NULL-terminated names. */
void sim_table_init(struct sim_table *t, const char *const *header);

/* Appends a row of t->cols cells. Rows past SIM_TABLE_ROWS are dropped. */
void sim_table_row(struct sim_table *t, const char *const *cells);

/* Appends the laid-out table to out. Returns 0 or a buffer error. */
int sim_table_print(const struct sim_table *t, struct tsr_buf *out);

#endif
