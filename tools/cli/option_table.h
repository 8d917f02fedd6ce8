// Options as data: a command's flags as rows of a table, each row bound to the member of an options
// struct it sets (TrainOptions, models::ModelOptions, the data and precision options). One row per
// flag gives its name, metavar and help and where its value goes; everything else is generated from
// the rows: the flags and their --help lines, the config keys (-c FILE and args.yaml) with the type
// taken from the member's C++ type, and the struct the parsed flags give. A bound row's default is
// its member's value in a default struct (the member's default initializer), so each default is
// written once, where the option lives; a command whose default differs says so by passing another
// struct of defaults.
//
// The tables: train_options.h (train's own), model_flags.h, data_flags.h and precision_flags.h
// (the flags several commands share).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tools/cli/args.h"
#include "tools/cli/config_file.h"
#include "tools/cli/option_codec.h"

namespace tessera::cli {

// What a row says about its flag, whatever struct it sets.
struct OptionSpec {
  std::string flag;     // "--mixup-switch-prob"; its config key is the dest name, "mixup_switch_prob"
  std::string alias;    // a short form ("-b"), or empty
  std::string metavar;  // empty for a switch
  std::string help;
  // Where the value goes: the member ("TrainOptions::mixup.switch_prob") or the code of the command
  // that consumes it ("run_train: the communicator"); shown in the docs' flag list.
  std::string consumer;
  ConfigType type = ConfigType::String;
  // The flag value args.yaml writes as null (timm's None); see ConfigKey::null_value.
  std::optional<std::string> null_value;

  ConfigKey config_key() const;
  // Declares the flag on `p` with this default (flag text), as its type asks: a switch, a list of
  // arguments (NumberArgs, Kwargs), a value that may be left out (Amp: alone it is "on"), a value.
  void declare(ArgParser& p, const std::string& default_value) const;
};

template <class Options>
struct OptionRow : OptionSpec {
  // The flag's default as text, given the command's default options: a bound row's member's value
  // there, a row the command reads itself its fixed default.
  std::function<std::string(const Options& defaults)> default_text;
  // Sets the row's member of `o` from the parsed flags, or throws UsageError naming the flag; empty
  // for a flag the command reads itself.
  std::function<void(Options& o, const ArgParser& p)> set;
};

// ---- building rows ----------------------------------------------------------------------------------

// The member at the end of a path of member pointers: at(o, &TrainOptions::mixup, &MixupOptions::prob).
template <class Object, class Member>
auto& at(Object& object, Member member) {
  return object.*member;
}
template <class Object, class Member, class... Rest>
auto& at(Object& object, Member member, Rest... rest) {
  return at(object.*member, rest...);
}

// A row that sets the member at `path` of Options; its type and default come from the member, its
// text is read and written by Code (default: the member type's Codec, option_codec.h).
template <class Options, class Code = void, class... Path>
OptionRow<Options> bound(std::string flag, std::string metavar, std::string help, std::string consumer, Path... path) {
  using Value = std::remove_cvref_t<decltype(at(std::declval<Options&>(), path...))>;
  using C = std::conditional_t<std::is_void_v<Code>, Codec<Value>, Code>;
  OptionRow<Options> row;
  row.flag = std::move(flag);
  row.metavar = std::move(metavar);
  row.help = std::move(help);
  row.consumer = std::move(consumer);
  row.type = C::type;
  row.default_text = [path...](const Options& defaults) { return C::text(at(defaults, path...)); };
  row.set = [flag = row.flag, metavar = row.metavar, path...](Options& o, const ArgParser& p) {
    at(o, path...) = C::parse(flag, metavar, p.get(flag));
  };
  return row;
}

// A row the command reads itself (no member of Options): its type and default are given here.
template <class Options>
OptionRow<Options> unbound(std::string flag, std::string metavar, std::string help, std::string consumer,
                           ConfigType type, std::string default_value = "") {
  OptionRow<Options> row;
  row.flag = std::move(flag);
  row.metavar = std::move(metavar);
  row.help = std::move(help);
  row.consumer = std::move(consumer);
  row.type = type;
  row.default_text = [default_value = std::move(default_value)](const Options&) { return default_value; };
  return row;
}

template <class Options>
OptionRow<Options> with_alias(OptionRow<Options> row, std::string alias) {
  row.alias = std::move(alias);
  return row;
}

template <class Options>
OptionRow<Options> null_when(OptionRow<Options> row, std::string null_value) {
  row.null_value = std::move(null_value);
  return row;
}

// ---- using a table ----------------------------------------------------------------------------------

// Declares every row's flag on `p`, its default taken from `defaults`.
template <class Options>
void add_options(ArgParser& p, const std::vector<OptionRow<Options>>& rows, const Options& defaults = Options{}) {
  for (const OptionRow<Options>& row : rows) row.declare(p, row.default_text(defaults));
}

// Sets every bound row's member of `o` from the parsed flags, in table order.
template <class Options>
void apply_options(const ArgParser& p, const std::vector<OptionRow<Options>>& rows, Options& o) {
  for (const OptionRow<Options>& row : rows)
    if (row.set) row.set(o, p);
}

template <class Options>
std::vector<ConfigKey> config_keys(const std::vector<OptionRow<Options>>& rows) {
  std::vector<ConfigKey> keys;
  for (const OptionRow<Options>& row : rows) keys.push_back(row.config_key());
  return keys;
}

// The row of `flag`; a flag the table lacks is a bug of the caller (tessera::Error).
template <class Options>
OptionRow<Options>& row_of(std::vector<OptionRow<Options>>& rows, const std::string& flag) {
  for (OptionRow<Options>& row : rows)
    if (row.flag == flag) return row;
  throw Error("internal error: no option table row for " + flag);
}

}  // namespace tessera::cli
