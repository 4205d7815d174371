#include "core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace ditune {
namespace {

// Writes all of `text` to `fd`; false with errno set on failure.
bool WriteAll(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string Folder(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

Status CheckWritable(const std::string& path, std::string_view what) {
  if (path.empty()) return Status::InvalidArgument(fmt::format("{}: give a file name", what));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      return Status::InvalidArgument(fmt::format("{} '{}': is a folder; give a file name", what, path));
    }
    if (S_ISREG(st.st_mode) && ::access(Folder(path).c_str(), W_OK) != 0) {
      return Status::InvalidArgument(
          fmt::format("{} '{}': its folder is not writable ({})", what, path, std::strerror(errno)));
    }
    if (::access(path.c_str(), W_OK) != 0) {
      return Status::InvalidArgument(fmt::format("{} '{}': cannot write there ({})", what, path, std::strerror(errno)));
    }
    return Status::Ok();
  }
  const std::string folder = Folder(path);
  if (::access(folder.c_str(), W_OK) != 0) {
    return Status::InvalidArgument(
        fmt::format("{} '{}': cannot create a file in '{}' ({})", what, path, folder, std::strerror(errno)));
  }
  return Status::Ok();
}

Status WriteFileWhole(const std::string& path, std::string_view text, std::string_view what) {
  DITUNE_RETURN_IF_ERROR(CheckWritable(path, what));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      return Status::InvalidArgument(fmt::format("{} '{}': cannot write there ({})", what, path, std::strerror(errno)));
    }
    const bool ok = WriteAll(fd, text);
    const int err = errno;
    ::close(fd);
    if (!ok) return Status::IOError(fmt::format("{} '{}': writing failed ({})", what, path, std::strerror(err)));
    return Status::Ok();
  }
  std::string tmp = fmt::format("{}.tmp-{}", path, ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    return Status::InvalidArgument(fmt::format("{} '{}': cannot write there ({})", what, path, std::strerror(errno)));
  }
  bool ok = WriteAll(fd, text) && ::fsync(fd) == 0;
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    return Status::IOError(fmt::format("{} '{}': writing failed ({}); nothing was written", what, path,
                                       std::strerror(err)));
  }
  return Status::Ok();
}

}  // namespace ditune
