// `tessera train`'s configs (tools/cli/config_file.h, tools/cli/train.h): the args.yaml a run
// writes loads with PyYAML to timm's types; `-c` of timm's own args.yaml gives the run it
// describes, lists the keys Tessera lacks, and lets the command line override it; values of the
// wrong type and malformed YAML are errors naming the file and the key or line; the papers' recipes
// in configs/ load and hold the papers' values.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "temp_dir.h"
#include "tessera/core/error.h"
#include "tools/cli/data_flags.h"
#include "tools/cli/model_flags.h"
#include "tools/cli/precision_flags.h"
#include "tools/cli/train.h"
#include "tools/cli/train_options.h"

#include <catch2/catch.hpp>

using namespace tessera;
using testing::TempDir;

namespace {

const std::string kTimmArgs = std::string(TESSERA_TEST_DATA_DIR) + "/timm_args.yaml";

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Parses `args` as `tessera train` does; the config's ignored keys go to `ignored`.
cli::ArgParser parsed(const cli::Argv& args, std::vector<std::string>* ignored = nullptr) {
  cli::ArgParser p = cli::train_parser();
  std::vector<std::string> unused;
  REQUIRE(cli::parse_train_args(p, args, ignored ? ignored : &unused));
  return p;
}

}  // namespace

TEST_CASE("every flag of tessera train has a config key with its type, and no key lacks a flag", "[config]") {
  std::set<std::string> flags, keys;
  for (const auto& [dest, value] : cli::train_parser().values())
    if (dest != "config") flags.insert(dest);
  for (const cli::ConfigKey& k : cli::train_config_keys()) CHECK(keys.insert(k.dest).second);  // no key twice
  CHECK(flags == keys);
}

TEST_CASE("the args.yaml of a run loads with PyYAML as timm's typed values", "[config]") {
  TempDir dir;
  const std::string run = dir.path() + "/run";
  REQUIRE(cli::run_train({"--model",
                          "xcit_nano_12_p16_224",
                          "--model-kwargs",
                          "depth=1",
                          "embed_dim=16",
                          "num_heads=2",
                          "--img-size",
                          "16",
                          "--patch-size",
                          "8",
                          "--dataset",
                          "fashion_mnist",
                          "--epochs",
                          "1",
                          "-b",
                          "8",
                          "--max-train-batches",
                          "1",
                          "--max-eval-batches",
                          "1",
                          "--workers",
                          "1",
                          "--threads",
                          "1",
                          "--primary",
                          "none",
                          "--crop-pct",
                          "1",
                          "--mean",
                          "0.5",
                          "--std",
                          "0.25",
                          "--opt-betas",
                          "0.9",
                          "0.95",
                          "--model-ema",
                          "--output",
                          run}) == 0);
  // What timm's yaml.safe_dump(args.__dict__) gives: ints, floats, booleans, lists, a mapping, None.
  const std::string check = R"PY(
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
expected = {
    'batch_size': 8, 'epochs': 1, 'lr': 0.0005, 'min_lr': 1e-05, 'weight_decay': 0.05, 'hflip': 0.5,
    'mean': [0.5], 'std': [0.25], 'scale': [0.08, 1.0], 'opt_betas': [0.9, 0.95], 'opt_eps': None,
    'model_kwargs': {'depth': 1, 'embed_dim': 16, 'num_heads': 2}, 'model_ema': True, 'sync_bn': False,
    'amp': False, 'amp_dtype': 'float16', 'aa': None, 'clip_grad': None, 'layer_decay': None, 'start_epoch': None,
    'in_chans': 1, 'num_classes': 10, 'img_size': 16, 'model': 'xcit_nano_12_p16_224', 'resume': '',
    'val_interval': 1, 'cooldown_epochs': 0, 'log_wandb': False,
}
bad = {k: (d.get(k, 'missing'), v) for k, v in expected.items() if d.get(k, 'missing') != v or type(d.get(k)) is not type(v)}
assert not bad, bad
assert list(d) == sorted(d), 'keys not sorted'
assert 'config' not in d and 'in_chans_resolved' not in d
)PY";
  const std::string script = write(dir, "check.py", check);
  // Found by CMake (tests/CMakeLists.txt); none found is a failure here, not a skipped check.
  const std::string python = TESSERA_TEST_PYTHON;
  INFO(
      "no Python with PyYAML was found when the build was configured: install python3-yaml or pass "
      "-DTESSERA_TEST_PYTHON=/path/to/python");
  REQUIRE(!python.empty());
  CHECK(std::system(("'" + python + "' " + script + " " + run + "/args.yaml").c_str()) == 0);

  // And it configures the same run again: -c of it gives the flags it was written from.
  const cli::ArgParser again = parsed({"-c", run + "/args.yaml"});
  CHECK(again.get("--model-kwargs") == "depth=1 embed_dim=16 num_heads=2");
  CHECK(again.get_int("--in-chans") == 1);
  CHECK(again.get("--opt-betas") == "0.9 0.95");
  CHECK(again.get("--mean") == "0.5");
  CHECK(again.is_set("--model-ema"));
  CHECK(again.get("--aa").empty());
}

TEST_CASE("config: -c of timm's args.yaml configures the run it describes and lists what tessera lacks", "[config]") {
  std::vector<std::string> ignored;
  const cli::ArgParser p = parsed({"-c", kTimmArgs}, &ignored);
  const train::TrainOptions o = cli::train_options(p, 3);
  CHECK(p.get("--model") == "xcit_nano_12_p16_224");
  CHECK(p.get("--model-kwargs") == "depth=6 embed_dim=128");
  CHECK(p.get_int("--num-classes") == 1000);
  CHECK(p.get("--data-dir") == "/data/imagenet");
  CHECK(p.get("--dataset") == "fashion_mnist");  // timm's '' (unset) keeps Tessera's default
  CHECK(o.eval_transform.interpolation == "bicubic");
  CHECK(o.loader.batch_size == 256);
  CHECK(o.epochs == 400);
  CHECK(o.grad_accum_steps == 2);
  CHECK(o.lr == 0.0005);
  CHECK(o.min_lr == 1e-5);
  CHECK(o.warmup_lr == 1e-6);
  CHECK(o.warmup_epochs == 5);
  CHECK(o.cooldown_epochs == 10);
  CHECK(o.opt == "adamw");
  CHECK(o.opt_eps == 1e-8);
  REQUIRE(o.opt_betas);
  CHECK((*o.opt_betas)[0] == 0.9);
  CHECK((*o.opt_betas)[1] == 0.95);
  CHECK(o.layer_decay == 0.65);
  CHECK(o.clip_grad == 1.0);
  CHECK(o.mixup.mixup_alpha == 0.8);
  CHECK(o.mixup.cutmix_alpha == 1.0);
  CHECK(o.smoothing == 0.1);
  CHECK(o.train_transform.reprob == 0.25);
  CHECK(o.train_transform.auto_augment == "rand-m9-mstd0.5-inc1");
  CHECK(o.train_transform.interpolation == "random");
  CHECK(o.train_transform.scale == std::array<double, 2>{0.08, 1.0});
  CHECK(o.model_ema);
  CHECK(o.model_ema_decay == 0.99996);
  REQUIRE(o.amp);
  CHECK(*o.amp == DType::BFloat16);  // amp: true with amp_dtype: bfloat16
  CHECK(o.loader.workers == 8);
  CHECK(!o.start_epoch);  // null: unset
  CHECK(p.is_set("--log-wandb"));
  // Keys timm has and Tessera does not, in file order, each once; none that Tessera knows.
  for (const char* k : {"aug_splits", "bce_loss", "channels_last", "clip_mode", "decay_milestones", "dist_bn",
                        "experiment", "input_size", "lr_base", "no_aug", "ratio", "remode", "vflip"})
    CHECK(std::count(ignored.begin(), ignored.end(), k) == 1);
  for (const char* k : {"lr", "batch_size", "model_kwargs", "amp", "opt_betas", "scale", "in_chans"})
    CHECK(std::count(ignored.begin(), ignored.end(), k) == 0);
  CHECK(ignored.front() == "aug_splits");
}

TEST_CASE("flags given with -c override the config, wherever they stand", "[config]") {
  const cli::ArgParser p = parsed({"--epochs", "3", "--config", kTimmArgs, "--opt-betas", "0.8", "0.9", "--lr=0.01"});
  const train::TrainOptions o = cli::train_options(p, 3);
  CHECK(o.epochs == 3);
  CHECK(o.lr == 0.01);
  CHECK((*o.opt_betas)[0] == 0.8);
  CHECK(o.loader.batch_size == 256);  // still the config's
  const cli::ArgParser q = parsed({"--config=" + kTimmArgs, "-b", "32"});
  CHECK(q.get_int("--batch-size") == 32);
}

TEST_CASE("unknown keys are listed once on stderr, not dropped in silence", "[config]") {
  TempDir dir;
  const std::string path = write(dir, "c.yaml", "epochs: 2\nfoo: 1\nbar: [1, 2]\n");
  const cli::ConfigArgs c = cli::read_config(path, cli::train_config_keys());
  CHECK(c.ignored == std::vector<std::string>{"foo", "bar"});
  CHECK(c.argv == std::vector<std::string>{"--epochs=2"});
}

TEST_CASE("config values of the wrong type are errors naming the file, the key and the type", "[config]") {
  TempDir dir;
  const auto error_of = [&](const std::string& yaml) {
    const std::string path = write(dir, "bad.yaml", yaml);
    try {
      cli::ArgParser p = cli::train_parser();
      std::vector<std::string> ignored;
      (void)cli::parse_train_args(p, {"-c", path}, &ignored);
    } catch (const Error& e) { return std::string(e.what()); }
    return std::string("no error");
  };
  const std::string file = dir.path() + "/bad.yaml";
  CHECK_THAT(error_of("batch_size: 12.5\n"), Catch::Contains(file) && Catch::Contains("'batch_size'") &&
                                                 Catch::Contains("expected an integer") && Catch::Contains("'12.5'"));
  CHECK_THAT(error_of("lr: fast\n"), Catch::Contains("'lr'") && Catch::Contains("expected a number"));
  CHECK_THAT(error_of("lr: [0.1]\n"), Catch::Contains("'lr'") && Catch::Contains("got a list"));
  CHECK_THAT(error_of("model_ema: 'yes'\n"), Catch::Contains("'model_ema'") && Catch::Contains("true or false"));
  CHECK_THAT(error_of("model_ema: 1\n"), Catch::Contains("'model_ema'") && Catch::Contains("true or false"));
  CHECK_THAT(error_of("mean: 0.5\n"), Catch::Contains("'mean'") && Catch::Contains("a list of numbers"));
  CHECK_THAT(error_of("opt_betas: [0.9, x]\n"), Catch::Contains("'opt_betas'") && Catch::Contains("a list of numbers"));
  CHECK_THAT(error_of("model_kwargs: [depth]\n"),
             Catch::Contains("'model_kwargs'") && Catch::Contains("a mapping of names to numbers"));
  CHECK_THAT(error_of("model_kwargs: {depth: deep}\n"), Catch::Contains("'model_kwargs'"));
  CHECK_THAT(error_of("model: {name: x}\n"), Catch::Contains("'model'") && Catch::Contains("expected a string"));
  CHECK_THAT(error_of("amp: [1]\n"), Catch::Contains("'amp'"));
  CHECK_THAT(error_of("epochs: 1\nlr: 0.1\nbatch_size: many\n"), Catch::Contains("(line 3)"));
  // Malformed YAML: yaml-cpp's exception becomes an error naming file:line:column.
  CHECK_THAT(error_of("lr: 0.1\nscale: [0.08, 1.0\n"),
             Catch::Contains(file + ":3:") && Catch::Contains("malformed YAML"));
  CHECK_THAT(error_of("a: b: c\n"), Catch::Contains(file + ":1:") && Catch::Contains("malformed YAML"));
  CHECK_THAT(error_of("- lr\n- 0.1\n"), Catch::Contains(file) && Catch::Contains("expected a mapping"));
  CHECK_THAT(error_of("[a]: 1\n"), Catch::Contains("a key must be a flag name"));
  CHECK(error_of("") == "no error");  // an empty config sets nothing
  cli::ArgParser p = cli::train_parser();
  CHECK_THROWS_WITH(cli::parse_train_args(p, {"-c", dir.path() + "/missing.yaml"}),
                    Catch::Contains(dir.path() + "/missing.yaml") && Catch::Contains("cannot open"));
  CHECK_THROWS_WITH(cli::parse_train_args(p, {"-c"}), Catch::Contains("-c needs a value"));
}

// The flag list of docs/cli.md is generated from the parser and the option table, so the docs
// cannot drift from the flags: this fails on any difference, and with TESSERA_UPDATE_DOCS=1 in the
// environment it writes the generated table into docs/cli.md instead.
TEST_CASE("docs/cli.md lists tessera train's flags exactly as the option table gives them", "[config][docs]") {
  const std::string path = std::string(TESSERA_TEST_DATA_DIR) + "/../../docs/cli.md";
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  const std::string docs{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const std::string begin = "<!-- train flags: generated by tests/test_train_config.cpp -->\n";
  const std::string end = "<!-- end of train flags -->\n";
  const size_t from = docs.find(begin), to = docs.find(end);
  REQUIRE(from != std::string::npos);
  REQUIRE(to != std::string::npos);
  const std::string listed = docs.substr(from + begin.size(), to - from - begin.size());
  const std::string generated = cli::train_flags_markdown();
  if (listed != generated && std::getenv("TESSERA_UPDATE_DOCS")) {
    std::ofstream(path, std::ios::binary) << docs.substr(0, from + begin.size()) << generated << docs.substr(to);
    return;
  }
  INFO("run this test with TESSERA_UPDATE_DOCS=1 to write the generated table into " << path);
  CHECK(listed == generated);
}

TEST_CASE("the option table: every default is its member's, and every value reaches its member", "[config]") {
  // The defaults of the flags are those of a default TrainOptions, the structs' own initializers.
  const cli::ArgParser defaults = parsed({});
  const train::TrainOptions o = cli::train_options(defaults, 3);
  const train::TrainOptions fresh;
  CHECK(defaults.get("--mixup-switch-prob") == "0.5");
  CHECK(o.mixup.switch_prob == fresh.mixup.switch_prob);
  CHECK(o.mixup.mixup_alpha == 0.0);
  CHECK(o.loader.batch_size == 128);
  CHECK(o.train_transform.scale == fresh.train_transform.scale);
  CHECK(defaults.get("--lr") == "5e-4");
  CHECK(defaults.get("--warmup-lr") == "1e-6");
  CHECK(!o.opt_betas);
  CHECK(!o.start_epoch);
  // Values given reach the nested structs.
  const cli::ArgParser given =
      parsed({"--mixup-switch-prob", "0.25", "--mixup-mode", "pair", "--aug-repeats", "3", "--scale", "0.5,1",
              "--crop-padding", "2", "--start-epoch", "4", "--seed", "7", "--model-ema"});
  const train::TrainOptions g = cli::train_options(given, 3);
  CHECK(g.mixup.switch_prob == 0.25);
  CHECK(g.mixup.mode == "pair");
  CHECK(g.loader.repeats == 3);
  CHECK(g.train_transform.scale == std::array<double, 2>{0.5, 1.0});
  CHECK(g.train_transform.crop_padding == 2);
  CHECK(g.start_epoch == 4);
  CHECK(g.seed == 7u);
  CHECK(g.model_ema);
  // A value of the wrong kind is a usage error naming the flag and what it expects.
  const auto error_of = [](const cli::Argv& args) {
    try {
      (void)cli::train_options(parsed(args), 3);
    } catch (const cli::UsageError& e) { return std::string(e.what()); }
    return std::string("no usage error");
  };
  CHECK(error_of({"--mixup-switch-prob", "half"}) == "option --mixup-switch-prob: expected a number, got 'half'");
  CHECK(error_of({"--epochs", "1.5"}) == "option --epochs: expected an integer, got '1.5'");
  CHECK(error_of({"--scale", "0.5"}) == "option --scale: expected two numbers (LO,HI), got '0.5'");
  CHECK(error_of({"--opt-betas", "0.9", "0.99", "0.999"}) ==
        "option --opt-betas: expected two numbers (B1 B2), got '0.9 0.99 0.999'");
  CHECK(error_of({"--checkpoint-hist", "99999999999"}) ==
        "option --checkpoint-hist: expected an integer in range, got '99999999999'");
}

// Each row of `rows` as `p` (parsed without flags) declares it: the flag's default is the row's
// member's value in `defaults`, and that default, parsed back, leaves the member as it was.
template <class Options>
void check_defaults(const cli::ArgParser& p, const std::vector<cli::OptionRow<Options>>& rows,
                    const Options& defaults) {
  for (const cli::OptionRow<Options>& row : rows) {
    INFO(row.flag);
    CHECK(p.get(row.flag) == row.default_text(defaults));
    if (!row.set) continue;
    Options o = defaults;
    row.set(o, p);
    CHECK(row.default_text(o) == row.default_text(defaults));
  }
}

TEST_CASE("the shared flags' defaults are their struct members', and no flag is declared twice", "[config]") {
  // Every table of `tessera train`, against the options each sets; the model's --num-classes
  // defaults to 0 there (the dataset's classes), and everywhere else to ModelOptions' 1000.
  const cli::ArgParser p = parsed({});
  const train::TrainOptions fresh;
  check_defaults(p, cli::model_option_table(), cli::classes_from_weights());
  check_defaults(p, cli::data_option_table<train::TrainOptions>(), fresh);
  check_defaults(p, cli::precision_option_table<train::TrainOptions>(), fresh);
  check_defaults(p, cli::train_option_table(), fresh);
  CHECK(cli::classes_from_weights().num_classes == 0);

  // The parsed defaults give the structs' own defaults, member by member.
  cli::ArgParser model("inspect", "model flags");
  cli::add_model_options(model);
  REQUIRE(model.parse({}));
  const models::ModelOptions m = cli::model_options(model), fresh_model;
  CHECK(m.num_classes == fresh_model.num_classes);
  CHECK(m.img_size == fresh_model.img_size);
  CHECK(m.in_chans == fresh_model.in_chans);
  CHECK(m.patch_size == fresh_model.patch_size);
  CHECK(m.drop_rate == fresh_model.drop_rate);
  CHECK(m.drop_path_rate == fresh_model.drop_path_rate);
  CHECK(m.layer_scale_init == fresh_model.layer_scale_init);
  CHECK(m.model_kwargs == fresh_model.model_kwargs);
  CHECK(m.device == fresh_model.device);
  const train::TrainOptions o = cli::train_options(p, 3);
  CHECK(o.loader.workers == fresh.loader.workers);
  CHECK(o.loader.strict == fresh.loader.strict);
  CHECK(o.eval_transform.interpolation == fresh.eval_transform.interpolation);
  CHECK(o.eval_transform.crop_pct == fresh.eval_transform.crop_pct);
  CHECK(o.eval_transform.mean == fresh.eval_transform.mean);  // ImageNet's, for 3 channels
  CHECK(o.eval_transform.std == fresh.eval_transform.std);
  CHECK(o.amp == fresh.amp);
  CHECK(o.amp_activations == fresh.amp_activations);
  CHECK(o.tf32 == fresh.tf32);
  CHECK(o.deterministic == fresh.deterministic);
  CHECK(o.cuda_graph == fresh.cuda_graph);

  // The values given reach the members the hand copies used to set.
  const train::TrainOptions g = cli::train_options(
      parsed({"--workers", "3", "--strict-data", "--amp", "bf16", "--tf32", "on", "--amp-activations", "float32",
              "--deterministic", "--cuda-graph", "--crop-pct", "0.9", "--interpolation", "bilinear"}),
      3);
  CHECK(g.loader.workers == 3);
  CHECK(g.loader.strict);
  CHECK(g.amp == DType::BFloat16);
  CHECK(g.tf32);
  CHECK(g.amp_activations == AmpActivations::Float32);
  CHECK(g.deterministic);
  CHECK(g.cuda_graph);
  CHECK(g.eval_transform.crop_pct == 0.9);
  CHECK(g.train_transform.interpolation == "bicubic");  // --train-interpolation's
  CHECK(g.eval_transform.interpolation == "bilinear");
  CHECK(cli::train_options(parsed({"--amp", "--amp-dtype", "bfloat16"}), 3).amp == DType::BFloat16);
  CHECK(cli::train_options(parsed({"--amp"}), 3).amp == DType::Float16);

  // Each flag once: a parser refuses a name or short form declared twice (parse() would give its
  // value to one declaration, get() read another), so train_parser() above had each once, and
  // tests/test_cli.cpp builds every other command's parser.
  cli::ArgParser twice("twice", "a flag declared twice");
  twice.option("--batch-size", "B", "images per step", "8", "-b");
  CHECK_THROWS_WITH(twice.flag("--batch-size", "again"), Catch::Contains("declares option --batch-size twice"));
  CHECK_THROWS_WITH(twice.option("--batch", "B", "again", "8", "-b"), Catch::Contains("declares option -b twice"));
}

// configs/: the ImageNet recipes of the four papers (each value cited in its file). Every key is one
// `tessera train` takes, and the values are the papers' (restated here from the papers, with DeiT's
// Table 9 where a paper says it follows DeiT), so an edit to a file that drifts from its paper fails.
TEST_CASE("configs/: every paper recipe loads with keys train takes, and its values are the papers'", "[config]") {
  struct Recipe {
    std::string file, model, aa;
    int64_t epochs;
    double lr, drop_path, layer_scale, crop_pct;
  };
  const std::vector<Recipe> recipes = {
      // XCiT §4.1 (400 epochs, DeiT's recipe, crop 1.0), Table B.1 (drop path 0.05, LayerScale 1 for S12).
      {"xcit_s12_imagenet.yaml", "xcit_small_12_p16_224", "rand-m9-mstd0.5-inc1", 400, 1e-3, 0.05, 1.0, 1.0},
      // CaiT §4.3 (400 epochs, lr 1e-3 at batch 1024, crop 1.0), Table 3 (drop path 0.1), §2 (LayerScale 1e-5).
      {"cait_s24_imagenet.yaml", "cait_s24_224", "rand-m9-mstd0.5-inc1", 400, 1e-3, 0.1, 1e-5, 1.0},
      // CoaT §6.1: 300 epochs, lr 5e-4 x batch/512; no drop path, crop or LayerScale given (defaults).
      {"coat_lite_small_imagenet.yaml", "coat_lite_small", "rand-m9-mstd0.5-inc1", 300, 1e-3, 0.0, -1, 0.875},
      // UFO-ViT §4.1 (400 epochs), Table 2 (S: lr 5e-4 per 512, drop path 0.1, RandAugment N 2, M 7).
      {"ufo_vit_s_imagenet.yaml", "ufo_vit_s", "rand-m7-n2-mstd0.5-inc1", 400, 1e-3, 0.1, -1, 0.875},
  };
  std::set<std::string> files;
  for (const auto& f : std::filesystem::directory_iterator(std::string(TESSERA_SOURCE_DIR) + "/configs"))
    if (f.path().extension() == ".yaml") files.insert(f.path().filename().string());
  CHECK(files.size() == recipes.size());  // a new recipe gets its row here
  for (const Recipe& r : recipes) {
    INFO(r.file);
    REQUIRE(files.count(r.file) == 1);
    std::vector<std::string> ignored;
    const cli::ArgParser p = parsed({"-c", std::string(TESSERA_SOURCE_DIR) + "/configs/" + r.file}, &ignored);
    CHECK(ignored.empty());
    const train::TrainOptions o = cli::train_options(p, 3);
    CHECK(p.get("--model") == r.model);
    CHECK(p.get_int("--img-size") == 224);
    CHECK(o.epochs == r.epochs);
    CHECK(o.loader.batch_size == 1024);  // DeiT Table 9's batch (CaiT §4.3 states it too)
    CHECK(o.lr == r.lr);
    CHECK(o.opt == "adamw");
    CHECK(p.get_double("--drop-path") == r.drop_path);
    CHECK(p.get_double("--layer-scale") == r.layer_scale);
    CHECK(o.eval_transform.crop_pct == r.crop_pct);
    CHECK(o.train_transform.auto_augment == r.aa);
    // DeiT Table 9, which all four follow for what they do not state.
    CHECK(o.smoothing == 0.1);
    CHECK(o.mixup.mixup_alpha == 0.8);
    CHECK(o.mixup.cutmix_alpha == 1.0);
    CHECK(o.train_transform.reprob == 0.25);
    CHECK(o.loader.repeats == 3);
    CHECK(o.warmup_epochs == 5);
    CHECK(o.weight_decay == 0.05);
  }
}
