// The KV cache's shape for a model: the cache (kv/) knows no model::Config,
// so the model layer translates.
#pragma once
#include "kv/shape.h"
#include "model/config.h"

namespace kvlab::model {

kv::Shape kv_shape(const Config& cfg);

}  // namespace kvlab::model
