// ListOps (Nangia and Bowman, 2018): nested prefix expressions such as `[MAX 2 9 [MIN 4 7 ] 0 ]`
// whose value, 0..9, is a 10-class label; a seeded generator, a parser into post-order trees for
// a TreeLSTM, and fixed train/validation/test splits that share no expression.
// Usage: auto train = listops::make_split(listops::Split::Train, 100000);
//        int y = listops::evaluate(listops::parse("[SM 9 9 9 ]"));  // 7
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace remat::listops {

// Token ids: 0..9 are the digits themselves, then the four operators.
inline constexpr int kMax = 10;  // [MAX
inline constexpr int kMin = 11;  // [MIN
// The median as the original generator takes it, int(np.median(args)): the middle value of an
// odd count; of an even count, the mean of the two middle values truncated (the values are never
// negative, so rounded down): [MED 1 2 3 4 ] is 2, [MED 1 2 4 4 ] is 3, [MED 0 9 ] is 4.
inline constexpr int kMedian = 12;  // [MED
inline constexpr int kSumMod = 13;  // [SM: the sum modulo 10
inline constexpr int kVocabulary = 14;
inline constexpr int kClasses = 10;  // values, and so labels, are 0..9

// The text of a token id: "0".."9", "[MAX", "[MIN", "[MED", "[SM".
std::string_view token_text(int token);

// Nodes in post-order: every child comes before its parent, and the root is the last node. A
// list node's token is its operator and its children are its arguments, in order; a digit is a
// leaf with no children.
struct Tree {
  std::vector<int> token;
  std::vector<std::vector<int>> children;

  int size() const { return static_cast<int>(token.size()); }
  int root() const { return size() - 1; }
};

// Text is tokens separated by single spaces, with no space before the first or after the last:
// digits, "[MAX", "[MIN", "[MED", "[SM" (which open a list) and "]" (which closes one). The root
// must be a list and every list needs at least 2 arguments. Anything else is an Error naming
// the 0-based character position and the problem.
Tree parse(std::string_view text);

// These three check that `tree` is well formed (a single digit is a valid tree here, though
// parse only returns lists), throwing an Error otherwise.
int evaluate(const Tree& tree);
// The canonical text: parse(to_text(tree)) gives back `tree` for every tree parse returns.
std::string to_text(const Tree& tree);
// A digit alone has depth 0, [MAX 1 2 ] depth 1, [MAX 1 [MIN 2 3 ] ] depth 2.
int depth(const Tree& tree);

// splitmix64 (Steele, Lea and Flood, 2014): the same numbers on every platform and standard
// library, unlike std::uniform_int_distribution.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  // Uniform in [0, n) for 0 < n <= 2^31 - 1 (multiply-shift: bias below n / 2^32).
  int below(int n);
  // Uniform in [0, 1), 53 random bits.
  double uniform();

 private:
  std::uint64_t state_;
};

struct GeneratorOptions {
  int max_depth = 5;  // as depth() counts, >= 1
  int max_args = 5;   // arguments per list, drawn uniformly from 2..max_args
  // Tokens of the text, "[MAX" and "]" one each; >= 4 (the shortest list is [MAX 1 2 ]).
  int max_length = 100;
  // The chance that an argument is itself a list, while max_depth allows; the root is always a
  // list. 0.25 is the original generator's.
  double branch_probability = 0.25;
};

// One random expression: an operator drawn uniformly from the four, then the arguments, each a
// list with probability branch_probability (while the depth allows) or else a uniform digit;
// expressions longer than max_length tokens are drawn again. Advances `rng`. Options out of range,
// or 1,000,000 draws in a row too long (options whose shortest expression is over max_length,
// such as branch_probability 1 with a deep max_depth), are an Error.
std::string generate(Rng& rng, const GeneratorOptions& options = {});

struct Example {
  std::string text;
  Tree tree;
  int label = 0;  // evaluate(tree)
};

enum class Split { Train, Validation, Test };

// `count` examples of a split, each split drawn from its own fixed seed, so the first n of a
// split are the same for every count >= n. Every expression text belongs to exactly one split,
// fixed by a hash of the text (Test 10%, Validation 10%, Train 80% of the hash values), so no
// text of one split is in another, whatever the counts and options. Within a split texts may
// repeat, as often as the generator draws them.
std::vector<Example> make_split(Split split, std::size_t count,
                                const GeneratorOptions& options = {});

// How many examples have each label.
std::array<std::size_t, kClasses> label_counts(const std::vector<Example>& examples);

}  // namespace remat::listops
