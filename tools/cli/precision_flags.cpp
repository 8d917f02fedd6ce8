// The precision flags' rows; see tools/cli/precision_flags.h.
#include "tools/cli/precision_flags.h"

#include <type_traits>

#include "tessera/train/trainer.h"

namespace tessera::cli {

namespace {

std::optional<DType> half_dtype(const std::string& name, const char* flag) {
  if (name == "bf16" || name == "bfloat16") return DType::BFloat16;
  if (name == "fp16" || name == "float16") return DType::Float16;
  throw UsageError(
      detail::concat("option ", flag, ": expected bf16 (bfloat16), fp16 (float16) or off, got '", name, "'"));
}

// A boolean the flag spells on / off.
struct OnOffText {
  static constexpr ConfigType type = ConfigType::OnOff;
  static std::string text(bool v) { return v ? "on" : "off"; }
  static bool parse(const std::string& flag, const std::string&, const std::string& text) {
    if (text != "on" && text != "off") bad_value(flag, "on or off", text);
    return text == "on";
  }
};

struct AmpActivationsText {
  static constexpr ConfigType type = ConfigType::String;
  static std::string text(AmpActivations v) { return v == AmpActivations::Low ? "low" : "float32"; }
  static AmpActivations parse(const std::string& flag, const std::string&, const std::string& text) {
    if (text != "low" && text != "float32") bad_value(flag, "low or float32", text);
    return text == "low" ? AmpActivations::Low : AmpActivations::Float32;
  }
};

// --amp [DTYPE]: off (the member unset), a dtype, or alone the dtype of --amp-dtype.
template <class Root>
OptionRow<Root> amp_row(const std::string& root) {
  OptionRow<Root> row =
      unbound<Root>("--amp", "DTYPE",
                    "mixed precision: bf16 (cuda, and the CPU: natively with AVX-512 BF16 or AMX) or fp16 (cuda); "
                    "alone: --amp-dtype's, as timm; off",
                    root + "::amp", ConfigType::Amp);
  row.default_text = [](const Root& d) {
    return d.amp ? std::string(*d.amp == DType::BFloat16 ? "bf16" : "fp16") : std::string("off");
  };
  row.set = [](Root& o, const ArgParser& p) {
    const std::string& amp = p.get("--amp");
    if (amp == "on") o.amp = half_dtype(p.get("--amp-dtype"), "--amp-dtype");
    else if (amp == "off") o.amp.reset();
    else o.amp = half_dtype(amp, "--amp");
  };
  return row;
}

template <class Root>
std::vector<OptionRow<Root>> make_table() {
  const std::string root = std::is_same_v<Root, Precision> ? "Precision" : "TrainOptions";
  return {
      amp_row<Root>(root),
      // No member: it only names the dtype of a bare --amp, which the --amp row reads.
      unbound<Root>("--amp-dtype", "DTYPE", "the dtype of a bare --amp: float16 or bfloat16 (timm's flag)",
                    root + "::amp, for a bare --amp", ConfigType::String, "float16"),
      bound<Root, AmpActivationsText>(
          "--amp-activations", "low|float32",
          "under --amp, the activations between ops: low (the --amp dtype; half the bytes) or float32 (only the "
          "GEMMs and convolutions compute in the --amp dtype, as PyTorch's autocast)",
          root + "::amp_activations", &Root::amp_activations),
      bound<Root, OnOffText>("--tf32", "on|off", "let float32 matmuls and convolutions on cuda use TF32 tensor cores",
                             root + "::tf32", &Root::tf32),
      bound<Root>("--deterministic", "",
                  "on cuda, only library algorithms whose results do not vary run to run (cuDNN's convolution "
                  "gradients)",
                  root + "::deterministic", &Root::deterministic),
  };
}

}  // namespace

template <class Root>
const std::vector<OptionRow<Root>>& precision_option_table() {
  static const std::vector<OptionRow<Root>> table = make_table<Root>();
  return table;
}
template const std::vector<OptionRow<Precision>>& precision_option_table<Precision>();
template const std::vector<OptionRow<train::TrainOptions>>& precision_option_table<train::TrainOptions>();

void add_precision_options(ArgParser& p) { add_options(p, precision_option_table<Precision>()); }

std::vector<ConfigKey> precision_config_keys() { return config_keys(precision_option_table<Precision>()); }

Precision precision_options(const ArgParser& p) {
  Precision r;
  apply_options(p, precision_option_table<Precision>(), r);
  return r;
}

void apply_precision(const Precision& precision) {
  set_allow_tf32(precision.tf32);
  set_amp_activations(precision.amp_activations);
  set_deterministic_algorithms(precision.deterministic);
}

std::optional<AutocastGuard> autocast_scope(const Precision& precision, Device device) {
  if (!precision.amp) return std::nullopt;
  return std::optional<AutocastGuard>(std::in_place, device.type, *precision.amp);
}

}  // namespace tessera::cli
