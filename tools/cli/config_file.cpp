// Configs of flag values (-c/--config FILE, timm's args.yaml); see tools/cli/config_file.h.
#include "tools/cli/config_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "tessera/io/untrusted_text.h"
#include "tessera/core/error.h"
#include "tessera/train/output.h"
#include "tools/cli/args.h"

namespace tessera::cli {

namespace {

bool parse_int(const std::string& text, int64_t* out) {
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data() + (!text.empty() && text[0] == '+' ? 1 : 0), end, *out);
  return !text.empty() && ec == std::errc() && p == end;
}

// The pieces of a list flag's value: split at commas and spaces.
std::vector<std::string> pieces(const std::string& value) {
  std::vector<std::string> out(1);
  for (char c : value) {
    if (c == ',' || c == ' ') {
      if (!out.back().empty()) out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  if (out.back().empty()) out.pop_back();
  return out;
}

const char* expected(ConfigType type) {
  switch (type) {
    case ConfigType::Int: return "an integer";
    case ConfigType::Float: return "a number";
    case ConfigType::String: return "a string";
    case ConfigType::Switch:
    case ConfigType::OnOff: return "true or false";
    case ConfigType::Numbers:
    case ConfigType::NumberArgs: return "a list of numbers";
    case ConfigType::Kwargs: return "a mapping of names to numbers";
    case ConfigType::Amp: return "true, false or a dtype name (bfloat16, float16)";
  }
  return "";
}

// Reads a config value of `key` from `node`; the flags it gives are appended to argv.
class ValueReader {
 public:
  ValueReader(const std::string& name, const ConfigKey& key, const YAML::Node& node)
      : name_(name), key_(key), node_(node) {}

  void append_to(std::vector<std::string>& argv) const {
    const std::string flag = flag_name(key_.dest);
    switch (key_.type) {
      case ConfigType::Int: {
        int64_t v = 0;
        check(node_.IsScalar() && parse_int(node_.Scalar(), &v));
        argv.push_back(flag + "=" + node_.Scalar());
        break;
      }
      case ConfigType::Float: argv.push_back(flag + "=" + number(node_)); break;
      case ConfigType::String:
        check(node_.IsScalar());
        // timm writes '' for "unset" (interpolation: the model's, output: the default folder).
        if (!node_.Scalar().empty()) argv.push_back(flag + "=" + node_.Scalar());
        break;
      case ConfigType::Switch:
        if (boolean(node_)) argv.push_back(flag);
        break;
      case ConfigType::OnOff: argv.push_back(flag + "=" + (boolean(node_) ? "on" : "off")); break;
      case ConfigType::Numbers:
      case ConfigType::NumberArgs: {
        check(node_.IsSequence() && node_.size() > 0);
        std::string joined;
        for (const YAML::Node& item : node_) {
          if (!joined.empty()) joined += key_.type == ConfigType::Numbers ? "," : " ";
          joined += number(item);
        }
        argv.push_back(flag + "=" + joined);
        break;
      }
      case ConfigType::Kwargs: {
        check(node_.IsMap());
        std::string joined;
        for (const auto& entry : node_) {
          check(entry.first.IsScalar() && !entry.first.Scalar().empty());
          if (!joined.empty()) joined += ' ';
          joined += entry.first.Scalar() + "=" + number(entry.second);
        }
        if (!joined.empty()) argv.push_back(flag + "=" + joined);
        break;
      }
      case ConfigType::Amp:
        if (is_plain_bool(node_)) {
          if (boolean(node_)) argv.push_back(flag);
        } else {
          check(node_.IsScalar());
          argv.push_back(flag + "=" + node_.Scalar());
        }
        break;
    }
  }

 private:
  void check(bool ok) const {
    if (ok) return;
    std::string got;
    if (node_.IsScalar()) got = "'" + node_.Scalar() + "'";
    else if (node_.IsSequence()) got = "a list";
    else if (node_.IsMap()) got = "a mapping";
    else got = "something else";
    throw Error("config " + name_ + ": '" + key_.dest + "' (line " + std::to_string(node_.Mark().line + 1) +
                "): expected " + expected(key_.type) + ", got " + got);
  }
  std::string number(const YAML::Node& n) const {
    double v = 0;
    check(n.IsScalar() && parse_number(n.Scalar(), &v));
    return n.Scalar();
  }
  // YAML 1.1's booleans (PyYAML's: true/false, yes/no, on/off in three cases), unquoted.
  static bool is_plain_bool(const YAML::Node& n) {
    bool b = false;
    return n.IsScalar() && n.Tag() != "!" && YAML::convert<bool>::decode(n, b);
  }
  bool boolean(const YAML::Node& n) const {
    check(is_plain_bool(n));
    return n.as<bool>();
  }

  const std::string& name_;
  const ConfigKey& key_;
  const YAML::Node& node_;
};

}  // namespace

std::string flag_name(const std::string& dest) {
  std::string flag = "--" + dest;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

ConfigArgs parse_config(const std::string& yaml, const std::string& name, const std::vector<ConfigKey>& keys) {
  io::check_untrusted_yaml(yaml, "config " + name);  // before yaml-cpp sees it
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    throw Error("config " + name + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                ": malformed YAML: " + e.msg);
  }
  ConfigArgs out;
  if (root.IsNull()) return out;  // an empty file sets nothing
  TS_CHECK(root.IsMap(), "config ", name, ": expected a mapping of flag names to values (as timm's args.yaml), got ",
           root.IsSequence() ? "a list" : "a single value");
  for (const auto& entry : root) {
    TS_CHECK(entry.first.IsScalar(), "config ", name, " (line ", entry.first.Mark().line + 1,
             "): a key must be a flag name, got a ", entry.first.IsMap() ? "mapping" : "list");
    const std::string& dest = entry.first.Scalar();
    const auto key = std::find_if(keys.begin(), keys.end(), [&](const ConfigKey& k) { return k.dest == dest; });
    if (key == keys.end()) {
      const bool recorded = std::find(std::begin(train::kRecordedSettings), std::end(train::kRecordedSettings), dest) !=
                            std::end(train::kRecordedSettings);
      if (!recorded && std::find(out.ignored.begin(), out.ignored.end(), dest) == out.ignored.end())
        out.ignored.push_back(dest);
      continue;
    }
    if (entry.second.IsNull()) continue;  // timm's None: the flag keeps its default
    ValueReader(name, *key, entry.second).append_to(out.argv);
  }
  return out;
}

ConfigArgs read_config(const std::string& path, const std::vector<ConfigKey>& keys) {
  return parse_config(io::read_untrusted_yaml(path, "config " + path), path, keys);
}

std::optional<std::string> config_path(const std::vector<std::string>& argv) {
  std::optional<std::string> path;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "-c" || argv[i] == "--config") {
      TS_CHECK(i + 1 < argv.size() && !argv[i + 1].empty(), "option ", argv[i], " needs a value (FILE)");
      path = argv[++i];
    } else if (argv[i].rfind("--config=", 0) == 0) {
      path = argv[i].substr(9);
      TS_CHECK(!path->empty(), "option --config needs a value (FILE)");
    }
  }
  return path;
}

std::vector<std::string> expand_config(const std::vector<std::string>& argv, const std::vector<ConfigKey>& keys,
                                       std::vector<std::string>* ignored) {
  const std::optional<std::string> path = config_path(argv);
  if (!path) return argv;
  ConfigArgs config = read_config(*path, keys);
  if (ignored) {
    *ignored = config.ignored;
  } else if (!config.ignored.empty()) {
    std::string list;
    for (const std::string& k : config.ignored) list += (list.empty() ? "" : ", ") + k;
    std::fprintf(stderr, "config %s: ignoring keys timm uses that tessera does not: %s\n", path->c_str(),
                 printable(list).c_str());  // the file's own keys: escaped, as in an Error
  }
  config.argv.insert(config.argv.end(), argv.begin(), argv.end());
  return config.argv;
}

train::SettingValue setting_value(const ConfigKey& key, const std::string& value) {
  using train::SettingValue;
  if (key.null_value && value == *key.null_value) return {};
  int64_t i = 0;
  double d = 0;
  switch (key.type) {
    case ConfigType::Int:
      if (value.empty()) return {};
      return parse_int(value, &i) ? SettingValue::of_int(i) : SettingValue(value);
    case ConfigType::Float:
      if (value.empty()) return {};
      return parse_number(value, &d) ? SettingValue::of_float(d) : SettingValue(value);
    case ConfigType::String: return SettingValue(value);
    case ConfigType::Switch: return SettingValue::of_bool(value == "true");
    case ConfigType::OnOff:
      return value == "on" || value == "off" ? SettingValue::of_bool(value == "on") : SettingValue(value);
    case ConfigType::Numbers:
    case ConfigType::NumberArgs: {
      if (value.empty()) return {};
      std::vector<SettingValue> items;
      for (const std::string& piece : pieces(value)) {
        if (!parse_number(piece, &d)) return SettingValue(value);
        items.push_back(SettingValue::of_float(d));
      }
      return SettingValue::of_list(std::move(items));
    }
    case ConfigType::Kwargs: {
      std::vector<std::pair<std::string, SettingValue>> entries;
      for (const std::string& piece : pieces(value)) {
        const size_t eq = piece.find('=');
        if (eq == std::string::npos || eq == 0) return SettingValue(value);
        const std::string v = piece.substr(eq + 1);
        if (parse_int(v, &i)) entries.emplace_back(piece.substr(0, eq), SettingValue::of_int(i));
        else if (parse_number(v, &d)) entries.emplace_back(piece.substr(0, eq), SettingValue::of_float(d));
        else return SettingValue(value);
      }
      return SettingValue::of_map(std::move(entries));
    }
    case ConfigType::Amp: return SettingValue::of_bool(value != "off");
  }
  return SettingValue(value);
}

}  // namespace tessera::cli
