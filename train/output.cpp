// args.yaml (emitted with yaml-cpp) and summary.csv (formats in train/output.h), replaced atomically
// (core/atomic_file.h).
#include "tessera/train/output.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <yaml-cpp/yaml.h>

#include "tessera/core/atomic_file.h"
#include "tessera/core/error.h"

namespace tessera::train {

const char* const kSummaryHeader = "epoch,train_loss,eval_loss,eval_top1,eval_top5,lr";

namespace {

// Whether PyYAML (YAML 1.1, its implicit resolvers) could read the plain scalar `v` as something
// other than a string: a number, boolean, null, or a timestamp-like text. Such strings are
// quoted; quoting more than needed is harmless, as a quoted scalar is always a string.
bool needs_quotes(const std::string& v) {
  if (v.empty()) return true;
  const unsigned char c = static_cast<unsigned char>(v[0]);
  if (std::isdigit(c) || c == '+' || c == '-' || c == '.') return true;
  std::string lower;
  for (char ch : v) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const char* w : {"null", "~", "true", "false", "yes", "no", "on", "off", "y", "n"})
    if (lower == w) return true;
  return false;
}

// A float as PyYAML's represent_float writes it: Python's repr, with ".0" before an exponent
// that has no fraction ("1.0e-06"), and .nan / .inf / -.inf.
std::string yaml_float(double v) {
  if (std::isnan(v)) return ".nan";
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  std::string r = python_float(v);
  if (r.find('.') == std::string::npos && r.find('e') != std::string::npos) r.insert(r.find('e'), ".0");
  return r;
}

void emit(YAML::Emitter& out, const SettingValue& v) {
  switch (v.kind) {
    case SettingValue::Kind::Null: out << YAML::Null; break;
    case SettingValue::Kind::Bool: out << v.boolean; break;
    case SettingValue::Kind::Int: out << v.integer; break;
    case SettingValue::Kind::Float: out << yaml_float(v.real); break;
    case SettingValue::Kind::String:
      if (needs_quotes(v.text)) out << YAML::SingleQuoted;
      out << v.text;
      break;
    case SettingValue::Kind::List:
      out << YAML::Flow << YAML::BeginSeq;
      for (const SettingValue& item : v.items) emit(out, item);
      out << YAML::EndSeq;
      break;
    case SettingValue::Kind::Map:
      out << YAML::BeginMap;
      for (const auto& [key, item] : v.entries) {
        out << YAML::Key << key << YAML::Value;
        emit(out, item);
      }
      out << YAML::EndMap;
      break;
  }
}

bool is_plain_name(const std::string& key) {
  return !key.empty() && !needs_quotes(key) &&
         std::all_of(key.begin(), key.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

std::string format_row(const SummaryRow& r) {
  return std::to_string(r.epoch) + "," + python_float(r.train_loss) + "," + python_float(r.eval_loss) + "," +
         python_float(r.eval_top1) + "," + python_float(r.eval_top5) + "," + python_float(r.lr) + "\n";
}

}  // namespace

SettingValue SettingValue::of_bool(bool v) {
  SettingValue s;
  s.kind = Kind::Bool;
  s.boolean = v;
  return s;
}

SettingValue SettingValue::of_int(int64_t v) {
  SettingValue s;
  s.kind = Kind::Int;
  s.integer = v;
  return s;
}

SettingValue SettingValue::of_float(double v) {
  SettingValue s;
  s.kind = Kind::Float;
  s.real = v;
  return s;
}

SettingValue SettingValue::of_list(std::vector<SettingValue> v) {
  SettingValue s;
  s.kind = Kind::List;
  s.items = std::move(v);
  return s;
}

SettingValue SettingValue::of_map(std::vector<std::pair<std::string, SettingValue>> v) {
  SettingValue s;
  s.kind = Kind::Map;
  s.entries = std::move(v);
  return s;
}

std::string yaml_text(const SettingValue& value) {
  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);
  out.SetMapFormat(YAML::Flow);
  emit(out, value);
  return out.c_str();
}

void check_room_for_checkpoint(const std::string& dir, int64_t bytes) {
  std::error_code ec;
  const std::filesystem::space_info space = std::filesystem::space(dir, ec);
  TS_CHECK(!ec, "train: cannot tell how much room ", dir, " has for checkpoints: ", ec.message());
  const auto mib = [](double b) { return std::to_string(static_cast<int64_t>(std::ceil(b / (1 << 20)))) + " MiB"; };
  TS_CHECK(static_cast<double>(space.available) >= static_cast<double>(bytes), "train: ", dir, " has ",
           mib(static_cast<double>(space.available)), " free and one checkpoint needs about ",
           mib(static_cast<double>(bytes)),
           " (the weights, the optimizer's state and the EMA); free some space or choose another --output");
}

void write_args_yaml(const std::string& path, const Settings& settings) {
  std::vector<const std::pair<std::string, SettingValue>*> sorted;
  for (const auto& entry : settings) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);
  out << YAML::BeginMap;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const std::string& key = sorted[i]->first;
    TS_CHECK(is_plain_name(key), "write_args_yaml: '", key, "' is not a valid setting name");
    TS_CHECK(i == 0 || sorted[i - 1]->first != key, "write_args_yaml: the setting '", key, "' is given twice");
    out << YAML::Key << key << YAML::Value;
    emit(out, sorted[i]->second);
  }
  out << YAML::EndMap;
  TS_CHECK(out.good(), "write_args_yaml: yaml-cpp could not emit the settings: ", out.GetLastError());
  write_file_atomically(path, std::string(out.c_str()) + "\n");
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
