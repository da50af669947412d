#include "bench/lm_workloads.h"

#include <cstdint>
#include <memory>

#include "models/lm.h"

namespace remat::bench {
namespace {

constexpr std::int64_t kVocabulary = 1000;

// One fixed batch of random tokens [batch, length + 1]: inputs all but the last, targets all but
// the first.  The module stays alive in the closure.
SmallOpModel lm_workload(std::shared_ptr<nn::Module> model, std::int64_t batch,
                         std::int64_t length) {
  const Tensor tokens = randint(0, kVocabulary, {batch, length + 1}, {.seed = 3});
  const Tensor inputs = contiguous(slice(tokens, 1, 0, length));
  const Tensor targets = contiguous(slice(tokens, 1, 1, length + 1));
  SmallOpModel m;
  m.params = model->parameters();
  m.optimizer = std::make_unique<nn::Adam>(m.params, nn::AdamOptions{.lr = 1e-3});
  m.loss = [model, inputs, targets] {
    return models::language_model_loss(model->forward(inputs), targets);
  };
  return m;
}

}  // namespace

SmallOpModel lstm_lm_workload() {
  return lm_workload(std::make_shared<models::LstmLm>(models::LstmLmOptions{
                         .vocabulary = kVocabulary, .embedding_dim = 256, .hidden = 256}),
                     16, 64);
}

SmallOpModel transformer_lm_workload() {
  return lm_workload(std::make_shared<models::TransformerLm>(
                         models::TransformerLmOptions{.vocabulary = kVocabulary,
                                                      .d_model = 256,
                                                      .heads = 4,
                                                      .feedforward = 1024,
                                                      .layers = 4,
                                                      .max_length = 128}),
                     8, 128);
}

}  // namespace remat::bench
