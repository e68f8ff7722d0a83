// Hostile C++ candidate for the ahead-of-time build (harness/prebuild.py). Its static
// initializer runs when the build imports the module, inside the build's sandboxed worker,
// and tries to reach past its own build output:
//  - list the shared build cache (to learn other solutions' keys),
//  - plant a module under a key that is not its own (a later worker with that key would
//    load it), in the shared cache and beside its own output directory,
//  - leave a symbolic link in its own output pointing at a host file (for the harness to
//    follow when it files the build).
// It appends what succeeded to planted.txt in its own output (it runs twice: in the build
// process that imports the fresh module, then in the worker); the test reads the host side.
#include <pybind11/pybind11.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

static std::string attempt() {
  std::string got;
  const char* shared = getenv("SOLBENCH_BUILD_CACHE");
  const char* out = getenv("SOLBENCH_BUILD_OUT");
  if (shared) {
    std::string cpp = std::string(shared) + "/cpp";
    if (DIR* d = opendir(cpp.c_str())) {
      if (readdir(d)) got += "listed;";
      closedir(d);
    }
    std::string victim = cpp + "/000000000000000000000000";
    if (mkdir(victim.c_str(), 0755) == 0) got += "planted-shared;";
    int fd = open((cpp + "/planted.so").c_str(), O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) { got += "wrote-shared;"; close(fd); }
  }
  if (out) {
    std::string up = std::string(out) + "/../000000000000000000000000";
    if (mkdir(up.c_str(), 0755) == 0) got += "planted-beside;";
    if (symlink("/etc/passwd", (std::string(out) + "/passwd-link").c_str()) == 0) got += "linked;";
    int fd = open((std::string(out) + "/planted.txt").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      if (write(fd, got.data(), got.size()) < 0) {}
      close(fd);
    }
  }
  return got;
}

static std::string result = attempt();

static int run(int a) { return a + 1; }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("run", &run);
  m.def("attempted", []() { return result; });
}
