// Faults a training process survives, with the real `tessera` binary as a child process: killed
// with SIGKILL at random moments while it checkpoints every epoch, a run must leave only complete
// checkpoints where a resume looks, never lose an epoch it had saved, and continue with --resume.
// (A full disk and a NaN loss are in test_trainer.cpp, corrupt images in test_data_io.cpp.)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "gradcheck.h"
#include "temp_dir.h"
#include "tessera/train/checkpoint.h"

using namespace tessera;
using testing::TempDir;
namespace fs = std::filesystem;

namespace {

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

// A tiny MNIST in IDX format (16 images of 16x16, digits 0-9) as both splits in `dir`.
void write_tiny_mnist(const fs::path& dir) {
  constexpr uint32_t n = 16, side = 16;
  std::string images = be32(0x803) + be32(n) + be32(side) + be32(side), labels = be32(0x801) + be32(n);
  for (uint32_t i = 0; i < n; ++i) {
    labels += static_cast<char>(i % 10);
    for (uint32_t p = 0; p < side * side; ++p) images += static_cast<char>((p * 7 + i * 31) % 256);
  }
  for (const char* split : {"train", "t10k"}) {
    std::ofstream(dir / (std::string(split) + "-images-idx3-ubyte"), std::ios::binary) << images;
    std::ofstream(dir / (std::string(split) + "-labels-idx1-ubyte"), std::ios::binary) << labels;
  }
}

// Starts `tessera train` with a checkpoint every epoch (one batch each) on the tiny MNIST; its
// output goes to `log`.
pid_t start_training(const fs::path& data, const fs::path& run, int64_t epochs, bool resume, const fs::path& log) {
  std::vector<std::string> args{TESSERA_CLI_PATH,
                                "train",
                                "--model",
                                "xcit_nano_12_p16_224",
                                "--model-kwargs",
                                "depth=1",
                                "embed_dim=16",
                                "num_heads=2",
                                "--img-size",
                                "16",
                                "--patch-size",
                                "8",
                                "--num-classes",
                                "10",
                                "--dataset",
                                "mnist",
                                "--data-dir",
                                data.string(),
                                "--epochs",
                                std::to_string(epochs),
                                "-b",
                                "4",
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
                                "--checkpoint-hist",
                                "3",
                                "--output",
                                run.string()};
  if (resume) args.insert(args.end(), {"--resume", run.string()});
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

TEST_CASE("kill -9 at 20 random moments: only complete checkpoints are found, none is lost, --resume continues",
          "[faults]") {
  TempDir tmp;
  const fs::path data = tmp.dir / "mnist", run = tmp.dir / "run", log = tmp.dir / "log.txt";
  fs::create_directories(data);
  write_tiny_mnist(data);
  std::mt19937 rng(2026);  // fixed: a failure replays with the same kill times
  std::uniform_int_distribution<int> delay_ms(50, 1500);
  int64_t saved_epoch = -1;  // the newest epoch a complete checkpoint holds so far
  int kills_after_progress = 0;
  for (int k = 0; k < 20; ++k) {
    const pid_t pid = start_training(data, run, 100000, saved_epoch >= 0, log);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    REQUIRE(::kill(pid, SIGKILL) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    INFO("kill " << k << "; the runs' output: " << log);
    // Killed, not failed on its own.
    REQUIRE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));

    const std::optional<std::string> found = train::find_resume(run.string());
    if (saved_epoch >= 0) REQUIRE(found.has_value());  // a saved epoch is never lost
    if (!found) continue;
    CHECK(found->find(".tmp.") == std::string::npos);
    const train::CheckpointData ck = train::load_checkpoint(*found);  // complete: both files, one save
    CHECK(ck.epoch >= saved_epoch);
    CHECK(train::state_scalar(ck, "trainer.global_step") == ck.epoch + 1);  // one update per epoch
    kills_after_progress += ck.epoch > saved_epoch;
    saved_epoch = ck.epoch;
  }
  INFO("runs' output: " << log);
  CHECK(kills_after_progress >= 5);  // the kills landed while epochs were being saved, not all at start-up

  // Left alone, a resumed run finishes two more epochs from where the last kill left it.
  const pid_t pid = start_training(data, run, saved_epoch + 3, true, log);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  const train::CheckpointData last = train::load_checkpoint((run / "last.safetensors").string());
  CHECK(last.epoch == saved_epoch + 2);
  CHECK(train::state_scalar(last, "trainer.global_step") == saved_epoch + 3);
  for (const auto& entry : fs::directory_iterator(run))  // the dead runs' temporaries are cleaned up
    CHECK(entry.path().filename().string().find(".tmp.") == std::string::npos);
}
