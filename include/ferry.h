/* ferry: feeds training data to a GPU, and trains on it. The whole public API. */
#ifndef FERRY_H
#define FERRY_H

#include "ferry/status.h"
#include "ferry/device.h"
#include "ferry/tensor.h"
#include "ferry/rng.h"
#include "ferry/dataset.h"
#include "ferry/loader.h"
#include "ferry/ops.h"
#include "ferry/nn.h"
#include "ferry/dist.h"

#endif
