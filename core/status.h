// Status and StatusOr<T>: how every module reports failure across its boundary.
//
// A Status is either OK or carries a code and a message a person can act on. Bad user
// input is kInvalidArgument (exit status 2), "nothing fits" is kInfeasible (exit status 3).
// Exceptions never cross a module boundary; foreign error codes become a Status in one place.
#ifndef DITUNE_CORE_STATUS_H_
#define DITUNE_CORE_STATUS_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ditune {

// [[nodiscard]]: a Status or StatusOr that is dropped is a bug the compiler names.
class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,  // bad flag, config, file content: the user can fix it
    kNotFound,         // an unknown id or a missing file
    kInfeasible,       // valid question, but no configuration satisfies it
    kCorruption,       // a damaged database or file
    kNotSupported,     // an optional operation this implementation lacks
    kIOError,          // the operating system refused
    kUnavailable,      // a peer or device went away (a dead rank, no GPU)
    kInternal,         // a bug in ditune
  };

  Status() = default;  // OK

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) { return {Code::kInvalidArgument, std::move(msg)}; }
  static Status NotFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
  static Status Infeasible(std::string msg) { return {Code::kInfeasible, std::move(msg)}; }
  static Status Corruption(std::string msg) { return {Code::kCorruption, std::move(msg)}; }
  static Status NotSupported(std::string msg) { return {Code::kNotSupported, std::move(msg)}; }
  static Status IOError(std::string msg) { return {Code::kIOError, std::move(msg)}; }
  static Status Unavailable(std::string msg) { return {Code::kUnavailable, std::move(msg)}; }
  static Status Internal(std::string msg) { return {Code::kInternal, std::move(msg)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "invalid argument: <message>", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>"; OK stays OK.
  Status WithContext(std::string_view context) const;

  // The process exit status DESIGN.md assigns to this status: 0 ok, 2 bad input,
  // 3 infeasible, 1 anything else.
  int ExitCode() const;

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}

  Code code_ = Code::kOk;
  std::string message_;
};

// Holds either a T or a non-OK Status.
// Ends the process naming the failed status: the value of a failed StatusOr was asked for,
// which is a bug in the caller (check ok() first); never undefined behaviour.
[[noreturn]] void DieOnBadStatusOrAccess(const Status& status);

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const T& value) : value_(value) {}        // NOLINT(google-explicit-constructor)
  StatusOr(T&& value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  // `status` must not be OK.
  StatusOr(Status status)  // NOLINT(google-explicit-constructor)
      : status_(status.ok() ? Status::Internal("StatusOr constructed from an OK status") : std::move(status)) {}

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // Requires ok(); otherwise ends the process with the status (DieOnBadStatusOrAccess).
  const T& value() const& { return Checked(); }
  T& value() & { return Checked(); }
  T&& value() && { return std::move(Checked()); }
  const T& operator*() const& { return Checked(); }
  T& operator*() & { return Checked(); }
  const T* operator->() const { return &Checked(); }
  T* operator->() { return &Checked(); }

 private:
  const T& Checked() const {
    if (!value_.has_value()) DieOnBadStatusOrAccess(status_);
    return *value_;
  }
  T& Checked() {
    if (!value_.has_value()) DieOnBadStatusOrAccess(status_);
    return *value_;
  }

  Status status_;
  std::optional<T> value_;
};

}  // namespace ditune

// Returns from the enclosing function when `expr` is a non-OK Status.
#define DITUNE_RETURN_IF_ERROR(expr)              \
  do {                                            \
    ::ditune::Status _ditune_st = (expr);         \
    if (!_ditune_st.ok()) return _ditune_st;      \
  } while (0)

#define DITUNE_CONCAT_INNER_(a, b) a##b
#define DITUNE_CONCAT_(a, b) DITUNE_CONCAT_INNER_(a, b)
// `DITUNE_ASSIGN_OR_RETURN(auto x, F())` binds x to F()'s value or returns its status.
#define DITUNE_ASSIGN_OR_RETURN(lhs, expr)                                   \
  auto DITUNE_CONCAT_(_ditune_or_, __LINE__) = (expr);                       \
  if (!DITUNE_CONCAT_(_ditune_or_, __LINE__).ok())                           \
    return DITUNE_CONCAT_(_ditune_or_, __LINE__).status();                   \
  lhs = std::move(DITUNE_CONCAT_(_ditune_or_, __LINE__)).value()

#endif  // DITUNE_CORE_STATUS_H_
