// The LSTM and Transformer language models: 50 Adam steps from PyTorch's initial weights on the
// same batches give PyTorch's loss at every step and its final parameters
// (tests/fixtures/gen_lm.py); training steps are bit-identical under budgets; bad input errors.
#include "models/lm.h"

#include <memory>
#include <string>

#include "dtr/errors.h"
#include "dtr/pool.h"
#include "nn/optim.h"
#include "nn/serialize.h"
#include "ops/join.h"
#include "ops/view.h"
#include "support/test_util.h"

namespace remat {
namespace {

using testing::all_close;
using testing::find_case;
using testing::FixtureCase;
using testing::load_fixture;
using testing::throws_with;

const std::vector<FixtureCase>& cases() {
  static const auto c = load_fixture("lm");
  return c;
}

std::int64_t count(const FixtureCase& c, const char* key) {
  return static_cast<std::int64_t>(c.num(key));
}

std::shared_ptr<nn::Module> build(const FixtureCase& c) {
  if (c.name == "lstm_lm")
    return std::make_shared<models::LstmLm>(
        models::LstmLmOptions{.vocabulary = count(c, "vocab"),
                              .embedding_dim = count(c, "embed"),
                              .hidden = count(c, "hidden"),
                              .layers = count(c, "layers")});
  return std::make_shared<models::TransformerLm>(
      models::TransformerLmOptions{.vocabulary = count(c, "vocab"),
                                   .d_model = count(c, "d"),
                                   .heads = count(c, "heads"),
                                   .feedforward = count(c, "ffn"),
                                   .layers = count(c, "layers"),
                                   .max_length = count(c, "max_len")});
}

std::string init_file(const FixtureCase& c) {
  return std::string(REMAT_FIXTURE_DIR) +
         (c.name == "lstm_lm" ? "/lm_lstm_init.remat" : "/lm_transformer_init.remat");
}

// Step s's inputs tokens[s, :, :L] and targets tokens[s, :, 1:].
std::pair<Tensor, Tensor> batch(const FixtureCase& c, std::int64_t step) {
  const Tensor& tokens = c["tokens"];
  const std::int64_t length = count(c, "length");
  const Tensor row = select(tokens, 0, step);
  return {contiguous(slice(row, 1, 0, length)), contiguous(slice(row, 1, 1, length + 1))};
}

Tensor loss_of(nn::Module& model, const Tensor& inputs, const Tensor& targets) {
  return models::language_model_loss(model.forward(inputs), targets);
}

TEST(LanguageModels, FiftyAdamStepsFollowPyTorchsLossesAndParameters) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    auto model = build(c);
    // The converted file carries exactly PyTorch's state dict: names and shapes must agree.
    nn::load(*model, init_file(c));
    for (const auto& [name, p] : model->named_parameters()) {
      SCOPED_TRACE(name);
      EXPECT_TRUE(all_close(p, c["p:" + name], 0, 0));
    }
    nn::Adam opt(
        model->parameters(),
        {.lr = c.num("lr"), .betas = {c.num("beta1"), c.num("beta2")}, .eps = c.num("eps")});
    const auto expected = c["losses"].to_vector<double>();
    ASSERT_EQ(static_cast<std::int64_t>(expected.size()), count(c, "steps"));
    for (std::size_t s = 0; s < expected.size(); ++s) {
      const auto [inputs, targets] = batch(c, static_cast<std::int64_t>(s));
      const Tensor loss = loss_of(*model, inputs, targets);
      const double got = loss.item<double>();
      EXPECT_NEAR(got, expected[s], 1e-4 * std::abs(expected[s])) << "step " << s;
      opt.zero_grad();
      backward(loss);
      opt.step();
    }
    std::size_t compared = 0;
    for (const auto& [name, p] : model->named_parameters()) {
      if (!c.tensors.count("final:" + name)) continue;
      SCOPED_TRACE(name);
      Tensor got = p, want = c["final:" + name];
      if (name.ends_with("in_proj_bias")) {
        // The key bias adds q . b_k to every score of a query's row, which the softmax cancels:
        // its exact gradient is zero, so both runs step it by Adam's lr-sized moves of rounding
        // noise.  Compare the query and value thirds only.
        const std::int64_t d = got.size(0) / 3;
        got = cat({slice(got, 0, 0, d), slice(got, 0, 2 * d, 3 * d)}, 0);
        want = cat({slice(want, 0, 0, d), slice(want, 0, 2 * d, 3 * d)}, 0);
      }
      EXPECT_TRUE(all_close(got, want, 2e-4, 2e-4));
      ++compared;
    }
    EXPECT_GE(compared, 6u);
  }
}

// Models deep enough that activations, not parameters, gradients and Adam state, fill the peak.
// The Transformer's feed-forward blocks run on 4 chunks of the 1,024 rows (automatic would be
// one), so the budgets below replay chunked blocks.
std::shared_ptr<nn::Module> budget_model(const std::string& name) {
  if (name == "lstm_lm")
    return std::make_shared<models::LstmLm>(
        models::LstmLmOptions{.vocabulary = 64, .embedding_dim = 32, .hidden = 64, .layers = 6});
  return std::make_shared<models::TransformerLm>(
      models::TransformerLmOptions{.vocabulary = 64,
                                   .d_model = 32,
                                   .heads = 4,
                                   .feedforward = 64,
                                   .layers = 6,
                                   .max_length = 64,
                                   .feedforward_chunk = 256});
}

// Four Adam steps on batches of 16 random sequences of 64 tokens (the budget, measured on step 2,
// binds from step 3); every loss and every final parameter, as bits.
std::vector<float> train_four_steps(const std::string& name, const std::optional<double>& fraction,
                                    Heuristic h = Heuristic::DtrEq) {
  Pool& pool = Pool::of(Device::cpu());
  const testing::ScopedPoolConfig scoped(h, DeallocPolicy::EagerEvict);
  manual_seed(5);
  auto model = budget_model(name);
  nn::Adam opt(model->parameters(), {.lr = 3e-3});
  const Tensor tokens = randint(0, 64, {4, 16, 65}, {.seed = 9});
  if (fraction) pool.set_budget_fraction(*fraction);
  pool.reset_stats();
  std::vector<float> out;
  for (std::int64_t step = 0; step < 4; ++step) {
    const Tensor row = select(tokens, 0, step);
    Tensor loss =
        loss_of(*model, contiguous(slice(row, 1, 0, 64)), contiguous(slice(row, 1, 1, 65)));
    opt.zero_grad();
    backward(loss);
    out.push_back(loss.item<float>());
    loss = Tensor();
    opt.step();
    pool.end_step();
  }
  for (const auto& p : model->parameters()) {
    const auto v = p.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// The smallest feasible fraction of the step-2 peak of each model on a grid of 0.05, and one
// that no schedule fits.  LSTM LM: 0.3 while each layer projected its whole input sequence in
// one value, whose 64 steps' gradients waited in the engine until the recurrence reached the
// first step.  With the projection made 16 steps (256 rows) at a time, 0.2 fits or not with the
// victims the measured kernel times pick; at 0.15 the parameters, gradients and Adam state
// and the inputs of one call in flight exceed the budget.  Transformer LM: 0.3 until attention
// became one op that keeps no score matrices.
struct Floors {
  double feasible, infeasible;
};
Floors floors(const std::string& name) {
  return name == "lstm_lm" ? Floors{0.25, 0.15} : Floors{0.25, 0.2};
}

TEST(LanguageModels, TrainingIsBitIdenticalUnderBudgets) {
  for (const std::string name : {"lstm_lm", "transformer_lm"}) {
    SCOPED_TRACE(name);
    const double floor = floors(name).feasible;
    const auto reference = train_four_steps(name, std::nullopt);
    const Pool& pool = Pool::of(Device::cpu());
    for (double fraction : {0.5, 0.4, floor}) {
      for (Heuristic h : {Heuristic::DtrEq, Heuristic::Dtr, Heuristic::Lru}) {
        if (h != Heuristic::DtrEq && fraction != floor) continue;
        SCOPED_TRACE(std::string(heuristic_name(h)) + " at " + std::to_string(fraction));
        const auto before = pool.total_stats();
        EXPECT_EQ(train_four_steps(name, fraction, h), reference);
        EXPECT_GT(pool.total_stats().evictions, before.evictions);  // the budget did bind
      }
    }
    EXPECT_THROW(train_four_steps(name, floors(name).infeasible), OutOfBudget);
  }
}

TEST(LanguageModels, BadInputIsAnErrorNamingIt) {
  models::LstmLm lstm({.vocabulary = 8, .embedding_dim = 4, .hidden = 3});
  EXPECT_TRUE(throws_with(
      [&] {
        lstm.logits(zeros({2, 3}));
      },
      {"LstmLm", "int64", "[batch, seq]"}));
  EXPECT_TRUE(
      throws_with([&] { lstm.logits(zeros({3}, {.dtype = DType::Int64})); }, {"LstmLm", "[3]"}));
  models::TransformerLm tf(
      {.vocabulary = 8, .d_model = 4, .heads = 2, .feedforward = 8, .layers = 1, .max_length = 4});
  EXPECT_TRUE(throws_with(
      [&] {
        tf.logits(zeros({1, 5}, {.dtype = DType::Int64}));
      },
      {"TransformerLm", "sequence length 5", "[1, 4]"}));
  EXPECT_TRUE(throws_with([] { models::LstmLm({.hidden = 0}); }, {"hidden 0"}));
  EXPECT_TRUE(throws_with([] { models::LstmLm({.dropout = 1}); }, {"dropout 1"}));
  EXPECT_TRUE(throws_with([] { models::TransformerLm({.d_model = 6, .heads = 4}); }, {"6", "4"}));
  EXPECT_TRUE(throws_with(
      [] {
        models::language_model_loss(zeros({2, 3, 4}), zeros({2, 4}, {.dtype = DType::Int64}));
      },
      {"language_model_loss", "[2, 3, 4]", "[2, 4]"}));
}

}  // namespace
}  // namespace remat
