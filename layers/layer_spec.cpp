// Parsing and checked attribute access for model-spec layer lines.
#include "layers/layer_spec.h"

#include <charconv>
#include <sstream>

namespace dlscale {

LayerSpec LayerSpec::parse(const std::string& text, const std::string& where) {
  LayerSpec spec;
  spec.text_ = text;
  spec.where_ = where;
  std::istringstream in(text);
  std::string token;
  while (in >> token) {
    if (spec.kind_.empty()) {
      spec.kind_ = token;
      continue;
    }
    auto eq = token.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == token.size())
      fail(where + ": '" + token + "' in \"" + text + "\" is not of the form key=value");
    auto key = token.substr(0, eq);
    if (spec.attrs_.count(key)) fail(where + ": attribute '" + key + "' given twice in \"" + text + "\"");
    spec.attrs_[key] = token.substr(eq + 1);
  }
  if (spec.kind_.empty()) fail(where + ": empty layer line");
  return spec;
}

void LayerSpec::fail_here(const std::string& message) const { fail(where_ + ": " + kind_ + ": " + message); }

const std::string& LayerSpec::raw(const std::string& key) const {
  used_.insert(key);
  return attrs_.at(key);
}

std::int64_t LayerSpec::get_int(const std::string& key) const {
  if (!has(key)) fail_here("missing attribute '" + key + "' in \"" + text_ + "\"");
  const auto& v = raw(key);
  std::int64_t out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || end != v.data() + v.size())
    fail_here("attribute " + key + "=" + v + " is not an integer");
  return out;
}

std::int64_t LayerSpec::get_int(const std::string& key, std::int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}

double LayerSpec::get_double(const std::string& key, double fallback) const {
  if (!has(key)) return fallback;
  const auto& v = raw(key);
  try {
    std::size_t used = 0;
    double out = std::stod(v, &used);
    if (used == v.size()) return out;
  } catch (const std::exception&) {
  }
  fail_here("attribute " + key + "=" + v + " is not a number");
}

std::string LayerSpec::get_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? raw(key) : fallback;
}

bool LayerSpec::get_bool(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const auto& v = raw(key);
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  fail_here("attribute " + key + "=" + v + " is not true or false");
}

void check_layer_size(const LayerSpec& spec, const LayerContext& ctx, const std::string& what, const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > ctx.max_elements)
      spec.fail_here(what + " " + to_string(shape) + " would exceed " + std::to_string(ctx.max_elements) +
                     " elements (the most one layer may have): is a size in \"" + spec.text() + "\" a typo?");
}

void check_layer_value(const LayerSpec& spec, const LayerContext& ctx, const std::string& key, std::int64_t value) {
  if (value > ctx.max_elements)
    spec.fail_here(key + "=" + std::to_string(value) + " is larger than " + std::to_string(ctx.max_elements) +
                   " (the most one layer may have): is it a typo?");
}

void LayerSpec::reject_unused() const {
  for (const auto& [key, value] : attrs_)
    if (!used_.count(key)) fail_here("unknown attribute '" + key + "' in \"" + text_ + "\"");
}

}  // namespace dlscale
