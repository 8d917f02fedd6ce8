// The text files of a run's output folder, as timm's train.py writes them
// (/work/shared/spec/ecosystem.md §1.1, §1.4): args.yaml with the run's settings and summary.csv
// with one row per evaluated epoch.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera::train {


// A setting value as a YAML scalar: written plain when YAML reads it back as the same text or
// as the number / true / false / null it spells (so "0.1", "true", "null" keep their YAML types),
// a flow sequence "[a, b]" as is (a list), anything else single-quoted ('' escapes a quote).
std::string yaml_value(const std::string& value);

// args.yaml: one "key: value" line per setting, keys sorted as yaml.safe_dump sorts them (timm's
// keys are the argparse dest names: batch_size, weight_decay, ...). Written atomically.
void write_args_yaml(const std::string& path, const std::vector<std::pair<std::string, std::string>>& settings);

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
