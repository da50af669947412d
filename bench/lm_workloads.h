// The language-model workloads of bench/compare_torch.sh (models/lm.h on random tokens, Adam
// lr 1e-3, dropout 0): lstm_lm (vocabulary 1000, embedding and hidden 256, one layer, batch 16,
// sequence 64) and transformer_lm (vocabulary 1000, d 256, 4 heads, FFN 1024, 4 layers, batch 8,
// sequence 128).  bench/compare_torch.py builds the same models with torch.nn.
// Usage: SmallOpModel m = lstm_lm_workload(); double ms = m.step();
#pragma once
#include "bench/small_op_models.h"

namespace remat::bench {

SmallOpModel lstm_lm_workload();
SmallOpModel transformer_lm_workload();

}  // namespace remat::bench
