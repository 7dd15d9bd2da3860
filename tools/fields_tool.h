/* Fields in the tools (fields_tool.c): --fields png,cls,boxes.npy parsed,
 * shards opened as those fields, each field printed, and `ferry check` over
 * them. */
#ifndef FERRY_TOOLS_FIELDS_H
#define FERRY_TOOLS_FIELDS_H

#include <stdio.h>

#include "ferry.h"

typedef struct tool_fields {
    char buf[FERRY_FIELD_MAX * (FERRY_FIELD_NAME_MAX + 1)];
    const char *names[FERRY_FIELD_MAX];
    size_t n;
} tool_fields;

/* "png,cls,boxes.npy" into out; -1 with a message (cmd: "ferry bench") when
 * it is empty or has more than FERRY_FIELD_MAX names. */
int tool_fields_parse(const char *cmd, const char *list, tool_fields *out);
/* One line per field: "  NAME DTYPE [SHAPE] (image | ragged, lengths beside)". */
void tool_fields_print(FILE *f, const ferry_dataset *ds);
/* ferry check on the shards at path read as fields: every sample's every
 * field decoded, "name: reason" per bad one, then each field with the
 * ragged fields' lengths (least, most, mean). Adds to *total and *bad. */
int tool_check_shard_fields(const char *path, const tool_fields *tf, size_t workers,
                            size_t *total, size_t *bad);

#endif
