#include "core/status.h"

#include <cstdio>
#include <cstdlib>

namespace ditune {
namespace {

const char* CodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk: return "OK";
    case Status::Code::kInvalidArgument: return "invalid argument";
    case Status::Code::kNotFound: return "not found";
    case Status::Code::kInfeasible: return "infeasible";
    case Status::Code::kCorruption: return "corruption";
    case Status::Code::kNotSupported: return "not supported";
    case Status::Code::kIOError: return "I/O error";
    case Status::Code::kUnavailable: return "unavailable";
    case Status::Code::kInternal: return "internal error";
  }
  return "unknown";
}

}  // namespace

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_);
}

int Status::ExitCode() const {
  switch (code_) {
    case Code::kOk: return 0;
    case Code::kInvalidArgument:
    case Code::kNotFound:
    case Code::kCorruption: return 2;
    case Code::kInfeasible: return 3;
    default: return 1;
  }
}

void DieOnBadStatusOrAccess(const Status& status) {
  std::fprintf(stderr, "ditune: internal error: the value of a failed result was used (%s)\n",
               status.ToString().c_str());
  std::abort();
}

}  // namespace ditune
