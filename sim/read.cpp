// Files and zip archives of traces and logs; the line parser is parse.cpp.
#include "sim/read.h"

#include <zip.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "core/error.h"

namespace remat::sim {
namespace {

// A member or file larger than this is refused before it is read: the prototype's largest log
// is 2.8 MB, and a size field cannot make the reader allocate more than it really reads.
constexpr std::uint64_t kMaxInputBytes = std::uint64_t{1} << 30;  // 1 GiB
constexpr std::size_t kChunk = std::size_t{1} << 20;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  REMAT_CHECK(std::filesystem::exists(path, ec), "'{}': no such file", path);
  REMAT_CHECK(std::filesystem::is_regular_file(path, ec),
              "'{}' is not a regular file (a directory?); give a trace, "
              "a log or a .zip of logs",
              path);
  const auto size = std::filesystem::file_size(path, ec);
  REMAT_CHECK(!ec && size <= kMaxInputBytes,
              "'{}': {} bytes, more than the {} bytes a trace or log may have", path, size,
              kMaxInputBytes);
  std::ifstream in(path, std::ios::binary);
  REMAT_CHECK(in, "cannot open '{}' for reading", path);
  std::ostringstream text;
  text << in.rdbuf();
  REMAT_CHECK(!in.bad(), "error reading '{}'", path);
  return text.str();
}

std::vector<Program> read_zip(const std::string& path) {
  int err = 0;
  std::unique_ptr<zip_t, decltype(&zip_discard)> archive(zip_open(path.c_str(), ZIP_RDONLY, &err),
                                                         &zip_discard);
  if (!archive) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, err);
    const std::string why = zip_error_strerror(&ze);
    zip_error_fini(&ze);
    REMAT_THROW("cannot open zip archive '{}': {}", path, why);
  }
  std::vector<std::pair<std::string, zip_uint64_t>> members;
  const zip_int64_t n = zip_get_num_entries(archive.get(), 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    const char* name = zip_get_name(archive.get(), static_cast<zip_uint64_t>(i), 0);
    if (name && ends_with(name, ".log")) members.emplace_back(name, static_cast<zip_uint64_t>(i));
  }
  REMAT_CHECK(!members.empty(), "zip archive '{}' holds no *.log member", path);
  std::sort(members.begin(), members.end());
  std::vector<Program> programs;
  for (const auto& [name, index] : members) {
    zip_stat_t st;
    REMAT_CHECK(zip_stat_index(archive.get(), index, 0, &st) == 0 && (st.valid & ZIP_STAT_SIZE),
                "zip archive '{}': cannot read the size of {}", path, name);
    std::unique_ptr<zip_file_t, decltype(&zip_fclose)> file(
        zip_fopen_index(archive.get(), index, 0), &zip_fclose);
    REMAT_CHECK(file, "zip archive '{}': cannot open {}: {}", path, name,
                zip_strerror(archive.get()));
    REMAT_CHECK(st.size <= kMaxInputBytes,
                "zip archive '{}': member {} claims {} bytes, more than the {} bytes a "
                "log may have",
                path, name, st.size, kMaxInputBytes);
    // Grown as bytes arrive, so a member that claims more than it holds allocates only what it
    // holds.
    std::string text;
    while (text.size() < st.size) {
      const std::size_t have = text.size();
      const std::size_t want =
          static_cast<std::size_t>(std::min<zip_uint64_t>(st.size - have, kChunk));
      text.resize(have + want);
      const zip_int64_t got = zip_fread(file.get(), text.data() + have, want);
      REMAT_CHECK(got >= 0, "zip archive '{}': cannot read {}: {}", path, name,
                  zip_file_strerror(file.get()));
      text.resize(have + static_cast<std::size_t>(got));
      if (static_cast<std::size_t>(got) < want) break;
    }
    REMAT_CHECK(text.size() == st.size,
                "zip archive '{}': short read of {} ({} of the {} bytes it claims)", path, name,
                text.size(), st.size);
    programs.push_back(parse_program(text, path + ":" + name));
  }
  return programs;
}

}  // namespace

std::vector<Program> read_programs(const std::string& path) {
  std::vector<Program> programs;
  if (ends_with(path, ".zip"))
    programs = read_zip(path);
  else
    programs.push_back(parse_program(read_file(path), path));
  for (const Program& p : programs)
    REMAT_CHECK(!p.events.empty(),
                "'{}' holds no events (an empty file, or nothing after its START annotation)",
                p.source);
  return programs;
}

}  // namespace remat::sim
