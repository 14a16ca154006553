#include "support/subprocess.hpp"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace estimate_test {

namespace {
pid_t spawn(const std::vector<std::string>& argv, int out_fd) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
        if (out_fd >= 0) {
            dup2(out_fd, 1);
            dup2(out_fd, 2);
        }
        execvp(args[0], args.data());
        _exit(127);
    }
    return pid;
}
}  // namespace

Child::Child(const std::vector<std::string>& argv, const std::string& log_path) {
    int fd = -1;
    if (!log_path.empty()) fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_ = spawn(argv, fd);
    if (fd >= 0) close(fd);
}

Child::Child(Child&& other) noexcept : pid_(other.pid_), status_(other.status_) { other.pid_ = -1; }

Child::~Child() { terminate(); }

int Child::wait(std::chrono::milliseconds timeout) {
    if (pid_ < 0) return status_;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        int status = 0;
        const pid_t r = waitpid(pid_, &status, WNOHANG);
        if (r == pid_) {
            pid_ = -1;
            status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            return status_;
        }
        if (std::chrono::steady_clock::now() >= deadline) return -1;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

void Child::terminate() {
    if (pid_ < 0) return;
    kill(pid_, SIGTERM);
    if (wait(std::chrono::seconds(5)) < 0 && pid_ > 0) {
        kill(pid_, SIGKILL);
        wait(std::chrono::seconds(5));
    }
}

int run_command(const std::vector<std::string>& argv, std::string& output, std::chrono::seconds timeout) {
    char path[] = "/tmp/kepest-out-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    Child child(argv, path);
    close(fd);
    const int status = child.wait(timeout);
    output = read_file(path);
    unlink(path);
    return status;
}

int free_port() {
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
    close(s);
    return ntohs(addr.sin_port);
}

namespace {
size_t append(char* data, size_t size, size_t n, void* user) {
    static_cast<std::string*>(user)->append(data, size * n);
    return size * n;
}
}  // namespace

long http_get(const std::string& url, std::string& body) {
    body.clear();
    CURL* curl = curl_easy_init();
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    long code = 0;
    if (curl_easy_perform(curl) == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(curl);
    return code;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

int promtool_check(const std::string& path, std::string& findings) {
    std::string lint;
    const int status = run_command({"/bin/sh", "-c", "promtool check metrics < " + path}, lint);
    findings.clear();
    size_t kepler_names = 0, lines = 0;
    for (size_t start = 0; start < lint.size();) {
        size_t end = lint.find('\n', start);
        if (end == std::string::npos) end = lint.size();
        const std::string line = lint.substr(start, end - start);
        start = end + 1;
        if (line.empty()) continue;
        ++lines;
        const bool kepler_name = line.find("_bpf_cpu_time_ms_total metric names should not contain abbreviated units") != std::string::npos;
        if (kepler_name) ++kepler_names;
        else findings += line + "\n";
    }
    // promtool exits 3 for lint findings only: clean when Kepler's name was the only one.
    return status == 3 && kepler_names == lines ? 0 : status;
}

}  // namespace estimate_test
