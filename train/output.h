// The text files of a run's output folder, as timm's train.py writes them: args.yaml with the
// run's settings (its argparse namespace) and summary.csv with one row per evaluated epoch
// (timm's utils/summary.py).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera::train {

// A value of args.yaml, typed as timm's argparse leaves it: null (unset), a boolean, an integer,
// a float, a string, a list (--mean, --scale, --opt-betas) or a mapping (--model-kwargs).
struct SettingValue {
  enum class Kind { Null, Bool, Int, Float, String, List, Map };
  Kind kind = Kind::Null;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string text;
  std::vector<SettingValue> items;                            // List
  std::vector<std::pair<std::string, SettingValue>> entries;  // Map, in the order given

  SettingValue() = default;                                                // null
  SettingValue(std::string s) : kind(Kind::String), text(std::move(s)) {}  // NOLINT: strings read naturally
  SettingValue(const char* s) : SettingValue(std::string(s)) {}            // NOLINT
  static SettingValue of_bool(bool v);
  static SettingValue of_int(int64_t v);
  static SettingValue of_float(double v);
  static SettingValue of_list(std::vector<SettingValue> v);
  static SettingValue of_map(std::vector<std::pair<std::string, SettingValue>> v);
};

using Settings = std::vector<std::pair<std::string, SettingValue>>;

// The value as one line of flow-style YAML ("0.0005", "[0.5, 0.5]", "{depth: 6}", "null", "'1'"):
// how a rank compares its settings with the others'.
std::string yaml_text(const SettingValue& value);

// Keys args.yaml records about a run rather than flags of one: what it computed in ("precision":
// "float32", "bfloat16 autocast (activations low)") and with which instructions ("instruction_set":
// "avx512_bf16", "portable (avx2)", a GPU's name). Read back as a config (`train -c args.yaml`) they
// set nothing, and say nothing.
inline constexpr const char* kRecordedSettings[] = {"instruction_set", "precision"};

// args.yaml as yaml.safe_dump writes timm's: one key per setting, sorted (timm's keys are the
// argparse dest names: batch_size, weight_decay, ...), floats as Python's repr, strings that YAML
// would read as something else quoted, lists in flow style. Emitted with yaml-cpp; written
// atomically. A key given twice or one that is not a plain name is an error.
void write_args_yaml(const std::string& path, const Settings& settings);

// Throws, naming `dir` and both sizes, when the file system `dir` is on has less than `bytes`
// available (a checkpoint about to be written: Trainer checks it before the first step).
void check_room_for_checkpoint(const std::string& dir, int64_t bytes);

// A float as Python's repr writes it (csv rows in timm): the shortest digits that read back to the
// same double, positional for exponents -4..15 ("0.0005", "79.32", "300.0"), else scientific
// ("1e-05", "1.5e+16"); "nan", "inf", "-inf".
std::string python_float(double v);

// One row of summary.csv. top1/top5 are percentages; lr is the learning rate at the epoch's end.
// Metrics not measured in an epoch are NaN (written "nan").
struct SummaryRow {
  int64_t epoch = 0;
  double train_loss = 0, eval_loss = 0, eval_top1 = 0, eval_top5 = 0, lr = 0;
};

// The header line, without newline: "epoch,train_loss,eval_loss,eval_top1,eval_top5,lr".
extern const char* const kSummaryHeader;

// Appends a row to summary.csv, writing the header first when the file is new or empty.
void append_summary(const std::string& path, const SummaryRow& row);
// For a resumed run: rewrites summary.csv (atomically) keeping the header and the rows of epochs
// <= last_epoch, dropping those a superseded run wrote after the checkpoint. No file: nothing to do.
void truncate_summary(const std::string& path, int64_t last_epoch);

}  // namespace tessera::train
