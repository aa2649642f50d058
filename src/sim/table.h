/*
 * table.h - kubectl's column layout (text/tabwriter, padding 3, left-aligned): every column as
 * wide as its widest cell plus three spaces, the last column unpadded.
 *
 * Ownership: the table owns copies of its cells (heap, grown as rows are added); release it with
 * sim_table_release. One owner at a time.
 */
#ifndef TSR_SIM_TABLE_H
#define TSR_SIM_TABLE_H

#include <stddef.h>

struct tsr_buf;

#define SIM_TABLE_COLS 12

struct sim_table {
        size_t cols, rows, cap_rows;
        char **cell; /* rows x cols strings, row-major */
};

/*
 * Starts a table whose header row is the NULL-terminated names (at most SIM_TABLE_COLS are
 * used). Returns 0 or TSR_ENOMEM (the table is then empty but releasable).
 */
int sim_table_init(struct sim_table *t, const char *const *header);

/* Appends a row of t->cols cells (NULL reads as ""). Returns 0 or TSR_ENOMEM (t unchanged). */
int sim_table_row(struct sim_table *t, const char *const *cells);

/* Appends the laid-out table to out. Returns 0 or a buffer error. */
int sim_table_print(const struct sim_table *t, struct tsr_buf *out);

/* Frees every cell; t may be re-initialised afterwards. */
void sim_table_release(struct sim_table *t);

#endif
