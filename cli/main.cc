// The ditune command line: a thin dispatcher over the libraries.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <string>

#include "cli/commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

constexpr Command kCommands[] = {
    {"models", ditune::cli::RunModels, "list the DiT models in the catalog"},
    {"hardware", ditune::cli::RunHardware, "list the GPUs and links in the catalog"},
    {"runtimes", ditune::cli::RunRuntimes, "list the runtimes ditune prices and launches (xDiT, Wan generate.py, SGLang, ...)"},
    {"check", ditune::cli::RunCheck, "validate a configuration and show its rank layout"},
    {"doctor", ditune::cli::RunDoctor, "read this machine (nvidia-smi, nccl-tests, NCCL_* settings) and name what slows it"},
    {"plan", ditune::cli::RunPlan, "choose the best parallel configuration and explain it"},
    {"whatif", ditune::cli::RunWhatIf, "sweep GPU types, counts, links and sizes; meet a latency objective"},
    {"serve", ditune::cli::RunServe, "serve a request stream on replicas: latency percentiles, fewest GPUs for an SLO"},
    {"launch", ditune::cli::RunLaunch, "detect the GPUs, choose the configuration, start the job with it"},
    {"run", ditune::cli::RunRun, "run a plan with ditune's DiT engine (cpu, cuda or ref kernels; under mpirun every rank), measure and record it"},
    {"autotune", ditune::cli::RunAutotune, "predict, run the best candidates for real, refit, predict again"},
    {"simulate", ditune::cli::RunSimulate, "predict one generation's latency, breakdown and memory"},
    {"validate", ditune::cli::RunValidate, "predict a suite of published runs and report the error"},
    {"calibrate", ditune::cli::RunCalibrate, "ingest measurements, fit the cost models, show the fits"},
};

// A result that did not reach stdout (a full disk behind `> FILE`, a closed pipe) is a failed
// command: exit 1 naming the cause, never 0 with a truncated document.
int CheckStdout(const std::string& cmd, int rc) {
  errno = 0;
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0;
  const int err = errno;
  if (flushed && !std::ferror(stdout) && std::cout.good()) return rc;
  std::cerr << "ditune " << cmd << ": the output could not be written to stdout"
            << " (" << (err != 0 ? std::strerror(err) : "a full disk or a closed pipe") << "); it is incomplete\n";
  return rc == 0 ? 1 : rc;
}

void Usage(std::ostream& os) {
  os << "usage: ditune COMMAND [options]   (ditune COMMAND --help for its options)\n\ncommands:\n";
  for (const auto& c : kCommands) os << "  " << c.name << std::string(12 - std::strlen(c.name), ' ') << c.summary << "\n";
  os << "\nevery command: --catalog DIR  a user catalog of GPU, link, model and runtime files that add to or replace "
        "the shipped ones (also $DITUNE_CATALOG, ':'-separated; `ditune hardware --template gpu` prints a file)\n";
}

// Takes every --catalog DIR (or --catalog=DIR) out of argv and appends DIR to $DITUNE_CATALOG,
// where the catalog loader reads it: one flag for every command. False (with the message
// printed) where --catalog has no value.
bool TakeCatalogFlags(int* argc, char** argv) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    std::string a = argv[i];
    std::string dir;
    if (a == "--") {
      // What follows is another program's command line (launch -- CMD ...): left as it is.
      while (i < *argc) argv[out++] = argv[i++];
      break;
    }
    if (a == "--catalog") {
      if (i + 1 >= *argc || std::strlen(argv[i + 1]) == 0) {
        std::cerr << "ditune: --catalog needs a directory (a user catalog: DIR/hardware/gpus/<id>.json, ...)\n";
        return false;
      }
      dir = argv[++i];
    } else if (a.rfind("--catalog=", 0) == 0) {
      dir = a.substr(10);
      if (dir.empty()) {
        std::cerr << "ditune: --catalog needs a directory (a user catalog: DIR/hardware/gpus/<id>.json, ...)\n";
        return false;
      }
    } else {
      argv[out++] = argv[i];
      continue;
    }
    const char* env = std::getenv("DITUNE_CATALOG");
    const std::string value = env != nullptr && *env != '\0' ? std::string(env) + ":" + dir : dir;
    setenv("DITUNE_CATALOG", value.c_str(), 1);
  }
  *argc = out;
  argv[out] = nullptr;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!TakeCatalogFlags(&argc, argv)) return 2;
  if (argc < 2) {
    Usage(std::cerr);
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    Usage(std::cout);
    return CheckStdout(cmd, 0);
  }
  for (const auto& c : kCommands) {
    if (cmd == c.name) {
      try {
        return CheckStdout(cmd, c.run(argc - 1, argv + 1));
      } catch (const std::bad_alloc&) {
        // The input asked for more memory than this process may have (a host's memory, or a
        // limit such as `ulimit -v`): the input's size is the cause the user controls.
        std::cerr << "ditune " << cmd << ": out of memory: the inputs need more memory than this process may use "
                  << "(the host's free memory, or a limit such as ulimit -v); use a smaller model, resolution or "
                  << "input file, or more memory\n";
        return 2;
      } catch (const std::exception& e) {
        std::cerr << "ditune " << cmd << ": internal error: " << e.what() << "\n";
        return 1;
      }
    }
  }
  std::cerr << "ditune: unknown command '" << cmd << "'\n";
  Usage(std::cerr);
  return 2;
}
