// Reading traces and logs: names resolve through COPY, COPY_FROM and MUTATE, views share their
// input's storage, and every malformed line is an error naming the input and its line number.
#include <filesystem>
#include <fstream>

#include "sim/read.h"
#include "sim/replay.h"
#include "support/test_util.h"

namespace remat::sim {
namespace {

using testing::throws_with;

const char* kLog = R"({"INSTRUCTION":"CONSTANT","NAME":"x0"}
{"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}
{"INSTRUCTION":"CONSTANT","NAME":"x1"}
{"INSTRUCTION":"MEMORY","MEMORY":"400","NAME":"x1"}
{"ARGS":["x1"],"INSTRUCTION":"CALL","NAME":"relu","RESULT":["x2"],"TIME":"1000"}
{"INSTRUCTION":"MEMORY","MEMORY":"400","NAME":"x2"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"x2"}
{"ARGS":["x2"],"INSTRUCTION":"CALL","NAME":"view","RESULT":["x3"],"TIME":"10"}
{"INSTRUCTION":"MEMORY","MEMORY":"400","NAME":"x3"}
{"ALIAS":"0","INSTRUCTION":"ALIAS","NAME":"x3"}
{"DST":"x4","INSTRUCTION":"COPY","SRC":"x3"}
{"INSTRUCTION":"RELEASE","NAME":"x3"}
{"ARGS":["x4","x1"],"INSTRUCTION":"MUTATE","MUTATE":[0],"NAME":"add_","TIME":"500"}
{"INSTRUCTION":"RELEASE","NAME":"x2"}
)";

TEST(Parse, PrototypeLogStartsAfterStartAndResolvesNames) {
  const Program p = parse_program(kLog, "tiny.log");
  EXPECT_EQ(p.origin, Origin::PrototypeLog);
  // x0 comes before START: not part of the program.
  ASSERT_EQ(p.tensors.size(), 4u);  // x1, x2, x3, and the MUTATE's new x4
  ASSERT_EQ(p.events.size(), 7u);
  EXPECT_EQ(p.events[0].kind, EventKind::Constant);
  EXPECT_EQ(p.events[2].aliases, std::vector<std::int32_t>{0});
  EXPECT_EQ(p.events[3].kind, EventKind::Copy);
  EXPECT_EQ(p.events[3].source, 2u);  // x4 names x3's tensor
  const Event& m = p.events[5];
  EXPECT_EQ(m.kind, EventKind::Mutate);
  EXPECT_EQ(m.args, (std::vector<std::uint32_t>{2, 0}));
  ASSERT_EQ(m.mutated_results.size(), 1u);
  EXPECT_EQ(p.tensors[m.mutated_results[0]].bytes, 400u);  // the storage's size, the view's own
  EXPECT_DOUBLE_EQ(m.seconds, 500e-9);
  EXPECT_EQ(p.events[6].line, 14u);

  // Replay: relu's output is alive only through the view and its copy until the MUTATE, whose
  // new tensor stays referenced to the end; the view costs compute but no memory.
  ReplayOptions o;
  o.cost = CostModel::Unit;
  const ReplayResult r = replay(p, o);
  EXPECT_EQ(r.status, ReplayStatus::Ok);
  EXPECT_EQ(r.compute, 3.0);       // relu, view, add_
  EXPECT_EQ(r.peak_bytes, 1200u);  // x1, relu's output, add_'s output
}

TEST(Parse, ReadsAPlainFile) {
  const std::string path = testing::unique_temp_path("remat_parse_test", ".log");
  std::ofstream(path) << kLog;
  const auto programs = read_programs(path);
  std::filesystem::remove(path);
  ASSERT_EQ(programs.size(), 1u);
  EXPECT_EQ(programs[0].source, path);
  EXPECT_EQ(programs[0].events.size(), 7u);
  EXPECT_TRUE(
      throws_with([] { read_programs("/nonexistent/remat.log"); }, {"/nonexistent/remat.log"}));
}

std::string start() {
  return "{\"INSTRUCTION\":\"ANNOTATE\",\"ANNOTATION\":\"START\"}\n";
}
std::string constant(const char* name) {
  return fmt::format(
      "{{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"{0}\"}}\n{{\"INSTRUCTION\":\"MEMORY\",\"NAME\":\"{"
      "0}\",\"MEMORY\":\"64\"}}\n",
      name);
}

TEST(Parse, MalformedLinesNameTheirLine) {
  auto fails = [](const std::string& text, std::vector<std::string> fragments) {
    return throws_with([&] { parse_program(text, "bad.log"); }, std::move(fragments));
  };
  EXPECT_TRUE(fails(start() + "{\"INSTRUCTION\":\"CALL\",\n", {"bad.log:2", "not valid JSON"}));
  EXPECT_TRUE(fails(start() + "[1,2]\n", {"bad.log:2", "JSON object"}));
  EXPECT_TRUE(
      fails(start() + "{\"INSTRUCTION\":\"FROB\"}\n", {"bad.log:2", "unknown INSTRUCTION 'FROB'"}));
  EXPECT_TRUE(fails(start() + "{\"NAME\":\"x1\"}\n", {"bad.log:2", "no field INSTRUCTION"}));
  EXPECT_TRUE(fails(start() + constant("x1") +
                        R"({"INSTRUCTION":"CALL","NAME":"relu","ARGS":["x1"],"TIME":"5"})"
                        "\n",
                    {"bad.log:4", "CALL has no field RESULT"}));
  EXPECT_TRUE(
      fails(start() + constant("x1") +
                R"({"INSTRUCTION":"CALL","NAME":"relu","ARGS":["x9"],"RESULT":["x2"],"TIME":"5"})"
                "\n",
            {"bad.log:4", "unknown tensor x9"}));
  EXPECT_TRUE(fails(start() +
                        R"({"INSTRUCTION":"MEMORY","NAME":"x1","MEMORY":"64"})"
                        "\n" +
                        constant("x1"),
                    {"bad.log:2", "MEMORY line for x1 does not follow"}));
  EXPECT_TRUE(fails(start() + "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"x1\"}\n" + constant("x2"),
                    {"bad.log:3", "expected the MEMORY line of CONSTANT x1"}));
  EXPECT_TRUE(fails(start() + constant("x1") +
                        R"({"INSTRUCTION":"RELEASE","NAME":"x1"})"
                        "\n" +
                        R"({"INSTRUCTION":"RELEASE","NAME":"x1"})"
                        "\n",
                    {"bad.log:5", "x1 is used after its last release"}));
  EXPECT_TRUE(fails(start() + constant("x1") +
                        R"({"INSTRUCTION":"MEMORY","NAME":"x1","MEMORY":"-4"})"
                        "\n",
                    {"bad.log:4", "MEMORY"}));
  EXPECT_TRUE(
      fails(start() + constant("x1") +
                R"({"INSTRUCTION":"CALL","NAME":"v","ARGS":["x1"],"RESULT":["x2"],"TIME":"5"})"
                "\n" +
                R"({"INSTRUCTION":"MEMORY","NAME":"x2","MEMORY":"64"})"
                "\n" +
                R"({"INSTRUCTION":"ALIAS","NAME":"x2","ALIAS":"3"})"
                "\n",
            {"bad.log:6", "ALIAS 3 of x2"}));
  EXPECT_TRUE(fails(
      start() + constant("x1") +
          R"({"INSTRUCTION":"CALL","NAME":"relu","ARGS":["x1"],"RESULT":["x2"],"TIME":"fast"})"
          "\n",
      {"bad.log:4", "field TIME must be a number"}));
}

// Sizes and indices are whole numbers in range before they become integers: a size no machine
// has, a negative or fractional index, or a field of the wrong JSON type is an error naming the
// line, never a cast (UBSan) or a library exception that ends the program.
TEST(Parse, NumbersMustBeWholeAndInRange) {
  auto fails = [](const std::string& text, std::vector<std::string> fragments) {
    return throws_with([&] { parse_program(text, "bad.log"); }, std::move(fragments));
  };
  const std::string x1 = start() + constant("x1");
  EXPECT_TRUE(fails(start() +
                        R"({"INSTRUCTION":"CONSTANT","NAME":"x1"})"
                        "\n" +
                        R"({"INSTRUCTION":"MEMORY","NAME":"x1","MEMORY":"1e300"})"
                        "\n",
                    {"bad.log:3", "field MEMORY must be a whole number from 0 to"}));
  EXPECT_TRUE(fails(start() +
                        R"({"INSTRUCTION":"CONSTANT","NAME":"x1"})"
                        "\n" +
                        R"({"INSTRUCTION":"MEMORY","NAME":"x1","MEMORY":12.5})"
                        "\n",
                    {"bad.log:3", "whole number"}));
  // Each size is possible, but together they exceed what any machine holds.
  std::string many = start();
  for (int i = 0; i < 1100; ++i)
    many += fmt::format(
        "{{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"c{0}\"}}\n"
        "{{\"INSTRUCTION\":\"MEMORY\",\"NAME\":\"c{0}\",\"MEMORY\":\"1125899906842624\"}}\n",
        i);
  EXPECT_TRUE(fails(many, {"total more than 2^60 bytes"}));
  const std::string mutate =
      R"({"INSTRUCTION":"MUTATE","NAME":"add_","ARGS":["x1"],"TIME":"5","MUTATE":[)";
  EXPECT_TRUE(fails(x1 + mutate + "-1]}\n",
                    {"bad.log:4", "field MUTATE must be a whole number from 0 to 0, got -1"}));
  EXPECT_TRUE(fails(x1 + mutate + "0.7]}\n", {"bad.log:4", "got 0.7"}));
  EXPECT_TRUE(fails(x1 + mutate + "1]}\n", {"bad.log:4", "from 0 to 0, got 1"}));
  EXPECT_TRUE(fails(R"({"INSTRUCTION":"ANNOTATE","ANNOTATION":"START","SOURCE":[1]})"
                    "\n",
                    {"bad.log:1", "field SOURCE must be a string"}));
  EXPECT_TRUE(fails(R"({"INSTRUCTION":"ANNOTATE","ANNOTATION":7})"
                    "\n",
                    {"bad.log:1", "field ANNOTATION must be a string"}));
  EXPECT_TRUE(fails(start() + R"({"INSTRUCTION":"MEMORY","NAME":[2],"MEMORY":"64"})"
                              "\n",
                    {"bad.log:2", "MEMORY line for ?"}));
}

TEST(Read, DirectoriesEmptyFilesAndLyingZipMembersAreNamedErrors) {
  const std::string dir = testing::unique_temp_path("remat_read_dir", "");
  std::filesystem::create_directories(dir);
  EXPECT_TRUE(throws_with([&] { read_programs(dir); }, {dir, "not a regular file"}));
  const std::string empty = dir + "/empty.log";
  std::ofstream(empty).close();
  EXPECT_TRUE(throws_with([&] { read_programs(empty); }, {empty, "holds no events"}));
  // A zip whose one member claims 4 GiB but holds 5 stored bytes: refused or cut short at once,
  // never allocated.  Built by hand: local header, data, central directory, end record.
  auto le = [](std::string& out, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(static_cast<char>(v >> (8 * i) & 0xff));
  };
  auto zip_with_size = [&](std::uint32_t claimed) {
    const std::string name = "a.log", data = "hello";
    std::string local, central, z;
    le(local, 0x04034b50, 4);
    le(local, 20, 2);
    le(local, 0, 2);
    le(local, 0, 2);
    le(local, 0, 4);
    le(local, 0, 4);
    le(local, claimed, 4);
    le(local, claimed, 4);
    le(local, name.size(), 2);
    le(local, 0, 2);
    local += name + data;
    le(central, 0x02014b50, 4);
    le(central, 20, 2);
    le(central, 20, 2);
    le(central, 0, 2);
    le(central, 0, 2);
    le(central, 0, 4);
    le(central, 0, 4);
    le(central, claimed, 4);
    le(central, claimed, 4);
    le(central, name.size(), 2);
    le(central, 0, 2);
    le(central, 0, 2);
    le(central, 0, 2);
    le(central, 0, 2);
    le(central, 0, 4);
    le(central, 0, 4);
    central += name;
    z = local + central;
    le(z, 0x06054b50, 4);
    le(z, 0, 2);
    le(z, 0, 2);
    le(z, 1, 2);
    le(z, 1, 2);
    le(z, central.size(), 4);
    le(z, local.size(), 4);
    le(z, 0, 2);
    return z;
  };
  const std::string big = dir + "/big.zip", small = dir + "/small.zip";
  std::ofstream(big, std::ios::binary) << zip_with_size(0xffffff00u);
  std::ofstream(small, std::ios::binary) << zip_with_size(1u << 20);
  EXPECT_TRUE(
      throws_with([&] { read_programs(big); }, {big, "a.log", "more than the 1073741824 bytes"}));
  EXPECT_TRUE(throws_with([&] { read_programs(small); }, {small, "a.log"}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace remat::sim
