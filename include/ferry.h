/* Library: libferry (pkg-config ferry). */
/* ferry: feeds training data to a GPU. libferry's whole public API: devices,
 * tensors (creation, moving, inspection), datasets and the loader. A program
 * that includes only this header links with -lferry alone. The training stack
 * (ops, layers, optimisers, data parallelism) is libferry-train's:
 * <ferry/train.h>, which includes this header too. */
#ifndef FERRY_H
#define FERRY_H

#include "ferry/status.h"
#include "ferry/device.h"
#include "ferry/tensor.h"
#include "ferry/rng.h"
#include "ferry/dataset.h"
#include "ferry/loader.h"
#include "ferry/tokens.h"

#endif
