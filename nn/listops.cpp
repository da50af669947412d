#include "nn/listops.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace remat::listops {
namespace {

constexpr std::string_view kTokenText[kVocabulary] = {"0", "1", "2", "3",    "4",    "5",    "6",
                                                      "7", "8", "9", "[MAX", "[MIN", "[MED", "[SM"};
constexpr std::string_view kClose = "]";
constexpr int kOperators = kVocabulary - kClasses;

// Texts up to this long are quoted in parse errors; longer ones only by position.
constexpr std::size_t kQuoteLimit = 120;
// Consecutive draws rejected (too long, or of another split) before giving up: only options
// that make the wanted expressions vanishingly rare get near it.
constexpr std::size_t kMaxAttempts = 1'000'000;

constexpr std::uint64_t kTestSeed = 0x4c6973744f707301;  // "ListOps" and the split
constexpr std::uint64_t kValidationSeed = 0x4c6973744f707302;
constexpr std::uint64_t kTrainSeed = 0x4c6973744f707303;

bool is_digit(int token) {
  return token >= 0 && token < kClasses;
}

int token_of(std::string_view text) {
  if (text.size() == 1 && text[0] >= '0' && text[0] <= '9') return text[0] - '0';
  for (int op = kClasses; op < kVocabulary; ++op)
    if (text == kTokenText[op]) return op;
  return -1;
}

// Tokens quoted in errors are cut short so a run of garbage cannot flood the message.
std::string_view clipped(std::string_view token) {
  return token.substr(0, 24);
}

template <typename... Args>
[[noreturn]] void parse_error(std::string_view text, std::size_t pos,
                              fmt::format_string<Args...> what, Args&&... args) {
  const std::string message = fmt::format(what, std::forward<Args>(args)...);
  if (text.size() <= kQuoteLimit)
    REMAT_THROW("listops::parse: at character {}: {} (in {:?})", pos, message, text);
  REMAT_THROW("listops::parse: at character {}: {}", pos, message);
}

int apply(int op, std::vector<int>& args) {
  switch (op) {
    case kMax:
      return *std::max_element(args.begin(), args.end());
    case kMin:
      return *std::min_element(args.begin(), args.end());
    case kMedian: {
      std::sort(args.begin(), args.end());
      const std::size_t m = args.size() / 2;
      return args.size() % 2 ? args[m] : (args[m - 1] + args[m]) / 2;
    }
    default: {
      int sum = 0;
      for (int a : args) sum += a;
      return sum % 10;
    }
  }
}

int evaluate_unchecked(const Tree& tree) {
  std::vector<int> value(tree.token.size());
  std::vector<int> args;
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (tree.children[i].empty()) {
      value[i] = tree.token[i];
      continue;
    }
    args.clear();
    for (int c : tree.children[i]) args.push_back(value[c]);
    value[i] = apply(tree.token[i], args);
  }
  return value.back();
}

void append_token(std::string& out, std::string_view token) {
  if (!out.empty()) out += ' ';
  out += token;
}

// Iterative, so a deeply nested parsed tree cannot overflow the stack.
std::string to_text_unchecked(const Tree& tree) {
  std::string out;
  out.reserve(tree.token.size() * 3);
  struct Frame {
    int node;
    std::size_t next;
  };
  std::vector<Frame> stack;
  const int root = tree.root();
  append_token(out, kTokenText[tree.token[root]]);
  if (!tree.children[root].empty()) stack.push_back({root, 0});
  while (!stack.empty()) {
    Frame& top = stack.back();
    const auto& kids = tree.children[top.node];
    if (top.next == kids.size()) {
      append_token(out, kClose);
      stack.pop_back();
      continue;
    }
    const int child = kids[top.next++];
    append_token(out, kTokenText[tree.token[child]]);
    if (!tree.children[child].empty()) stack.push_back({child, 0});
  }
  return out;
}

void check_tree(const Tree& tree, const char* op) {
  const std::size_t n = tree.token.size();
  REMAT_CHECK(n > 0, "listops::{}: the tree has no nodes", op);
  REMAT_CHECK(tree.children.size() == n, "listops::{}: {} tokens but {} children lists", op, n,
              tree.children.size());
  std::vector<char> has_parent(n, 0);
  std::size_t edges = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const int t = tree.token[i];
    const auto& kids = tree.children[i];
    REMAT_CHECK(t >= 0 && t < kVocabulary, "listops::{}: node {} has token {}, outside 0..{}", op,
                i, t, kVocabulary - 1);
    if (is_digit(t)) {
      REMAT_CHECK(kids.empty(), "listops::{}: node {} is the digit {} but has {} children", op, i,
                  t, kids.size());
      continue;
    }
    REMAT_CHECK(kids.size() >= 2, "listops::{}: node {} ({}) has {} arguments; a list needs >= 2",
                op, i, kTokenText[t], kids.size());
    for (int c : kids) {
      REMAT_CHECK(c >= 0 && static_cast<std::size_t>(c) < i,
                  "listops::{}: node {} has child {}; children must come before their parent "
                  "(post-order)",
                  op, i, c);
      REMAT_CHECK(!has_parent[c], "listops::{}: node {} is a child twice", op, c);
      has_parent[c] = 1;
    }
    edges += kids.size();
  }
  // n - 1 distinct children, each before its parent (so never the last node): every node but
  // the last has exactly one parent, and the last is the root of a single tree.
  REMAT_CHECK(edges == n - 1,
              "listops::{}: {} nodes but {} parent-child links; a tree has {} (is the root the "
              "last node?)",
              op, n, edges, n - 1);
}

void check_options(const GeneratorOptions& o, const char* op) {
  REMAT_CHECK(o.max_depth >= 1, "listops::{}: max_depth must be >= 1, got {}", op, o.max_depth);
  REMAT_CHECK(o.max_args >= 2, "listops::{}: max_args must be >= 2, got {}", op, o.max_args);
  REMAT_CHECK(o.max_length >= 4,
              "listops::{}: max_length must be >= 4 (the shortest list is [MAX 1 2 ]), got {}", op,
              o.max_length);
  REMAT_CHECK(o.branch_probability >= 0 && o.branch_probability <= 1,
              "listops::{}: branch_probability must be in [0, 1], got {}", op,
              o.branch_probability);
}

// Builds one expression in post-order, giving up as soon as it has more than max_length tokens
// (the rejection would come anyway, and this bounds the work of one draw by max_length).
class Builder {
 public:
  Builder(Rng& rng, const GeneratorOptions& options) : rng_(rng), o_(options) {}

  bool draw(Tree& tree) {
    tree.token.clear();
    tree.children.clear();
    tokens_ = 0;
    return list(tree, 1);
  }

 private:
  // A list at nesting level `level` (the root is 1).
  bool list(Tree& tree, int level) {
    const int op = kClasses + rng_.below(kOperators);
    const int n = 2 + rng_.below(o_.max_args - 1);
    tokens_ += 2;  // the operator and the closing "]"
    if (tokens_ > o_.max_length) return false;
    std::vector<int> args;
    args.reserve(n);
    for (int k = 0; k < n; ++k) {
      if (level < o_.max_depth && rng_.uniform() < o_.branch_probability) {
        if (!list(tree, level + 1)) return false;
      } else {
        if (++tokens_ > o_.max_length) return false;
        tree.token.push_back(rng_.below(kClasses));
        tree.children.emplace_back();
      }
      args.push_back(tree.root());
    }
    tree.token.push_back(op);
    tree.children.push_back(std::move(args));
    return true;
  }

  Rng& rng_;
  const GeneratorOptions& o_;
  long long tokens_ = 0;
};

Tree draw(Rng& rng, const GeneratorOptions& options, const char* op) {
  Builder builder(rng, options);
  Tree tree;
  for (std::size_t attempt = 0; attempt < kMaxAttempts; ++attempt)
    if (builder.draw(tree)) return tree;
  REMAT_THROW(
      "listops::{}: no expression of at most max_length = {} tokens in {} draws (max_depth {}, "
      "max_args {}, branch_probability {}); raise max_length or lower branch_probability",
      op, options.max_length, kMaxAttempts, options.max_depth, options.max_args,
      options.branch_probability);
}

// FNV-1a, then the splitmix64 finaliser so that every bit of the hash depends on every byte.
std::uint64_t hash_text(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9;
  h = (h ^ (h >> 27)) * 0x94d049bb133111eb;
  return h ^ (h >> 31);
}

Split split_of(std::string_view text) {
  switch (hash_text(text) % 10) {
    case 0:
      return Split::Test;
    case 1:
      return Split::Validation;
    default:
      return Split::Train;
  }
}

const char* split_name(Split split) {
  switch (split) {
    case Split::Train:
      return "train";
    case Split::Validation:
      return "validation";
    default:
      return "test";
  }
}

}  // namespace

std::string_view token_text(int token) {
  REMAT_CHECK(token >= 0 && token < kVocabulary, "listops::token_text: token {} is outside 0..{}",
              token, kVocabulary - 1);
  return kTokenText[token];
}

Tree parse(std::string_view text) {
  REMAT_CHECK(!text.empty(),
              "listops::parse: at character 0: empty input; expected a list such as [MAX 2 9 ]");
  struct Open {
    int op;
    std::size_t pos;
    std::vector<int> args;
  };
  std::vector<Open> open;  // the lists not yet closed, innermost last
  Tree tree;
  constexpr std::size_t kNotYet = std::string_view::npos;
  std::size_t root_closed = kNotYet;  // the position of the root's "]"
  std::size_t i = 0;                  // the start of the current word
  while (true) {
    if (text[i] == ' ') {
      if (i == 0) parse_error(text, i, "leading space");
      parse_error(text, i, "two spaces in a row (tokens are separated by single spaces)");
    }
    const std::size_t end = std::min(text.find(' ', i), text.size());
    const std::string_view word = text.substr(i, end - i);
    const bool close = word == kClose;
    if (root_closed != kNotYet) {
      if (close)
        parse_error(text, i, "extra ']': the root list closed at character {}", root_closed);
      parse_error(text, i, "trailing token {:?} after the root list closed at character {}",
                  clipped(word), root_closed);
    }
    if (close) {
      if (open.empty()) parse_error(text, i, "extra ']': it closes no list");
      Open& list = open.back();
      if (list.args.size() < 2)
        parse_error(text, i,
                    "']' closes the {} list opened at character {} after {} argument{}; every "
                    "list needs at least 2",
                    kTokenText[list.op], list.pos, list.args.size(),
                    list.args.size() == 1 ? "" : "s");
      tree.token.push_back(list.op);
      tree.children.push_back(std::move(list.args));
      open.pop_back();
      if (open.empty())
        root_closed = i;
      else
        open.back().args.push_back(tree.root());
    } else {
      const int t = token_of(word);
      if (t < 0)
        parse_error(text, i,
                    "unknown token {:?} (expected a digit 0-9, [MAX, [MIN, [MED, [SM or ])",
                    clipped(word));
      if (!is_digit(t)) {
        open.push_back({t, i, {}});
      } else {
        if (open.empty())
          parse_error(text, i, "the root must be a list such as [MAX 2 9 ], not the bare digit {}",
                      t);
        tree.token.push_back(t);
        tree.children.emplace_back();
        open.back().args.push_back(tree.root());
      }
    }
    if (end == text.size()) break;
    i = end + 1;
    if (i == text.size()) parse_error(text, end, "trailing space");
  }
  if (!open.empty())
    parse_error(text, text.size(),
                "missing ']': the input ends with {} list{} open, the innermost the {} opened at "
                "character {}",
                open.size(), open.size() == 1 ? "" : "s", kTokenText[open.back().op],
                open.back().pos);
  return tree;
}

int evaluate(const Tree& tree) {
  check_tree(tree, "evaluate");
  return evaluate_unchecked(tree);
}

std::string to_text(const Tree& tree) {
  check_tree(tree, "to_text");
  return to_text_unchecked(tree);
}

int depth(const Tree& tree) {
  check_tree(tree, "depth");
  std::vector<int> d(tree.token.size());
  for (std::size_t i = 0; i < d.size(); ++i)
    for (int c : tree.children[i]) d[i] = std::max(d[i], d[c] + 1);
  return d.back();
}

std::uint64_t Rng::next() {
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  return z ^ (z >> 31);
}

int Rng::below(int n) {
  REMAT_CHECK(n > 0, "listops::Rng::below: n must be positive, got {}", n);
  return static_cast<int>(((next() >> 32) * static_cast<std::uint64_t>(n)) >> 32);
}

double Rng::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

std::string generate(Rng& rng, const GeneratorOptions& options) {
  check_options(options, "generate");
  return to_text_unchecked(draw(rng, options, "generate"));
}

std::vector<Example> make_split(Split split, std::size_t count, const GeneratorOptions& options) {
  check_options(options, "make_split");
  Rng rng(split == Split::Train        ? kTrainSeed
          : split == Split::Validation ? kValidationSeed
                                       : kTestSeed);
  std::vector<Example> out;
  out.reserve(count);
  std::size_t misses = 0;
  while (out.size() < count) {
    Tree tree = draw(rng, options, "make_split");
    std::string text = to_text_unchecked(tree);
    if (split_of(text) != split) {
      REMAT_CHECK(++misses < kMaxAttempts,
                  "listops::make_split: {} draws in a row and none belongs to the {} split; the "
                  "options allow too few distinct expressions",
                  misses, split_name(split));
      continue;
    }
    misses = 0;
    const int label = evaluate_unchecked(tree);
    out.push_back({std::move(text), std::move(tree), label});
  }
  return out;
}

std::array<std::size_t, kClasses> label_counts(const std::vector<Example>& examples) {
  std::array<std::size_t, kClasses> counts{};
  for (const Example& e : examples) {
    REMAT_CHECK(e.label >= 0 && e.label < kClasses, "listops::label_counts: label {} outside 0..9",
                e.label);
    ++counts[e.label];
  }
  return counts;
}

}  // namespace remat::listops
