/* Library: libferry-train (pkg-config ferry-train, which brings libferry). */
/* The training stack's umbrella: libferry's API (<ferry.h>) and libferry-train's
 * tensor ops, layers, losses, optimisers, checkpoints and data-parallel
 * training. A program that includes it links with -lferry-train -lferry. */
#ifndef FERRY_TRAIN_H
#define FERRY_TRAIN_H

#include "ferry.h"
#include "ferry/ops.h"
#include "ferry/nn.h"
#include "ferry/dist.h"

#endif
