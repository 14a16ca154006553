// podman container names from conmon command lines (a real one captured on this kind of host, in
// fixtures/conmon_cmdline.bin), a fake /proc of conmon processes, and the resolver naming a podman
// container's workload whether its conmon is seen before or after the container's own processes.
// docker container names from config.v2.json (a real one written by dockerd 20.10, Debian 12's, in
// fixtures/docker_config.v2.json) in a fake docker data root.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include "common/text_io.hpp"
#include "test_support.hpp"
#include "workloads/container_names.hpp"
#include "workloads/workload_resolver.hpp"

namespace kepler::collect {
namespace {

using testing::fixture;
using testing::TempDir;

const std::string kCaptured = "6485e1d8c16ec63909d488ada4d4f879d51a7b6921d98fdae9f0717c332463a5";
const std::string kIdA(64, 'a');
const std::string kIdB(64, 'b');

/// A NUL-terminated argv as /proc/<pid>/cmdline holds it.
std::string cmdline(std::initializer_list<std::string> args) {
    std::string text;
    for (const std::string& a : args) text += a + '\0';
    return text;
}

std::string conmon(const std::string& id, const std::string& name) {
    return cmdline({"/usr/bin/conmon", "--api-version", "1", "-c", id, "-u", id, "-n", name, "--exit-command-arg", "",
                    "--exit-command-arg", "-n", "--exit-command-arg", "not-the-name"});
}

/// Makes `pid` of a fake /proc run the executable `exe` as `uid`: what ContainerNames checks before it
/// believes a conmon. The exe link is a plain symbolic link here (see conmon_executable_problem).
void run_as(const TempDir& proc, int pid, const std::string& exe, uint32_t uid = 0) {
    const std::string u = std::to_string(uid);
    proc.write(std::to_string(pid) + "/status", "Name:\tconmon\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t" + u + "\t" + u +
                                                    "\t" + u + "\t" + u + "\nGid:\t" + u + "\t" + u + "\t" + u + "\t" + u + "\n");
    const std::filesystem::path link = proc.path() / std::to_string(pid) / "exe";
    std::filesystem::remove(link);
    std::filesystem::create_symlink(exe, link);
}

/// A fake /proc with conmon `pid` monitoring `id` named `name`, and the container's process `pid + 1`
/// in podman's cgroupfs layout.
void add_container(const TempDir& proc, int pid, const std::string& id, const std::string& name) {
    proc.write(std::to_string(pid) + "/comm", "conmon\n");
    proc.write(std::to_string(pid) + "/cmdline", conmon(id, name));
    run_as(proc, pid, "/usr/bin/conmon");
    proc.write(std::to_string(pid) + "/cgroup", "1:cpu,cpuacct:/libpod_parent/conmon\n");
    proc.write(std::to_string(pid + 1) + "/comm", "sleep\n");
    proc.write(std::to_string(pid + 1) + "/cmdline", cmdline({"sleep", "60"}));
    proc.write(std::to_string(pid + 1) + "/cgroup", "1:cpu,cpuacct:/libpod_parent/libpod-" + id + "\n");
}

ProcessActivity process(uint32_t pid, const std::string& comm) {
    ProcessActivity p;
    p.key = ProcessKey{pid, 100};
    p.set_comm(comm);
    return p;
}

TEST(ConmonCmdline, IdAndNameOfARealConmon) {
    const ConmonIdentity c = parse_conmon_cmdline(fixture("conmon_cmdline.bin"));
    EXPECT_TRUE(c.is_conmon);
    EXPECT_EQ(c.container_id, kCaptured);
    EXPECT_EQ(c.name, "kshm-probe");
}

TEST(ConmonCmdline, OtherProgramsAndHostileValuesNameNothing) {
    EXPECT_FALSE(parse_conmon_cmdline(cmdline({"/usr/bin/bash", "-c", kIdA, "-n", "x"})).is_conmon);
    EXPECT_FALSE(parse_conmon_cmdline("").is_conmon);
    EXPECT_EQ(parse_conmon_cmdline(cmdline({"conmon", "--cid=" + kIdA, "--name=web"})).name, "web");
    EXPECT_EQ(parse_conmon_cmdline(cmdline({"conmon", "-c", "../../etc", "-n", "x"})).container_id, "")
        << "an id is hex";
    EXPECT_EQ(parse_conmon_cmdline(cmdline({"conmon", "-c", "abc123", "-n", "x"})).container_id, "")
        << "shorter than any id the cgroup parser extracts (12 to 128 hex digits)";
    EXPECT_EQ(parse_conmon_cmdline(cmdline({"conmon", "-c", std::string(129, 'a'), "-n", "x"})).container_id, "");
    EXPECT_EQ(parse_conmon_cmdline(cmdline({"conmon", "-c", kIdA, "-n", "a\nb"})).name, "") << "no control characters";
    EXPECT_EQ(parse_conmon_cmdline(cmdline({"conmon", "-c", kIdA, "-n", std::string(300, 'x')})).name, "");
    EXPECT_EQ(parse_conmon_cmdline(cmdline({"conmon", "-c", kIdA, "-n"})).name, "") << "an option without value";
    const ConmonIdentity c = parse_conmon_cmdline(conmon(kIdA, "web"));
    EXPECT_EQ(c.name, "web") << "podman's --exit-command-arg values are not conmon's options";
}

TEST(ContainerNames, AScanKnowsTheRunningConmonsOnly) {
    TempDir proc;
    add_container(proc, 100, kIdA, "web");
    add_container(proc, 200, kIdB, "db");
    proc.write("300/comm", "bash\n");  // not a conmon, whatever its command line says
    proc.write("300/cmdline", conmon(std::string(64, 'c'), "impostor"));
    ContainerNames names(proc.path().string());
    EXPECT_TRUE(names.scan());
    ASSERT_NE(names.find(kIdA), nullptr);
    EXPECT_EQ(*names.find(kIdA), "web");
    EXPECT_EQ(*names.find(kIdB), "db");
    EXPECT_EQ(names.find(std::string(64, 'c')), nullptr);
    EXPECT_FALSE(names.scan()) << "nothing new";
    std::filesystem::remove_all(proc.path() / "200");
    EXPECT_FALSE(names.scan());
    EXPECT_EQ(names.find(kIdB), nullptr) << "a container that ended is forgotten";
    EXPECT_TRUE(names.learn(conmon(kIdB, "db2")));
    EXPECT_FALSE(names.learn(conmon(kIdB, "db2")));
    EXPECT_EQ(*names.find(kIdB), "db2");
}

TEST(WorkloadResolver, APodmanContainerIsNamedByItsConmon) {
    TempDir proc;
    add_container(proc, 100, kIdA, "web");
    WorkloadResolver resolver(proc.path().string(), 30);
    ProcessActivity container = process(101, "sleep");
    const auto unnamed = resolver.resolve(container);
    ASSERT_NE(unnamed, nullptr);
    EXPECT_EQ(unnamed->identity.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_PODMAN));
    EXPECT_EQ(unnamed->identity.container_id, kIdA);
    EXPECT_EQ(unnamed->identity.container_name, "") << "its conmon was not seen yet";
    resolver.end_sample();  // scans /proc for conmons: a container has no name
    EXPECT_EQ(resolver.resolve(container)->identity.container_name, "web")
        << "named at its next sight, not after the refresh period";

    add_container(proc, 200, kIdB, "db");  // a new container: its conmon is in the sample first
    ProcessActivity monitor = process(200, "conmon");
    ProcessActivity second = process(201, "sleep");
    resolver.resolve(monitor);
    EXPECT_EQ(resolver.resolve(second)->identity.container_name, "db") << "no scan needed";
}

TEST(WorkloadResolver, ScansForMissingNamesAtMostOncePerRefreshPeriod) {
    TempDir proc;
    add_container(proc, 100, kIdA, "web");
    proc.write("100/comm", "not-conmon\n");  // a container whose monitor cannot be found
    WorkloadResolver resolver(proc.path().string(), 5);
    ProcessActivity container = process(101, "sleep");
    resolver.resolve(container);
    resolver.end_sample();  // the first scan finds nothing
    proc.write("100/comm", "conmon\n");
    for (int sample = 1; sample < 5; ++sample) {
        EXPECT_EQ(resolver.resolve(container)->identity.container_name, "") << "sample " << sample;
        resolver.end_sample();
    }
    resolver.resolve(container);
    resolver.end_sample();  // sample 5: the next scan is due
    EXPECT_EQ(resolver.resolve(container)->identity.container_name, "web");
}

TEST(ConmonExecutable, OnlyConmonInstalledByRootCounts) {
    const ExecutableFile installed{0, S_IFREG | 0755};
    EXPECT_EQ(conmon_executable_problem("/usr/bin/conmon", installed), "");
    EXPECT_EQ(conmon_executable_problem("/usr/libexec/podman/conmon", installed), "");
    EXPECT_EQ(conmon_executable_problem("/usr/lib/podman/conmon", std::nullopt), "") << "a fake /proc: the directory rule alone";
    EXPECT_EQ(conmon_executable_problem("/usr/bin/conmon (deleted)", installed), "") << "upgraded under a running conmon";
    EXPECT_NE(conmon_executable_problem("/home/mallory/conmon", installed), "");
    EXPECT_NE(conmon_executable_problem("/tmp/conmon", std::nullopt), "");
    EXPECT_NE(conmon_executable_problem("/usr/bin/../../tmp/conmon", std::nullopt), "");
    EXPECT_NE(conmon_executable_problem("/usr/bin/bash", installed), "");
    EXPECT_NE(conmon_executable_problem("/usr/bin/conmon-impostor", installed), "");
    EXPECT_NE(conmon_executable_problem("conmon", std::nullopt), "");
    EXPECT_NE(conmon_executable_problem("", std::nullopt), "");
    EXPECT_NE(conmon_executable_problem("/usr/bin/conmon", ExecutableFile{1000, S_IFREG | 0755}), "")
        << "a user's file mounted over /usr/bin/conmon in a mount namespace of its own";
    EXPECT_NE(conmon_executable_problem("/usr/bin/conmon", ExecutableFile{0, S_IFREG | 0775}), "");
    EXPECT_NE(conmon_executable_problem("/usr/bin/conmon", ExecutableFile{0, S_IFREG | 0757}), "");
    EXPECT_NE(conmon_executable_problem("/usr/bin/conmon", ExecutableFile{0, S_IFDIR | 0755}), "");
}

TEST(ProcessStatus, OneUidOrNone) {
    EXPECT_EQ(process_uid("Name:\tx\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n"), std::optional<uint32_t>(0));
    EXPECT_EQ(process_uid("Uid:\t1000\t1000\t1000\t1000\n"), std::optional<uint32_t>(1000));
    EXPECT_EQ(process_uid("Uid:\t1000\t0\t0\t0\n"), std::nullopt) << "a set-uid program a user started";
    EXPECT_EQ(process_uid("Uid:\t0\t0\t0\n"), std::nullopt);
    EXPECT_EQ(process_uid("Uid:\t4294967296\t4294967296\t4294967296\t4294967296\n"), std::nullopt);
    EXPECT_EQ(process_uid("Uid:\t-1\t-1\t-1\t-1\n"), std::nullopt);
    EXPECT_EQ(process_uid("Name:\tx\n"), std::nullopt);
    EXPECT_EQ(process_uid(""), std::nullopt);
}

TEST(ContainerNames, AProcessCalledConmonIsBelievedOnlyWhenItRunsTheRealOne) {
    TempDir proc;
    add_container(proc, 100, kIdA, "web");
    const std::string kIdC(64, 'c'), kIdD(64, 'd'), kIdE(64, 'e');
    add_container(proc, 200, kIdB, "from-home");
    run_as(proc, 200, "/home/mallory/conmon");
    add_container(proc, 300, kIdC, "from-tmp");
    run_as(proc, 300, "/tmp/conmon");
    add_container(proc, 400, kIdD, "set-uid");
    proc.write("400/status", "Uid:\t1000\t0\t0\t0\n");
    add_container(proc, 500, kIdE, "no-exe");
    std::filesystem::remove(proc.path() / "500" / "exe");
    ContainerNames names(proc.path().string());
    EXPECT_TRUE(names.scan());
    ASSERT_NE(names.find(kIdA), nullptr);
    EXPECT_EQ(*names.find(kIdA), "web");
    EXPECT_EQ(names.find(kIdB), nullptr) << "not an installed conmon";
    EXPECT_EQ(names.find(kIdC), nullptr);
    EXPECT_EQ(names.find(kIdD), nullptr) << "not root's process: its uids differ";
    EXPECT_EQ(names.find(kIdE), nullptr) << "no executable (a kernel thread or a zombie)";
    EXPECT_EQ(names.size(), 1u);
}

TEST(ContainerNames, AUsersConmonNamesOnlyThatUsersContainers) {
    TempDir proc;
    add_container(proc, 100, kIdA, "root-web");
    add_container(proc, 200, kIdA, "mine");
    run_as(proc, 200, "/usr/bin/conmon", 1000);  // the real conmon, started by user 1000 with any arguments
    ContainerNames names(proc.path().string());
    EXPECT_TRUE(names.scan());
    ASSERT_NE(names.find(kIdA), nullptr);
    EXPECT_EQ(*names.find(kIdA), "root-web") << "the system container keeps root's name";
    ASSERT_NE(names.find(kIdA, 1000), nullptr);
    EXPECT_EQ(*names.find(kIdA, 1000), "mine");
    EXPECT_EQ(names.find(kIdA, 1001), nullptr);
    ContainerNames seen(proc.path().string());
    EXPECT_TRUE(seen.learn_process(200));
    EXPECT_EQ(seen.find(kIdA), nullptr);
    EXPECT_EQ(*seen.find(kIdA, 1000), "mine");
    EXPECT_FALSE(seen.learn_process(999)) << "no such process";
}

const std::string kRootlessScope = "/user.slice/user-1000.slice/user@1000.service/user.slice/";

TEST(WorkloadResolver, ARootlessContainerIsPublishedUnderItsUserAndNamedByItsUsersConmon) {
    TempDir proc;
    add_container(proc, 100, kIdA, "system-web");  // a system podman container, and its conmon
    proc.write("200/comm", "conmon\n");            // user 1000's conmon for a container of the same id
    proc.write("200/cmdline", conmon(kIdA, "mine"));
    proc.write("200/cgroup", "0::" + kRootlessScope + "libpod-conmon-" + kIdA + ".scope\n");
    run_as(proc, 200, "/usr/bin/conmon", 1000);
    proc.write("201/comm", "sleep\n");
    proc.write("201/cgroup", "0::" + kRootlessScope + "libpod-" + kIdA + ".scope\n");
    WorkloadResolver resolver(proc.path().string(), 30);
    ProcessActivity system = process(101, "sleep"), mine = process(201, "sleep");
    resolver.resolve(system);
    resolver.resolve(mine);
    resolver.end_sample();  // scans: both are unnamed
    const auto system_workload = resolver.resolve(system);
    EXPECT_EQ(system_workload->identity.container_id, kIdA);
    EXPECT_EQ(system_workload->identity.container_name, "system-web");
    const auto rootless = resolver.resolve(mine);
    EXPECT_EQ(rootless->identity.container_id, "uid1000-" + kIdA) << "never the system container's id";
    EXPECT_EQ(rootless->identity.container_name, "mine");
    EXPECT_EQ(rootless->identity.rootless_uid, std::optional<uint32_t>(1000));
}

const std::string kDockerCaptured = "0a18ea4eb590f26f07f5eae806d2fdc549638d5aa109cad1d200f972fa6f47d3";

TEST(DockerConfig, NameOfARealConfigV2) {
    EXPECT_EQ(parse_docker_config_name(fixture("docker_config.v2.json"), kDockerCaptured), "kshm-web");
}

TEST(DockerConfig, OtherFilesAndHostileValuesNameNothing) {
    const auto config = [](const std::string& id, const std::string& name_json) {
        return R"({"ID":")" + id + R"(","Name":)" + name_json + "}";
    };
    EXPECT_EQ(parse_docker_config_name(config(kIdA, R"("/web")"), kIdA), "web");
    EXPECT_EQ(parse_docker_config_name(config(kIdA, R"("web")"), kIdA), "web") << "the slash is docker's habit";
    EXPECT_EQ(parse_docker_config_name(config(kIdB, R"("/web")"), kIdA), "") << "another container's file";
    EXPECT_EQ(parse_docker_config_name(config(kIdA, "42"), kIdA), "");
    EXPECT_EQ(parse_docker_config_name(config(kIdA, R"("/a
b")"), kIdA), "") << "no control characters";
    EXPECT_EQ(parse_docker_config_name(config(kIdA, "\"/" + std::string(300, 'x') + "\""), kIdA), "");
    EXPECT_EQ(parse_docker_config_name(R"({"ID":")" + kIdA + R"(","Name":"/web")", kIdA), "") << "cut short";
    EXPECT_EQ(parse_docker_config_name("[1,2]", kIdA), "");
    EXPECT_EQ(parse_docker_config_name("", kIdA), "");
    EXPECT_EQ(parse_docker_config_name(std::string(100000, '['), kIdA), "") << "deep nesting is a parse error, not a crash";
}

/// A fake docker data root holding `id`'s config.v2.json with `name`, and a fake /proc with the
/// container's process `pid` in docker's cgroupfs layout (as on this host: /docker/<id>).
void add_docker_container(const TempDir& docker, const TempDir& proc, int pid, const std::string& id,
                          const std::string& name) {
    docker.write("containers/" + id + "/config.v2.json", R"({"StreamConfig":{},"ID":")" + id + R"(","Name":"/)" + name + R"("})");
    proc.write(std::to_string(pid) + "/comm", "sleep\n");
    proc.write(std::to_string(pid) + "/cgroup", "4:cpu,cpuacct:/docker/" + id + "\n");
}

TEST(DockerNames, ReadOnceAndBoundedToContainerIds) {
    TempDir docker;
    docker.write("containers/" + kIdA + "/config.v2.json", R"({"ID":")" + kIdA + R"(","Name":"/web"})");
    DockerNames names((docker.path() / "containers").string());
    ASSERT_NE(names.find(kIdA), nullptr);
    EXPECT_EQ(*names.find(kIdA), "web");
    EXPECT_EQ(names.find(kIdB), nullptr) << "no file";
    docker.write("containers/" + kIdB + "/config.v2.json", R"({"ID":")" + kIdB + R"(","Name":"/db"})");
    EXPECT_EQ(names.find(kIdB), nullptr) << "a miss is remembered: dockerd writes the file before the container starts";
    EXPECT_EQ(names.find("../../etc"), nullptr) << "never a path outside the directory";
    docker.write("containers/" + kIdA.substr(0, 12) + "/config.v2.json", std::string(DockerNames::kMaxConfigBytes + 1, ' '));
    EXPECT_EQ(names.find(kIdA.substr(0, 12)), nullptr) << "a file over the size bound is refused, not read";
}

TEST(WorkloadResolver, ADockerContainerIsNamedFromItsConfig) {
    TempDir docker, proc;
    add_docker_container(docker, proc, 100, kIdA, "web");
    WorkloadResolver resolver(proc.path().string(), 30, docker.path().string());
    ProcessActivity container = process(100, "sleep");
    const auto workload = resolver.resolve(container);
    ASSERT_NE(workload, nullptr);
    EXPECT_EQ(workload->identity.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_DOCKER));
    EXPECT_EQ(workload->identity.container_id, kIdA);
    EXPECT_EQ(workload->identity.container_name, "web");

    proc.write("200/comm", "sleep\n");
    proc.write("200/cgroup", "4:cpu,cpuacct:/docker/" + kIdB + "\n");  // no config: another data root
    ProcessActivity unnamed = process(200, "sleep");
    EXPECT_EQ(resolver.resolve(unnamed)->identity.container_name, "");
}

TEST(WorkloadResolver, AUsersScopeNamedAfterADockerContainerGetsNeitherItsIdNorItsName) {
    TempDir docker, proc;
    add_docker_container(docker, proc, 100, kIdA, "web");
    proc.write("300/comm", "sleep\n");
    proc.write("300/cgroup", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/docker-" + kIdA + ".scope\n");
    WorkloadResolver resolver(proc.path().string(), 30, docker.path().string());
    ProcessActivity system = process(100, "sleep"), impostor = process(300, "sleep");
    EXPECT_EQ(resolver.resolve(system)->identity.container_name, "web");
    const auto user = resolver.resolve(impostor);
    EXPECT_EQ(user->identity.container_id, "uid1000-" + kIdA);
    EXPECT_EQ(user->identity.container_name, "") << "the system dockerd's files name the system's containers only";
}

}  // namespace
}  // namespace kepler::collect
