// args.yaml and summary.csv (formats in train/output.h), replaced atomically (core/atomic_file.h).
#include "tessera/train/output.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tessera/core/atomic_file.h"
#include "tessera/core/error.h"

namespace tessera::train {

const char* const kSummaryHeader = "epoch,train_loss,eval_loss,eval_top1,eval_top5,lr";

namespace {

// A plain YAML scalar that reads back as a number, bool or null: kept unquoted on purpose.
bool is_yaml_typed(const std::string& v) {
  static const char* const words[] = {"null", "~", "true", "false", "True", "False", ".inf", "-.inf", ".nan"};
  for (const char* w : words)
    if (v == w) return true;
  double d;
  const char* end = v.data() + v.size();
  auto [p, ec] = std::from_chars(v.data() + (v[0] == '+' ? 1 : 0), end, d);
  return ec == std::errc() && p == end;
}

bool is_plain_safe(const std::string& v) {
  if (v.empty() || std::isspace(static_cast<unsigned char>(v.front())) ||
      std::isspace(static_cast<unsigned char>(v.back())))
    return false;
  if (std::strchr("-?:,[]{}#&*!|>'\"%@`", v.front())) return false;
  if (v.back() == ':' || v.find(": ") != std::string::npos || v.find(" #") != std::string::npos) return false;
  return std::none_of(v.begin(), v.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; });
}

bool is_flow_sequence(const std::string& v) {
  if (v.size() < 2 || v.front() != '[' || v.back() != ']') return false;
  return v.find_first_of("\n\r{}", 0) == std::string::npos && v.find('[', 1) == std::string::npos &&
         v.find(']') == v.size() - 1;
}

std::string format_row(const SummaryRow& r) {
  return std::to_string(r.epoch) + "," + python_float(r.train_loss) + "," + python_float(r.eval_loss) + "," +
         python_float(r.eval_top1) + "," + python_float(r.eval_top5) + "," + python_float(r.lr) + "\n";
}

}  // namespace


std::string yaml_value(const std::string& value) {
  if (!value.empty() && (is_yaml_typed(value) || is_flow_sequence(value) || is_plain_safe(value))) return value;
  std::string out = "'";
  for (char c : value) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

void write_args_yaml(const std::string& path, const std::vector<std::pair<std::string, std::string>>& settings) {
  std::vector<std::pair<std::string, std::string>> sorted = settings;
  std::sort(sorted.begin(), sorted.end());
  std::string out;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const std::string& key = sorted[i].first;
    TS_CHECK(!key.empty() && is_plain_safe(key) && !is_yaml_typed(key) && key.find(':') == std::string::npos,
             "write_args_yaml: '", key, "' is not a valid setting name");
    TS_CHECK(i == 0 || sorted[i - 1].first != key, "write_args_yaml: the setting '", key, "' is given twice");
    out += key + ": " + yaml_value(sorted[i].second) + "\n";
  }
  write_file_atomically(path, out);
}

std::string python_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);  // shortest round trip
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  if (exp < -4 || exp >= 16) {  // d[.ddd]e±XX with at least two exponent digits
    std::string mant(1, digits[0]);
    if (digits.size() > 1) mant.append(".").append(digits, 1, std::string::npos);
    char ex[16];
    std::snprintf(ex, sizeof(ex), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return sign + mant + ex;
  }
  if (exp < 0) return sign + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  const size_t int_len = static_cast<size_t>(exp) + 1;
  if (digits.size() <= int_len) return sign + digits + std::string(int_len - digits.size(), '0') + ".0";
  return sign + digits.substr(0, int_len) + "." + digits.substr(int_len);
}

void append_summary(const std::string& path, const SummaryRow& row) {
  std::error_code ec;
  const bool fresh = !std::filesystem::exists(path, ec) || std::filesystem::file_size(path, ec) == 0;
  std::ofstream out(path, std::ios::app | std::ios::binary);
  TS_CHECK(out, "append_summary: cannot open '", path, "' for appending: ", std::strerror(errno));
  if (fresh) out << kSummaryHeader << "\n";
  out << format_row(row);
  out.flush();
  TS_CHECK(out, "append_summary: cannot write to '", path, "': ", std::strerror(errno));
}

void truncate_summary(const std::string& path, int64_t last_epoch) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  std::string line, kept;
  for (bool first = true; std::getline(in, line); first = false) {
    if (first && line.rfind("epoch,", 0) == 0) {  // the header
      kept += line + "\n";
      continue;
    }
    int64_t epoch = 0;
    auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), epoch);
    if (ec == std::errc() && p != line.data() + line.size() && *p == ',' && epoch <= last_epoch) kept += line + "\n";
  }
  write_file_atomically(path, kept);
}

}  // namespace tessera::train
