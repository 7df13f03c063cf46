// read_csv: one sample per row, a class label column and float32 features.
// Errors name file:line so a bad row in a million-row export can be found.
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "io/shard_writer.h"

namespace dlscale {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  // Spreadsheet exports quote fields; a number never needs quotes.
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

float parse_feature(std::string_view text, const std::string& where) {
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  float value = 0.0f;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (text.empty() || ec != std::errc() || end != digits.data() + digits.size())
    fail(where + ": '" + std::string(text) + "' is not a number");
  if (!std::isfinite(value)) fail(where + ": '" + std::string(text) + "' is not a finite number");
  return value;
}

std::int32_t parse_label(std::string_view text, const std::string& where) {
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    // pandas writes integer columns with missing values as 3.0.
    double d = parse_feature(text, where + ": label");
    if (d != std::floor(d)) fail(where + ": label '" + std::string(text) + "' is not a whole number");
    value = static_cast<std::int64_t>(d);
  }
  if (value < 0 || value > INT32_MAX) fail(where + ": label " + std::string(text) + " must be a class number >= 0");
  return static_cast<std::int32_t>(value);
}

}  // namespace

RawDataset read_csv(const std::string& path, int label_column, bool has_header, const Shape& sample_shape) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("cannot open " + path + ": the file does not exist");
  std::ifstream in(path);
  if (!in) fail("cannot open " + path);
  RawDataset data;
  data.sample_type = SampleType::f32;
  std::vector<float> features;
  std::size_t columns = 0, label = 0;
  std::string line;
  for (std::int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (has_header && line_no == 1) continue;
    if (trim(line).empty()) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    auto fields = split(line);
    if (columns == 0) {
      columns = fields.size();
      if (columns < 2) fail(where + ": a row needs a label and at least one feature, separated by commas");
      if (label_column < -1 || label_column >= static_cast<int>(columns))
        fail(path + ": label column " + std::to_string(label_column) + " does not exist (rows have " +
             std::to_string(columns) + " columns, numbered from 0; -1 means the last)");
      label = label_column == -1 ? columns - 1 : static_cast<std::size_t>(label_column);
    }
    if (fields.size() != columns)
      fail(where + ": the row has " + std::to_string(fields.size()) + " columns, expected " + std::to_string(columns));
    for (std::size_t c = 0; c < columns; ++c) {
      if (c == label) {
        data.labels.push_back(parse_label(fields[c], where));
      } else {
        features.push_back(parse_feature(fields[c], where + ": column " + std::to_string(c)));
      }
    }
  }
  if (data.labels.empty()) fail(path + " holds no data rows");
  const auto per_sample = static_cast<std::int64_t>(columns - 1);
  data.sample_shape = sample_shape.empty() ? Shape{per_sample} : sample_shape;
  if (numel(data.sample_shape) != per_sample)
    fail("sample shape " + to_string(data.sample_shape) + " has " + std::to_string(numel(data.sample_shape)) +
         " elements but " + path + " has " + std::to_string(per_sample) + " feature columns");
  data.samples.resize(features.size() * sizeof(float));
  std::memcpy(data.samples.data(), features.data(), data.samples.size());
  return data;
}

}  // namespace dlscale
