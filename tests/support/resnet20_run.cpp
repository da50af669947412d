#include "support/resnet20_run.h"

#include "dtr/pool.h"
#include "models/resnet.h"
#include "nn/nn.h"
#include "ops/loss.h"
#include "remat.h"

namespace remat {

Resnet20Run train_resnet20(const Resnet20Options& options) {
  Pool& pool = Pool::of(Device::cpu());
  DtrConfig cfg;
  cfg.cost = CostModel::Flops;
  cfg.swap = options.swap;
  cfg.heuristic = options.heuristic;
  pool.configure(cfg);
  manual_seed(3);
  auto net = models::resnet("resnet20", {.in_channels = 3, .num_classes = 10});
  nn::SGD opt(net->parameters(), {.lr = 0.05, .momentum = 0.9});
  Resnet20Run run;
  if (options.fraction) pool.set_budget_fraction(*options.fraction);
  pool.reset_stats();
  for (int s = 0; s < options.steps; ++s) {
    Tensor x = randn({64, 3, 32, 32}, {.seed = 100 + static_cast<std::uint64_t>(s)});
    Tensor y = randint(0, 10, {64}, {.seed = 200 + static_cast<std::uint64_t>(s)});
    {
      Tensor loss = cross_entropy(net->forward(x), y);
      backward(loss);
      run.values.push_back(loss.item<float>());
    }
    opt.step();
    opt.zero_grad();
    if (pool.end_step()) pool.reset_stats();  // count the budgeted steps only
  }
  run.stats = pool.stats();
  run.budget = pool.budget().value_or(0);
  run.trials_settled = pool.score_choice().settled();
  pool.set_budget(std::nullopt);
  for (const auto& p : net->parameters()) {
    const auto v = p.to_vector<float>();
    run.values.insert(run.values.end(), v.begin(), v.end());
  }
  for (const auto& [name, b] : net->named_buffers()) {
    const auto v = b.to_vector<float>();
    run.values.insert(run.values.end(), v.begin(), v.end());
  }
  return run;
}

}  // namespace remat
