// The `tessera` command-line tool (built as build/bin/tessera).
//   tessera models                                  list the registered model names
//   tessera inspect --model NAME [--img-size R] [--num-classes N] [--json]
//                                                   parameter count and a per-module table
// Later issues add train, predict, validate and bench.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "models/registry.h"

using namespace tessera;

namespace {

int usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: tessera models\n"
               "       tessera inspect --model NAME [--img-size R] [--num-classes N] [--json]\n");
  return code;
}

// Parses "--flag value" pairs and bare "--switch"es; unknown flags are errors.
struct Args {
  std::string model;
  int64_t img_size = 0, num_classes = 1000;
  bool json = false;
};

int64_t parse_int(const std::string& flag, const std::string& value) {
  try {
    size_t used = 0;
    long long v = std::stoll(value, &used);
    if (used == value.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  throw Error(flag + ": expected a positive integer, got '" + value + "'");
}

Args parse(const std::vector<std::string>& argv) {
  Args a;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& f = argv[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= argv.size()) throw Error(f + ": missing value");
      return argv[++i];
    };
    if (f == "--model") a.model = value();
    else if (f == "--img-size") a.img_size = parse_int(f, value());
    else if (f == "--num-classes") a.num_classes = parse_int(f, value());
    else if (f == "--json") a.json = true;
    else throw Error("unknown option '" + f + "'");
  }
  if (a.model.empty()) throw Error("--model NAME is required (see `tessera models`)");
  return a;
}

int inspect(const Args& a) {
  models::ModelOptions o;
  o.img_size = a.img_size;
  o.num_classes = a.num_classes;
  auto model = models::create_model(a.model, o);
  const int64_t img = a.img_size ? a.img_size : model->default_img_size;
  if (a.json) {
    std::cout << "{\"model\": \"" << a.model << "\", \"img_size\": " << img << ", \"params\": "
              << model->num_parameters() << ", \"modules\": [";
    bool first = true;
    for (const auto& [name, child] : model->named_children()) {
      std::cout << (first ? "" : ", ") << "{\"name\": \"" << name << "\", \"type\": \"" << child->type_name()
                << "\", \"params\": " << child->num_parameters() << "}";
      first = false;
    }
    std::cout << "]}\n";
    return 0;
  }
  std::printf("%s (%s) at %lldx%lld, %lld classes\n", a.model.c_str(), model->type_name().c_str(),
              static_cast<long long>(img), static_cast<long long>(img), static_cast<long long>(a.num_classes));
  std::printf("%-24s %-28s %14s\n", "module", "type", "params");
  for (const auto& [name, child] : model->named_children())
    std::printf("%-24s %-28s %14lld\n", name.c_str(), child->type_name().c_str(),
                static_cast<long long>(child->num_parameters()));
  std::printf("%-24s %-28s %14lld\n", "total", "", static_cast<long long>(model->num_parameters()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(2);
  const std::string command = argv[1];
  std::vector<std::string> rest(argv + 2, argv + argc);
  try {
    if (command == "models") {
      for (const std::string& n : models::model_names()) std::puts(n.c_str());
      return 0;
    }
    if (command == "inspect") return inspect(parse(rest));
    if (command == "-h" || command == "--help" || command == "help") return usage(0);
    std::fprintf(stderr, "tessera: unknown command '%s'\n", command.c_str());
    return usage(2);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera %s: %s\n", command.c_str(), e.what());
    return 1;
  }
}
