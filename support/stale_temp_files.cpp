// Removal of dead writers' temporary files (see stale_temp_files.h).
#include "support/stale_temp_files.h"

#include <cerrno>
#include <csignal>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mpc {
namespace {

/// The process id a temp file's name ends in: decimal digits without a
/// leading zero that fit a pid_t; 0 for anything else.
pid_t pidOfSuffix(const char *s) {
  if (*s < '1' || *s > '9')
    return 0;
  long long v = 0;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9')
      return 0;
    v = v * 10 + (*s - '0');
    if (v > 0x7fffffff)
      return 0;
  }
  return pid_t(v);
}

} // namespace

int removeStaleTempFiles(const std::string &path) {
  size_t slash = path.find_last_of('/');
  std::string folder = slash == std::string::npos ? "."
                       : slash == 0               ? "/"
                                                  : path.substr(0, slash);
  std::string prefix =
      (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp.";
  if (prefix == ".tmp.")
    return 0;
  DIR *dir = ::opendir(folder.c_str());
  if (!dir)
    return 0;
  int removed = 0;
  const pid_t self = ::getpid();
  while (const dirent *e = ::readdir(dir)) {
    if (std::char_traits<char>::compare(e->d_name, prefix.c_str(),
                                        prefix.size()) != 0)
      continue;
    pid_t pid = pidOfSuffix(e->d_name + prefix.size());
    // EPERM: the process exists (another user's): it may be writing.
    if (pid == 0 || pid == self || ::kill(pid, 0) == 0 || errno != ESRCH)
      continue;
    struct stat st {};
    if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode))
      continue;
    if (::unlinkat(::dirfd(dir), e->d_name, 0) == 0)
      ++removed;
  }
  ::closedir(dir);
  return removed;
}

} // namespace mpc
