// Files and zip archives of traces and logs; the line parser is parse.cpp.
#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>

#include <zip.h>

#include "core/error.h"
#include "sim/read.h"

namespace remat::sim {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REMAT_CHECK(in, "cannot open '{}' for reading", path);
  std::ostringstream text;
  text << in.rdbuf();
  REMAT_CHECK(!in.bad(), "error reading '{}'", path);
  return text.str();
}

std::vector<Program> read_zip(const std::string& path) {
  int err = 0;
  std::unique_ptr<zip_t, decltype(&zip_discard)> archive(zip_open(path.c_str(), ZIP_RDONLY, &err), &zip_discard);
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
    std::unique_ptr<zip_file_t, decltype(&zip_fclose)> file(zip_fopen_index(archive.get(), index, 0), &zip_fclose);
    REMAT_CHECK(file, "zip archive '{}': cannot open {}: {}", path, name, zip_strerror(archive.get()));
    std::string text(st.size, '\0');
    const zip_int64_t got = zip_fread(file.get(), text.data(), st.size);
    REMAT_CHECK(got >= 0 && static_cast<zip_uint64_t>(got) == st.size, "zip archive '{}': short read of {}", path, name);
    programs.push_back(parse_program(text, path + ":" + name));
  }
  return programs;
}

}  // namespace

std::vector<Program> read_programs(const std::string& path) {
  if (ends_with(path, ".zip")) return read_zip(path);
  std::vector<Program> one;
  one.push_back(parse_program(read_file(path), path));
  return one;
}

}  // namespace remat::sim
