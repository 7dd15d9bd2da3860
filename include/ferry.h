/* ferry: feeds training data to a GPU, and trains on it. The whole public API. */
#ifndef FERRY_H
#define FERRY_H

#include "ferry/status.h"
#include "ferry/device.h"
#include "ferry/tensor.h"
#include "ferry/rng.h"
#if __has_include("ferry/dataset.h")
#include "ferry/dataset.h"
#endif
#if __has_include("ferry/loader.h")
#include "ferry/loader.h"
#endif
#if __has_include("ferry/nn.h")
#include "ferry/nn.h"
#endif

#endif
