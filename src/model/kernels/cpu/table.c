/* The CPU backend's kernel table: the reference every other backend is tested
 * against (tests/test_backend_ops.c). */
#include "model/kernels/kernels.h"

#define FK_ENTRY_CPU(name, ...) .name = fk_cpu_##name,
const fk_table fk_cpu_table = {FK_KERNELS(FK_ENTRY_CPU)};
