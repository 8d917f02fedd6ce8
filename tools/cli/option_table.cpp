// Option tables; see tools/cli/option_table.h.
#include "tools/cli/option_table.h"

#include <algorithm>

namespace tessera::cli {

ConfigKey OptionSpec::config_key() const {
  std::string dest = flag.substr(2);
  std::replace(dest.begin(), dest.end(), '-', '_');
  return {dest, type, null_value};
}

void OptionSpec::declare(ArgParser& p, const std::string& default_value) const {
  switch (type) {
    case ConfigType::Switch: p.flag(flag, help); break;
    case ConfigType::NumberArgs:
    case ConfigType::Kwargs: p.list_option(flag, metavar, help); break;
    case ConfigType::Amp: p.optional_value_option(flag, metavar, help, default_value, "on"); break;
    default: p.option(flag, metavar, help, default_value, alias);
  }
}

}  // namespace tessera::cli
