#include "base/subprocess.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string_view>

extern char** environ;

namespace reel {

Result<pid_t> SpawnProcess(const std::vector<std::string>& argv_strings,
                           const std::vector<std::string>& env_strings,
                           const SpawnOptions& options) {
  // Built before fork: the child only calls async-signal-safe functions.
  std::vector<char*> argv, envp;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : options.cpus) CPU_SET(c, &cpus);
  for (const auto& a : argv_strings) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return InternalError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // A server blocks SIGINT/SIGTERM in its threads to sigwait for them; the mask would survive
    // exec and leave the child deaf to SIGTERM.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (options.die_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
    } else if (setsid() < 0) {
      _exit(127);
    }
    if (options.new_process_group && options.die_with_parent && setpgid(0, 0) != 0) _exit(127);
    if (options.stdout_fd >= 0 && dup2(options.stdout_fd, STDOUT_FILENO) < 0) _exit(127);
    if (options.stderr_fd >= 0 && dup2(options.stderr_fd, STDERR_FILENO) < 0) _exit(127);
    if (!options.workdir.empty() && chdir(options.workdir.c_str()) != 0) _exit(127);
    if (!options.cpus.empty() && sched_setaffinity(0, sizeof cpus, &cpus) != 0) _exit(127);
    for (const std::string& procs : options.cgroup_procs) {
      const int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);  // "0": the writing process
      if (fd < 0 || write(fd, "0", 1) != 1) _exit(127);
      close(fd);
    }
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  // Both sides set the group, so that it exists before either goes on (a kill(-pid) right after
  // this returns reaches the child).
  if (options.new_process_group && options.die_with_parent) setpgid(pid, pid);
  return pid;
}

Result<CommandOutput> RunCommand(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, bool separate_errors) {
  if (argv.empty()) return InvalidArgumentError("RunCommand: no program");
  std::vector<std::string> resolved = argv;
  // Not found: exec of the bare name fails in the child, which exits 127 as a shell would.
  if (Result<std::string> program = FindProgram(argv[0]); program.ok()) resolved[0] = *program;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return InternalError(std::string("pipe: ") + std::strerror(errno));
  // Standard error apart goes to an unnamed file: a second pipe would need both drained at once.
  std::unique_ptr<FILE, int (*)(FILE*)> errors(separate_errors ? std::tmpfile() : nullptr,
                                               &std::fclose);
  if (separate_errors && !errors) {
    close(fds[0]);
    close(fds[1]);
    return InternalError(std::string("tmpfile: ") + std::strerror(errno));
  }
  SpawnOptions options;
  options.stdout_fd = fds[1];
  options.stderr_fd = errors ? fileno(errors.get()) : fds[1];
  Result<pid_t> pid = SpawnProcess(resolved, env, options);
  close(fds[1]);
  if (!pid.ok()) {
    close(fds[0]);
    return pid.status();
  }
  CommandOutput out;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof buffer)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) out.output.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.exit_code = DecodeWaitStatus(status).exit_code;
  if (errors) {
    std::rewind(errors.get());
    while (const size_t got = std::fread(buffer, 1, sizeof buffer, errors.get())) {
      out.errors.append(buffer, got);
    }
  }
  return out;
}

Result<std::string> FindProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    const size_t colon = dirs.find(':');
    const std::string dir(dirs.substr(0, colon));
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return NotFoundError("program '" + name + "' is not on PATH");
}

bool ProcessRunning(int64_t pid) {
  if (pid <= 0 || (kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM)) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');  // the name before it may hold spaces and parentheses
  return paren == std::string::npos || line.substr(paren + 2, 1) != "Z";
}

ProcessEnd DecodeWaitStatus(int status) {
  if (WIFSIGNALED(status)) return ProcessEnd{-1, WTERMSIG(status)};
  return ProcessEnd{WEXITSTATUS(status), 0};
}

std::vector<std::string> CurrentEnvironment(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  const auto overridden = [&](const std::string& entry) {
    const std::string name = entry.substr(0, entry.find('=') + 1);
    for (const std::string& o : overrides) {
      if (o.compare(0, name.size(), name) == 0) return true;
    }
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e) {
    if (!overridden(*e)) env.emplace_back(*e);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

Result<std::string> ThisProgram() {
  char self[4096] = {0};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return InternalError("cannot find this program's path (readlink /proc/self/exe)");
  return std::string(self, static_cast<size_t>(n));
}

std::string MachineName() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace reel
