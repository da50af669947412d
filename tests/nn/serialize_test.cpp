// Serialization (nn/serialize.h, docs/serialization-format.md): the byte layout, round trips of
// named tensors, modules and optimizers (training continues identically after reload), every
// kind of corrupt or mismatched file giving a clear error that leaves the target unchanged, and
// atomic saves that never destroy the previous file.
#include "nn/serialize.h"

#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>

#include "nn/layers.h"
#include "nn/lr_scheduler.h"
#include "support/test_util.h"

namespace remat {
namespace {

namespace fs = std::filesystem;
using testing::bit_equal;
using testing::throws_with;

using Bytes = std::vector<unsigned char>;

Bytes read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}
void write_bytes(const fs::path& p, const Bytes& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
std::uint64_t le(const Bytes& b, std::size_t off, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= std::uint64_t{b.at(off + i)} << (8 * i);
  return v;
}
void put_le(Bytes& b, std::size_t off, std::uint64_t v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) b.at(off + i) = static_cast<unsigned char>(v >> (8 * i));
}
std::uint32_t crc(const Bytes& b, std::size_t from, std::size_t to) {
  return static_cast<std::uint32_t>(crc32(0, b.data() + from, static_cast<uInt>(to - from)));
}

// Where the fields of each record are, following docs/serialization-format.md.
struct RecordAt {
  std::string name;
  std::size_t start, ndim, dims, nbytes_at, data, crc_at;
};
std::vector<RecordAt> records(const Bytes& b) {
  std::vector<RecordAt> out;
  std::size_t o = 28;
  for (std::uint64_t r = 0; r < le(b, 16, 8); ++r) {
    RecordAt rec;
    rec.start = o;
    const std::size_t name_len = le(b, o, 4);
    rec.name = std::string(b.begin() + static_cast<std::ptrdiff_t>(o + 4),
                           b.begin() + static_cast<std::ptrdiff_t>(o + 4 + name_len));
    rec.ndim = b.at(o + 4 + name_len + 1);
    rec.dims = o + 4 + name_len + 4;
    rec.nbytes_at = rec.dims + 8 * rec.ndim;
    rec.data = rec.nbytes_at + 8;
    rec.crc_at = rec.data + le(b, rec.nbytes_at, 8);
    o = rec.crc_at + 4;
    out.push_back(rec);
  }
  return out;
}

// A fresh directory per test, removed afterwards.
class SerializeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ =
        fs::temp_directory_path() / fmt::format("remat_serialize_{}_{}", ::getpid(), info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    nn::detail::set_save_fault_hook(nullptr);
    fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // Files in the directory other than the given ones (leftover temporaries).
  std::vector<std::string> others(const std::set<std::string>& expected) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (!expected.count(e.path().filename().string()))
        out.push_back(e.path().filename().string());
    return out;
  }
  fs::path dir_;
};

// A small model with parameters, a float buffer and an int64 buffer.
struct Net : nn::Module {
  Net() : Module("Net") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 3));
    register_buffer("scale", uniform({3}, 0.5, 1.5));
    register_buffer("count", tensor<std::int64_t>({0}, Shape{}));
  }
  Tensor forward(const Tensor& x) override {
    return mul(fc2->forward(relu(fc1->forward(x))), buffer("scale"));
  }
  std::shared_ptr<nn::Linear> fc1, fc2;
};

std::map<std::string, Tensor> snapshot(const nn::Module& m) {
  std::map<std::string, Tensor> out;
  for (const auto& [k, v] : m.state_dict()) out[k] = clone(v);
  return out;
}
::testing::AssertionResult same_state(const nn::Module& m,
                                      const std::map<std::string, Tensor>& snap) {
  const auto sd = m.state_dict();
  if (sd.size() != snap.size())
    return ::testing::AssertionFailure() << "different number of entries";
  for (const auto& [k, v] : sd) {
    auto r = bit_equal(v, snap.at(k));
    if (!r) return r << " (entry " << k << ")";
  }
  return ::testing::AssertionSuccess();
}

// One training step of a regression on fixed data.
void train_step(Net& net, nn::Optimizer& opt, int step) {
  const Tensor x = uniform({5, 4}, -1, 1, {.seed = 100 + static_cast<std::uint64_t>(step)});
  const Tensor y = uniform({5, 3}, -1, 1, {.seed = 200 + static_cast<std::uint64_t>(step)});
  const Tensor d = sub(net.forward(x), y);
  backward(mean(mul(d, d)));
  opt.step();
  opt.zero_grad();
}

TEST_F(SerializeTest, ByteLayoutAsDocumented) {
  const auto p = path("a.rmt");
  nn::save_state(p, {{"x", tensor<std::int64_t>({7}, Shape{})},
                     {"w", tensor<float>({1.5f, -2.f, 0.25f, 8.f}, Shape{2, 2})}});
  const Bytes b = read_bytes(p);
  // Header.
  ASSERT_GE(b.size(), 28u);
  EXPECT_EQ(std::string(b.begin(), b.begin() + 8), "REMATSTD");
  EXPECT_EQ(le(b, 8, 4), 1u);   // version
  EXPECT_EQ(le(b, 12, 4), 0u);  // flags
  EXPECT_EQ(le(b, 16, 8), 2u);  // count
  EXPECT_EQ(le(b, 24, 4), crc(b, 0, 24));
  // Record "w" (names in byte order): float32 [2, 2].
  std::size_t o = 28;
  EXPECT_EQ(le(b, o, 4), 1u);
  EXPECT_EQ(b[o + 4], 'w');
  EXPECT_EQ(b[o + 5], 0);  // float32
  EXPECT_EQ(b[o + 6], 2);  // ndim
  EXPECT_EQ(le(b, o + 7, 2), 0u);
  EXPECT_EQ(le(b, o + 9, 8), 2u);
  EXPECT_EQ(le(b, o + 17, 8), 2u);
  EXPECT_EQ(le(b, o + 25, 8), 16u);
  float first = 0;
  std::memcpy(&first, &b[o + 33], 4);
  EXPECT_EQ(first, 1.5f);
  EXPECT_EQ(le(b, o + 49, 4), crc(b, o, o + 49));
  // Record "x": int64 0-dim, no dims.
  o += 53;
  EXPECT_EQ(le(b, o, 4), 1u);
  EXPECT_EQ(b[o + 4], 'x');
  EXPECT_EQ(b[o + 5], 2);  // int64
  EXPECT_EQ(b[o + 6], 0);
  EXPECT_EQ(le(b, o + 9, 8), 8u);
  EXPECT_EQ(le(b, o + 17, 8), 7u);
  EXPECT_EQ(le(b, o + 25, 4), crc(b, o, o + 25));
  // Footer.
  o += 29;
  ASSERT_EQ(b.size(), o + 12);
  EXPECT_EQ(std::string(b.begin() + o, b.begin() + o + 8), "REMATEND");
  EXPECT_EQ(le(b, o + 8, 4), crc(b, 0, o));
}

TEST_F(SerializeTest, NamedTensorsRoundTrip) {
  const Tensor base = uniform({3, 5}, -1, 1, {.dtype = DType::Float64, .seed = 1});
  const std::map<std::string, Tensor> tensors{
      {"f32", uniform({2, 3, 4}, -1, 1, {.seed = 2})},
      {"f64.transposed", transpose(base, 0, 1)},  // not contiguous: saved row-major
      {"i64", tensor<std::int64_t>({-3, 0, 1ll << 40, 5}, Shape{2, 2})},
      {"scalar", scalar_tensor(2.5, {.dtype = DType::Float64})},
      {"empty", zeros({0, 3})},
      {"layer1.0.conv1.weight", randn({2, 1, 3, 3}, {.seed = 3})},
  };
  const auto p = path("t.rmt");
  nn::save_state(p, tensors);
  const auto loaded = nn::load_state(p);
  ASSERT_EQ(loaded.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    const Tensor& l = loaded.at(name);
    EXPECT_EQ(l.dtype(), t.dtype());
    EXPECT_EQ(l.shape(), t.shape());
    EXPECT_TRUE(l.is_contiguous());
    EXPECT_FALSE(l.requires_grad());
    EXPECT_TRUE(bit_equal(l, t));
  }
  EXPECT_TRUE(others({"t.rmt"}).empty());
}

TEST_F(SerializeTest, ModuleRoundTripKeepsHandles) {
  Net a, b;
  nn::Adam opt(a.parameters(), {.lr = 0.05});
  train_step(a, opt, 0);
  const auto p = path("net.rmt");
  nn::save(a, p);
  const Tensor b_weight = b.fc1->param("weight");
  ASSERT_FALSE(bit_equal(b_weight, a.fc1->param("weight")));
  nn::load(b, p);
  EXPECT_TRUE(same_state(b, snapshot(a)));
  // Loaded in place: the handles (and anything holding them, like an optimizer) see the values.
  EXPECT_TRUE(same(b.fc1->param("weight"), b_weight));
  EXPECT_TRUE(b_weight.requires_grad());
  EXPECT_TRUE(b_weight.is_leaf());
  const Tensor x = uniform({2, 4}, -1, 1, {.seed = 9});
  EXPECT_TRUE(bit_equal(b.forward(x), a.forward(x)));
}

// Model and optimizer saved mid-training and loaded into fresh objects continue bit-identically.
TEST_F(SerializeTest, TrainingContinuesIdenticallyAfterReload) {
  for (int kind = 0; kind < 3; ++kind) {
    SCOPED_TRACE(kind);
    Net a;
    std::unique_ptr<nn::Optimizer> opt_a;
    if (kind == 0)
      opt_a = std::make_unique<nn::SGD>(
          a.parameters(), nn::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
    if (kind == 1)
      opt_a =
          std::make_unique<nn::Adam>(a.parameters(), nn::AdamOptions{.lr = 0.01, .amsgrad = true});
    if (kind == 2)
      opt_a = std::make_unique<nn::AdamW>(a.parameters(), nn::AdamWOptions{.lr = 0.01});
    nn::StepLR sched(*opt_a, 1, 0.5);
    for (int s = 0; s < 3; ++s) {
      train_step(a, *opt_a, s);
      sched.step();
    }
    nn::save(a, path("model.rmt"));
    nn::save(*opt_a, path("opt.rmt"));

    Net b;
    std::unique_ptr<nn::Optimizer> opt_b;
    if (kind == 0)
      opt_b = std::make_unique<nn::SGD>(
          b.parameters(), nn::SGDOptions{.lr = 0.7, .momentum = 0.9, .nesterov = true});
    if (kind == 1) opt_b = std::make_unique<nn::Adam>(b.parameters(), nn::AdamOptions{.lr = 0.7});
    if (kind == 2)
      opt_b = std::make_unique<nn::AdamW>(b.parameters(),
                                          nn::AdamWOptions{.lr = 0.7, .weight_decay = 0.5});
    nn::load(b, path("model.rmt"));
    nn::load(*opt_b, path("opt.rmt"));
    EXPECT_EQ(opt_b->lr(0), opt_a->lr(0));
    EXPECT_EQ(opt_b->initial_lr(0), opt_a->initial_lr(0));
    EXPECT_EQ(opt_b->hyperparameters(0), opt_a->hyperparameters(0));
    for (int s = 3; s < 6; ++s) {
      train_step(a, *opt_a, s);
      train_step(b, *opt_b, s);
    }
    EXPECT_TRUE(same_state(b, snapshot(a)));
  }
}

TEST_F(SerializeTest, CorruptFilesAreClearErrorsAndChangeNothing) {
  Net source, target;
  const auto good_path = path("good.rmt");
  nn::save(source, good_path);
  const Bytes good = read_bytes(good_path);
  const auto before = snapshot(target);
  const auto p = path("bad.rmt");

  auto expect_error = [&](const Bytes& bytes, std::vector<std::string> fragments) {
    write_bytes(p, bytes);
    fragments.push_back(p);  // every message names the file
    EXPECT_TRUE(throws_with([&] { nn::load(target, p); }, fragments));
    EXPECT_TRUE(same_state(target, before));
  };

  // Records in name order: count (int64 0-dim), fc1.bias, fc1.weight [8, 4], ...
  const auto recs = records(good);
  ASSERT_EQ(recs.size(), 6u);
  const RecordAt& first = recs[0];
  const RecordAt& weight = recs[2];
  ASSERT_EQ(weight.name, "fc1.weight");
  ASSERT_EQ(weight.ndim, 2u);
  ASSERT_EQ(recs.back().crc_at + 4 + 12, good.size());

  // Truncated at many offsets: inside the magic, the version, the header, a name, the dtype,
  // a shape, the byte length, the data, a checksum, the footer; and at a record boundary.
  for (std::size_t cut :
       {std::size_t{0}, std::size_t{5}, std::size_t{8}, std::size_t{10}, std::size_t{20},
        std::size_t{28}, first.start + 6, first.dims - 3, weight.dims + 12, weight.nbytes_at + 4,
        weight.data + 3, weight.crc_at + 2, recs[3].start, good.size() - 12, good.size() - 5,
        good.size() - 1}) {
    SCOPED_TRACE(fmt::format("truncated to {} of {} bytes", cut, good.size()));
    expect_error(Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut)),
                 {"truncated"});
  }
  // Every cut must fail (whatever the message), none may crash or succeed.
  for (std::size_t cut = 0; cut < good.size(); cut += 7) {
    write_bytes(p, Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut)));
    EXPECT_THROW(nn::load(target, p), Error) << "cut at " << cut;
  }
  EXPECT_TRUE(same_state(target, before));

  {
    Bytes b = good;
    b[weight.data + 2] ^= 0x10;  // one flipped bit in a tensor's data
    expect_error(b, {"checksum mismatch", "record 2 ('fc1.weight')"});
  }
  {
    Bytes b = good;
    b[weight.crc_at] ^= 0x01;  // in the checksum itself
    expect_error(b, {"checksum mismatch", "fc1.weight"});
  }
  {
    Bytes b = good;
    b[good.size() - 4] ^= 0x01;  // in the file checksum
    expect_error(b, {"file checksum mismatch"});
  }
  {
    Bytes b = good;
    b[0] = 'X';
    expect_error(b, {"bad magic"});
  }
  {
    Bytes b = good;
    put_le(b, 8, 2, 4);
    expect_error(b, {"unsupported format version 2"});
  }
  {
    Bytes b = good;
    b[17] ^= 0x01;  // the count, without fixing the header checksum
    expect_error(b, {"header checksum"});
  }
  {
    Bytes b = good;
    put_le(b, 16, std::uint64_t{1} << 50, 8);  // an absurd count with a valid header checksum
    put_le(b, 24, crc(b, 0, 24), 4);
    expect_error(b, {"announces", "tensors"});
  }
  {
    Bytes b = good;
    put_le(b, weight.start, 0xFFFFFFFFu, 4);  // an absurd name length
    expect_error(b, {"name length"});
  }
  {
    Bytes b = good;
    put_le(b, weight.dims, std::uint64_t{1} << 40, 8);  // an absurd dimension
    expect_error(b, {"fc1.weight", "byte length", "does not match"});
  }
  {
    Bytes b = good;
    put_le(b, weight.dims, std::uint64_t{1} << 62, 8);  // sizes whose product overflows
    put_le(b, weight.dims + 8, std::uint64_t{1} << 62, 8);
    expect_error(b, {"fc1.weight", "byte length", "does not match"});
  }
  {
    Bytes b = good;
    put_le(b, weight.dims, std::uint64_t{1} << 40,
           8);  // a huge shape whose size the length matches
    put_le(b, weight.nbytes_at, (std::uint64_t{1} << 40) * 4 * 4, 8);
    expect_error(b, {"truncated", "fc1.weight", "needs"});
  }
  {
    // A zero dimension beside a huge one: 0 elements, so 0 bytes match, but no strides fit.
    Bytes b = good;
    put_le(b, weight.dims, 0, 8);
    put_le(b, weight.dims + 8, std::uint64_t{1} << 62, 8);
    put_le(b, weight.nbytes_at, 0, 8);
    Bytes fixed(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(weight.data));
    fixed.insert(fixed.end(), b.begin() + static_cast<std::ptrdiff_t>(weight.crc_at), b.end());
    put_le(fixed, weight.data, crc(fixed, weight.start, weight.data), 4);
    put_le(fixed, fixed.size() - 4, crc(fixed, 0, fixed.size() - 12), 4);
    expect_error(fixed, {"fc1.weight", "too large for 64-bit strides"});
  }
  {
    Bytes b = good;
    b[weight.dims - 4] = 9;  // unknown dtype code
    expect_error(b, {"unknown dtype code 9"});
  }
  {
    Bytes b = good;
    b[weight.dims - 3] = 200;  // absurd rank
    expect_error(b, {"200 dims"});
  }
  {
    Bytes b = good;
    b.push_back(0);
    expect_error(b, {"1 unexpected bytes after the end marker"});
  }
  EXPECT_TRUE(
      throws_with([&] { nn::load(target, path("missing.rmt")); }, {"cannot open", "missing.rmt"}));
  EXPECT_TRUE(throws_with([&] { nn::load(target, dir_.string()); }, {"regular file"}));
}

TEST_F(SerializeTest, MismatchedModuleFilesAreClearErrorsAndChangeNothing) {
  Net source, target;
  const auto before = snapshot(target);
  const auto good = source.state_dict();
  const auto p = path("m.rmt");
  auto expect_error = [&](std::map<std::string, Tensor> entries,
                          std::vector<std::string> fragments) {
    nn::save_state(p, entries);
    fragments.push_back(p);
    EXPECT_TRUE(throws_with([&] { nn::load(target, p); }, fragments));
    EXPECT_TRUE(same_state(target, before));
  };
  {
    auto e = good;
    e.erase("fc2.bias");
    expect_error(e, {"missing 'fc2.bias'"});
  }
  {
    auto e = good;
    e["fc3.weight"] = zeros({2, 2});
    expect_error(e, {"unexpected 'fc3.weight'"});
  }
  {
    auto e = good;
    e["fc1.weight"] = zeros({4, 8});
    expect_error(e, {"fc1.weight", "[4, 8]", "[8, 4]"});
  }
  {
    auto e = good;
    e["count"] = tensor<double>({0}, Shape{});
    expect_error(e, {"count", "float64", "int64"});
  }
  {
    auto e = good;
    e["fc1.bias"] = zeros({8}, {.dtype = DType::Float64});
    e.erase("scale");
    e["extra"] = zeros({1});
    expect_error(e, {"missing 'scale'", "unexpected 'extra'", "fc1.bias"});
  }
}

TEST_F(SerializeTest, MismatchedOptimizerFilesAreClearErrorsAndChangeNothing) {
  Net net;
  nn::SGD sgd(net.parameters(), {.lr = 0.1, .momentum = 0.9});
  train_step(net, sgd, 0);
  nn::save(sgd, path("sgd.rmt"));

  Net other;
  nn::Adam adam(other.parameters(), {.lr = 0.3});
  EXPECT_TRUE(throws_with([&] { nn::load(adam, path("sgd.rmt")); },
                          {path("sgd.rmt"), "optimizer Adam", "'SGD'", "unchanged"}));
  EXPECT_EQ(adam.lr(0), 0.3);
  EXPECT_EQ(adam.state(0, 0), nullptr);

  // An optimizer over parameters of other shapes.
  auto small = std::make_shared<nn::Linear>(4, 2);
  nn::SGD sgd_small(small->parameters(), {.lr = 0.2, .momentum = 0.9});
  EXPECT_TRUE(
      throws_with([&] { nn::load(sgd_small, path("sgd.rmt")); }, {path("sgd.rmt"), "parameter"}));
  EXPECT_EQ(sgd_small.lr(0), 0.2);

  // A module file is not an optimizer file.
  nn::save(net, path("net.rmt"));
  EXPECT_TRUE(throws_with(
      [&] { nn::load(sgd, path("net.rmt")); },
      {path("net.rmt"), "missing entry 'optimizer.SGD'", "not the state of an optimizer"}));
  EXPECT_EQ(sgd.lr(0), 0.1);
}

// A failed save, at any stage, leaves the previous file byte for byte and no temporary file.
TEST_F(SerializeTest, FailedSaveKeepsThePreviousFile) {
  Net net;
  const auto p = path("net.rmt");
  nn::save(net, p);
  const Bytes old = read_bytes(p);
  // Something different to save.
  Net changed;
  for (const auto& [stage, after] : std::vector<std::pair<std::string, std::size_t>>{
           {"open", 0}, {"write", 0}, {"write", 1}, {"fsync", 0}, {"rename", 0}}) {
    SCOPED_TRACE(stage);
    std::size_t calls = 0;
    nn::detail::set_save_fault_hook(
        [&, stage = stage, after = after](std::string_view s, std::size_t) {
          if (s == stage && calls++ == after)
            throw std::runtime_error("simulated failure at " + std::string(s));
        });
    EXPECT_TRUE(throws_with([&] { nn::save(changed, p); },
                            {p, "simulated failure at " + stage, "unchanged"}));
    nn::detail::set_save_fault_hook(nullptr);
    EXPECT_EQ(read_bytes(p), old);
    EXPECT_TRUE(others({"net.rmt"}).empty()) << others({"net.rmt"}).front();
    nn::load(net, p);  // still a good file
  }
  // Interrupted after every possible amount of data (chunks are 1 MiB, so use a big tensor).
  const std::map<std::string, Tensor> big{{"big", zeros({700'000})}};  // 2.8 MB: 3 chunks
  for (std::size_t after = 0; after < 3; ++after) {
    std::size_t calls = 0;
    std::size_t written = 0;
    nn::detail::set_save_fault_hook([&](std::string_view s, std::size_t bytes) {
      if (s == "write" && bytes >= (std::size_t{1} << 20) * after && calls++ == 0) {
        written = bytes;
        throw std::runtime_error("disk full");
      }
    });
    EXPECT_TRUE(throws_with([&] { nn::save_state(p, big); }, {"disk full"}));
    nn::detail::set_save_fault_hook(nullptr);
    EXPECT_GE(written, (std::size_t{1} << 20) * after);
    EXPECT_EQ(read_bytes(p), old);
    EXPECT_TRUE(others({"net.rmt"}).empty());
  }
  // Real failures: a directory that does not exist, and a target that is a directory.
  EXPECT_TRUE(throws_with([&] { nn::save(net, path("no/such/dir/net.rmt")); },
                          {"no/such/dir", "temporary file"}));
  fs::create_directory(dir_ / "taken");
  fs::create_directory(dir_ / "taken" / "inside");
  EXPECT_TRUE(throws_with([&] { nn::save(net, path("taken")); }, {"taken", "names a directory"}));
  EXPECT_TRUE(fs::is_directory(dir_ / "taken"));
  EXPECT_TRUE(others({"net.rmt", "taken"}).empty());
  // And a successful save does replace the file.
  nn::save(changed, p);
  EXPECT_NE(read_bytes(p), old);
  nn::load(net, p);
  EXPECT_TRUE(same_state(net, snapshot(changed)));
}

// A save killed mid-write leaves .NAME.tmp.PID.N behind; the next save of NAME removes those
// of processes that are gone, and keeps those of live ones (they may still be writing).
TEST_F(SerializeTest, NextSaveRemovesTemporariesOfDeadWriters) {
  Net net;
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  waitpid(dead, nullptr, 0);  // reaped: its PID names no process now
  const auto stale = dir_ / fmt::format(".net.rmt.tmp.{}.3", dead);
  const auto live = dir_ / fmt::format(".net.rmt.tmp.{}.0", ::getppid());
  const auto other = dir_ / fmt::format(".other.rmt.tmp.{}.0", dead);
  for (const auto& f : {stale, live, other}) write_bytes(f, Bytes(1000, 7));
  nn::save(net, path("net.rmt"));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));  // another target's temporaries are not this save's business
  fs::remove(live);
  fs::remove(other);
  EXPECT_TRUE(others({"net.rmt"}).empty());
}

TEST_F(SerializeTest, SavePathIsCheckedBeforeAnyWork) {
  nn::check_save_path(path("fine.rmt"));
  EXPECT_TRUE(others({}).empty());  // the probe leaves nothing behind
  EXPECT_TRUE(throws_with([&] { nn::check_save_path(path("no/such/dir/x.rmt")); },
                          {"cannot save to", "no/such/dir"}));
  EXPECT_TRUE(throws_with([&] { nn::check_save_path(dir_.string()); },
                          {"cannot save to", "names a directory"}));
}

TEST_F(SerializeTest, BadArgumentsToSave) {
  EXPECT_TRUE(throws_with(
      [&] {
        nn::save_state(path("x.rmt"), {{"", zeros({1})}});
      },
      {"names", "1 to 65535"}));
  EXPECT_TRUE(throws_with(
      [&] {
        nn::save_state(path("x.rmt"), {{"a", Tensor()}});
      },
      {"'a'", "undefined"}));
  EXPECT_TRUE(throws_with(
      [&] {
        nn::save_state(dir_.string() + "/", {{"a", zeros({1})}});
      },
      {"directory"}));
  EXPECT_TRUE(others({}).empty());
}

}  // namespace
}  // namespace remat
