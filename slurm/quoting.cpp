// Shell and sbatch quoting for generated scripts (see quoting.h).
#include "slurm/quoting.h"
#include "runtime/core/error.h"

#include <cctype>


namespace dlscale {

std::string shell_quote(std::string_view value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string sbatch_quote(std::string_view value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string slurm_filename(std::string_view path) {
  std::string out;
  for (char c : path) {
    out += c;
    if (c == '%') out += '%';
  }
  return out;
}

void require_printable(std::string_view value, std::string_view what) {
  for (char c : value)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      throw UsageError(std::string(what) + " contains a control character (newline, tab, ...): not allowed in a job script");
}

std::string shell_path_expression(std::string_view value, std::string_view what) {
  require_printable(value, what);
  if (value.empty() || value[0] != '$') return shell_quote(value);
  std::size_t begin = 1, end = 0, rest = 0;
  if (value.size() > 1 && value[1] == '{') {
    begin = 2;
    end = value.find('}');
    if (end == std::string_view::npos) throw UsageError(std::string(what) + " " + std::string(value) + ": missing '}'");
    rest = end + 1;
  } else {
    end = begin;
    while (end < value.size() && (std::isalnum(static_cast<unsigned char>(value[end])) || value[end] == '_')) ++end;
    rest = end;
  }
  std::string_view name = value.substr(begin, end - begin);
  bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ok)
    throw UsageError(std::string(what) + " " + std::string(value) +
                     ": only a leading environment variable ($NAME or ${NAME}) is expanded");
  std::string out = "\"${" + std::string(name) + "}\"";
  if (rest < value.size()) out += shell_quote(value.substr(rest));
  return out;
}

std::string safe_file_name(std::string_view name) {
  std::string out;
  for (char c : name) {
    bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    char x = keep ? c : '_';
    if (x == '_' && !out.empty() && out.back() == '_') continue;
    out += x;
  }
  while (!out.empty() && (out.front() == '_' || out.front() == '.' || out.front() == '-')) out.erase(0, 1);
  while (!out.empty() && out.back() == '_') out.pop_back();
  if (out.size() > 60) out.resize(60);
  return out.empty() ? "job" : out;
}

}  // namespace dlscale
