/*
 * fuzz_yaml.c - bytes as a YAML stream through the libyaml-to-jansson converter the scenario
 * loader and `kubectl apply -f -` use. It may refuse (with a line and a message); what it
 * accepts must be a JSON array of documents that serialises, and every container value in it
 * must have a recorded source line.
 */
#include "base/diag.h"
#include "sim/yaml_json.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_lines(const struct tsr_yaml_lines *lines, json_t *v)
{
        const char *key;
        json_t *child;
        size_t i;

        if (json_is_object(v)) {
                if (tsr_yaml_line(lines, v, 0) == 0)
                        abort();
                json_object_foreach(v, key, child) check_lines(lines, child);
        } else if (json_is_array(v)) {
                if (tsr_yaml_line(lines, v, 0) == 0)
                        abort();
                json_array_foreach(v, i, child) check_lines(lines, child);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct tsr_yaml_lines lines = {0};
        struct tsr_diag diag;
        json_t *docs = NULL, *doc;
        size_t i;
        char *s;

        if (size > 65536)
                return 0;
        tsr_diag_clear(&diag);
        if (tsr_yaml_load_all((const char *)data, size, 0, &docs, &lines, &diag)) {
                if (diag.msg[0] == '\0' || diag.line == 0)
                        abort();
                tsr_yaml_lines_release(&lines);
                return 0;
        }
        if (!json_is_array(docs))
                abort();
        json_array_foreach(docs, i, doc) check_lines(&lines, doc);
        s = json_dumps(docs, JSON_ENCODE_ANY);
        if (!s)
                abort();
        free(s);
        json_decref(docs);
        tsr_yaml_lines_release(&lines);
        return 0;
}
