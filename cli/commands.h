// The ditune subcommands. Each takes the arguments after the subcommand name (argv[0] is
// the subcommand) and returns the process exit status.
#ifndef DITUNE_CLI_COMMANDS_H_
#define DITUNE_CLI_COMMANDS_H_

namespace ditune::cli {

int RunModels(int argc, char** argv);
int RunHardware(int argc, char** argv);
int RunRuntimes(int argc, char** argv);
int RunCheck(int argc, char** argv);
int RunDoctor(int argc, char** argv);
int RunCalibrate(int argc, char** argv);
int RunCalibrateLearn(int argc, char** argv);
int RunSimulate(int argc, char** argv);
int RunValidate(int argc, char** argv);
int RunPlan(int argc, char** argv);
int RunWhatIf(int argc, char** argv);
int RunServe(int argc, char** argv);
int RunLaunch(int argc, char** argv);
int RunRun(int argc, char** argv);
int RunAutotune(int argc, char** argv);

}  // namespace ditune::cli

#endif  // DITUNE_CLI_COMMANDS_H_
