// requireRegularFile (see regular_input.h).
#include "support/regular_input.h"

#include "support/diagnostics.h"
#include "support/path_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mpc {

void requireRegularFile(const std::string &path, const std::string &role) {
  // O_NONBLOCK: a FIFO opens at once, with or without a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return;
  struct stat st {};
  bool ok = ::fstat(fd, &st) != 0 || S_ISREG(st.st_mode);
  ::close(fd);
  if (ok)
    return;
  const char *kind = S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a file";
  throw Error(describeFileRole({role, path}) + ": is " + kind +
              ", not a regular file" +
              (S_ISDIR(st.st_mode) ? ""
                                   : " (reading it would wait for a writer "
                                     "or never end)"));
}

} // namespace mpc
