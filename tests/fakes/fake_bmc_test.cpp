// The fake Redfish BMC checked with libcurl directly, over real HTTPS: what the collector's Redfish client
// will meet (TLS with the BMC's own certificate, Basic auth, sessions, the PowerSubsystem and Power trees,
// faults), so that the client's tests can trust the fake.
#include "fakes/fake_bmc.hpp"
#include "fakes/temp_dir.hpp"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

extern char** environ;

namespace kepler::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

const bool curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;

using kepler::testing::TempDir;

struct Call {
    std::string method = "GET";
    std::string url;
    std::string body;                  // sent when not empty
    fs::path ca_file;                  // empty: the system's CAs
    std::string user_password;         // Basic auth when not empty
    std::vector<std::string> headers;  // e.g. "X-Auth-Token: ..."
    long timeout_ms = 5'000;
    size_t hang_up_after_bytes = 0;    // the client stops reading after this much body (0: never)
};

struct Reply {
    CURLcode code = CURLE_OK;
    long status = 0;
    std::string body;
    std::map<std::string, std::string> headers;  // names lower-cased
    [[nodiscard]] json document() const { return json::parse(body, nullptr, false); }
};

size_t keep_body(char* data, size_t, size_t size, void* user) {
    auto* state = static_cast<std::pair<Reply*, const Call*>*>(user);
    state->first->body.append(data, size);
    const size_t limit = state->second->hang_up_after_bytes;
    return limit != 0 && state->first->body.size() >= limit ? 0 : size;  // 0: curl aborts the transfer
}

size_t keep_header(char* data, size_t, size_t size, void* user) {
    const std::string line(data, size);
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const size_t start = line.find_first_not_of(' ', colon + 1);
        const size_t end = line.find_last_not_of("\r\n");
        static_cast<Reply*>(user)->headers[name] = start <= end ? line.substr(start, end - start + 1) : "";
    }
    return size;
}

Reply perform(const Call& call) {
    Reply reply;
    std::pair<Reply*, const Call*> body_state{&reply, &call};
    CURL* curl = curl_easy_init();
    curl_slist* headers = nullptr;
    for (const std::string& header : call.headers) headers = curl_slist_append(headers, header.c_str());
    if (!call.body.empty()) headers = curl_slist_append(headers, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_URL, call.url.c_str());
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, call.method.c_str());
    if (!call.body.empty()) curl_easy_setopt(curl, CURLOPT_POSTFIELDS, call.body.c_str());
    if (!call.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, call.ca_file.c_str());
    if (!call.user_password.empty()) curl_easy_setopt(curl, CURLOPT_USERPWD, call.user_password.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, call.timeout_ms);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, keep_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body_state);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, keep_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &reply);
    reply.code = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return reply;
}

const std::string kMetrics = "/redfish/v1/Chassis/1U/PowerSubsystem/PowerSupplies/Bay1/Metrics";

class FakeBmcTest : public ::testing::Test {
protected:
    /// A GET with Basic credentials, trusting the BMC's certificate.
    Reply get(const FakeBmc& bmc, const std::string& path, long timeout_ms = 5'000) {
        Call call;
        call.url = bmc.url() + path;
        call.ca_file = bmc.ca_file();
        call.user_password = "admin:secret";
        call.timeout_ms = timeout_ms;
        return perform(call);
    }
    Reply login(const FakeBmc& bmc, const std::string& password = "secret") {
        Call call;
        call.method = "POST";
        call.url = bmc.url() + "/redfish/v1/SessionService/Sessions";
        call.ca_file = bmc.ca_file();
        call.body = json{{"UserName", "admin"}, {"Password", password}}.dump();
        return perform(call);
    }
    Reply with_token(const FakeBmc& bmc, const std::string& method, const std::string& path, const std::string& token) {
        Call call;
        call.method = method;
        call.url = bmc.url() + path;
        call.ca_file = bmc.ca_file();
        call.headers = {"X-Auth-Token: " + token};
        return perform(call);
    }

    TempDir dir_{"kepler-fake-bmc"};
};

TEST_F(FakeBmcTest, HttpsWorksWithTheBmcCertificateAsCaAndFailsWithoutIt) {
    ASSERT_TRUE(curl_ready);
    FakeBmc bmc({}, dir_.path());
    EXPECT_TRUE(bmc.url().starts_with("https://127.0.0.1:"));
    ASSERT_TRUE(fs::is_regular_file(bmc.ca_file()));
    const Reply trusted = get(bmc, "/redfish/v1");
    ASSERT_EQ(trusted.code, CURLE_OK) << curl_easy_strerror(trusted.code);
    EXPECT_EQ(trusted.status, 200);
    EXPECT_EQ(trusted.document()["RedfishVersion"], "1.15.0");
    EXPECT_EQ(trusted.headers.at("odata-version"), "4.0");

    Call untrusted;
    untrusted.url = bmc.url() + "/redfish/v1";
    EXPECT_EQ(perform(untrusted).code, CURLE_PEER_FAILED_VERIFICATION) << "a self-signed BMC is not trusted by default";
}

TEST_F(FakeBmcTest, PlainHttpHasNoCaFile) {
    FakeBmcOptions options;
    options.tls = false;
    FakeBmc bmc(options, dir_.path());
    EXPECT_TRUE(bmc.url().starts_with("http://127.0.0.1:"));
    EXPECT_TRUE(bmc.ca_file().empty());
    EXPECT_EQ(get(bmc, "/redfish/v1/Chassis").status, 200);
}

TEST_F(FakeBmcTest, TheServiceRootIsPublicAndEverythingElseNeedsCredentials) {
    FakeBmc bmc({}, dir_.path());
    Call anonymous;
    anonymous.ca_file = bmc.ca_file();
    anonymous.url = bmc.url() + "/redfish/v1/";
    const json root = perform(anonymous).document();
    EXPECT_EQ(root["Chassis"]["@odata.id"], "/redfish/v1/Chassis");
    EXPECT_EQ(root["SessionService"]["@odata.id"], "/redfish/v1/SessionService");
    EXPECT_EQ(root["Links"]["Sessions"]["@odata.id"], "/redfish/v1/SessionService/Sessions");

    anonymous.url = bmc.url() + "/redfish/v1/Chassis";
    const Reply refused = perform(anonymous);
    EXPECT_EQ(refused.status, 401);
    EXPECT_EQ(refused.document()["error"]["code"], "Base.1.8.GeneralError");
    EXPECT_TRUE(refused.document()["error"]["message"].is_string());

    anonymous.user_password = "admin:wrong";
    EXPECT_EQ(perform(anonymous).status, 401);
    anonymous.user_password = "admin:secret";
    const Reply accepted = perform(anonymous);
    EXPECT_EQ(accepted.status, 200);
    EXPECT_EQ(accepted.document()["Members@odata.count"], 1);
    EXPECT_EQ(accepted.document()["Members"][0]["@odata.id"], "/redfish/v1/Chassis/1U");
}

TEST_F(FakeBmcTest, BasicAuthIsRefusedWhenTheOptionsSaySo) {
    FakeBmcOptions options;
    options.accept_basic = false;
    FakeBmc bmc(options, dir_.path());
    EXPECT_EQ(get(bmc, "/redfish/v1/Chassis").status, 401);
    const Reply session = login(bmc);
    ASSERT_EQ(session.status, 201);
    EXPECT_EQ(with_token(bmc, "GET", "/redfish/v1/Chassis", session.headers.at("x-auth-token")).status, 200);
}

TEST_F(FakeBmcTest, ASessionLogsInServesItsTokenAndIsGoneAfterDelete) {
    FakeBmc bmc({}, dir_.path());
    EXPECT_EQ(login(bmc, "wrong").status, 401);
    const Reply session = login(bmc);
    ASSERT_EQ(session.status, 201) << session.body;
    const std::string token = session.headers.at("x-auth-token");
    const std::string location = session.headers.at("location");
    EXPECT_GE(token.size(), 16u);
    EXPECT_EQ(location, "/redfish/v1/SessionService/Sessions/1");
    EXPECT_EQ(session.document()["@odata.id"], location);
    EXPECT_EQ(bmc.logins(), 1);
    EXPECT_EQ(bmc.request_log().back().body, R"({"Password":"secret","UserName":"admin"})") << "the POST body reaches the fake";

    EXPECT_EQ(with_token(bmc, "GET", kMetrics, token).status, 200);
    EXPECT_EQ(with_token(bmc, "GET", "/redfish/v1/SessionService/Sessions", token).document()["Members@odata.count"], 1);
    EXPECT_EQ(with_token(bmc, "DELETE", location, token).status, 204);
    EXPECT_EQ(with_token(bmc, "GET", kMetrics, token).status, 401);
}

TEST_F(FakeBmcTest, ExpiredSessionsAreRefusedAndANewLoginWorks) {
    FakeBmc bmc({}, dir_.path());
    const std::string token = login(bmc).headers.at("x-auth-token");
    bmc.expire_sessions();
    EXPECT_EQ(with_token(bmc, "GET", kMetrics, token).status, 401);
    const std::string renewed = login(bmc).headers.at("x-auth-token");
    EXPECT_NE(renewed, token);
    EXPECT_EQ(with_token(bmc, "GET", kMetrics, renewed).status, 200);
    EXPECT_EQ(bmc.logins(), 2);
}

TEST_F(FakeBmcTest, PowerSupplyMetricsFollowTheSetters) {
    FakeBmc bmc({}, dir_.path());
    const json supply = get(bmc, "/redfish/v1/Chassis/1U/PowerSubsystem/PowerSupplies/Bay1").document();
    EXPECT_EQ(supply["Name"], "Power Supply Bay 1");
    EXPECT_EQ(supply["Status"]["State"], "Enabled");
    EXPECT_EQ(supply["Metrics"]["@odata.id"], kMetrics);
    EXPECT_EQ(get(bmc, kMetrics).document()["InputPowerWatts"]["Reading"], 150.0);

    bmc.set_input_watts("1U", "Bay1", 200.0);
    const json metrics = get(bmc, kMetrics).document();
    EXPECT_EQ(metrics["@odata.type"], "#PowerSupplyMetrics.v1_0_1.PowerSupplyMetrics");
    EXPECT_EQ(metrics["InputPowerWatts"]["Reading"], 200.0);
    EXPECT_DOUBLE_EQ(metrics["OutputPowerWatts"]["Reading"].get<double>(), 188.0);
    EXPECT_FALSE(metrics.contains("EnergykWh")) << "energy only when the scenario publishes it";
    EXPECT_THROW(bmc.set_input_watts("1U", "Bay9", 1.0), std::invalid_argument);
}

TEST_F(FakeBmcTest, OfflineSuppliesReadNullAndAbsentOnesHaveNoMetrics) {
    FakeBmcOptions options;
    options.energy_kwh = true;
    FakeBmc bmc(options, dir_.path());
    bmc.set_energy_kwh("1U", "Bay1", 325675.0);
    EXPECT_EQ(get(bmc, kMetrics).document()["EnergykWh"]["Reading"], 325675.0);

    bmc.set_power_supply_state("1U", "Bay1", "UnavailableOffline");
    const json offline = get(bmc, kMetrics).document();
    EXPECT_EQ(offline["Status"]["State"], "UnavailableOffline");
    EXPECT_TRUE(offline["InputPowerWatts"]["Reading"].is_null());

    bmc.set_power_supply_state("1U", "Bay1", "Absent");
    const json absent = get(bmc, "/redfish/v1/Chassis/1U/PowerSubsystem/PowerSupplies/Bay1").document();
    EXPECT_EQ(absent["Status"]["State"], "Absent");
    EXPECT_FALSE(absent.contains("Metrics"));
    EXPECT_EQ(get(bmc, kMetrics).status, 404);
}

TEST_F(FakeBmcTest, PowerControlConsumedWattsIsTheSumOfEnabledSuppliesUntilSet) {
    FakeBmc bmc({}, dir_.path());
    const std::string power = "/redfish/v1/Chassis/1U/Power";
    json document = get(bmc, power).document();
    EXPECT_EQ(document["PowerControl"][0]["@odata.id"], power + "#/PowerControl/0");
    EXPECT_EQ(document["PowerControl"][0]["Name"], "System Input Power");
    EXPECT_EQ(document["PowerControl"][0]["PowerConsumedWatts"], 300.0);
    EXPECT_EQ(document["PowerSupplies"][1]["PowerInputWatts"], 150.0);

    bmc.set_input_watts("1U", "Bay2", 250.0);
    EXPECT_EQ(get(bmc, power).document()["PowerControl"][0]["PowerConsumedWatts"], 400.0);
    bmc.set_power_supply_state("1U", "Bay2", "UnavailableOffline");
    EXPECT_EQ(get(bmc, power).document()["PowerControl"][0]["PowerConsumedWatts"], 150.0);
    bmc.set_consumed_watts("1U", 344.0);
    EXPECT_EQ(get(bmc, power).document()["PowerControl"][0]["PowerConsumedWatts"], 344.0);
}

TEST_F(FakeBmcTest, AScenarioWithoutPowerSubsystemOffersOnlyPower) {
    FakeBmcOptions options;
    options.power_subsystem = false;
    options.chassis = {"1U", "Blade2"};
    FakeBmc bmc(options, dir_.path());
    EXPECT_EQ(get(bmc, "/redfish/v1/Chassis").document()["Members@odata.count"], 2);
    const json chassis = get(bmc, "/redfish/v1/Chassis/Blade2").document();
    EXPECT_FALSE(chassis.contains("PowerSubsystem"));
    EXPECT_EQ(chassis["Power"]["@odata.id"], "/redfish/v1/Chassis/Blade2/Power");
    const Reply missing = get(bmc, "/redfish/v1/Chassis/Blade2/PowerSubsystem");
    EXPECT_EQ(missing.status, 404);
    EXPECT_EQ(missing.document()["error"]["code"], "Base.1.8.GeneralError");
    EXPECT_EQ(get(bmc, "/redfish/v1/Chassis/Blade3").status, 404);
}

/// Every @odata.id in a document (fragments such as "#/PowerControl/0" dropped).
void collect_links(const json& node, std::set<std::string>& links) {
    if (node.is_object()) {
        for (const auto& [key, value] : node.items()) {
            if (key == "@odata.id" && value.is_string()) links.insert(value.get<std::string>().substr(0, value.get<std::string>().find('#')));
            collect_links(value, links);
        }
    } else if (node.is_array()) {
        for (const json& value : node) collect_links(value, links);
    }
}

TEST_F(FakeBmcTest, EveryLinkInTheTreeResolvesToTheResourceItNames) {
    FakeBmcOptions options;
    options.energy_kwh = true;
    FakeBmc bmc(options, dir_.path());
    std::set<std::string> pending = {"/redfish/v1/"};
    std::set<std::string> seen;
    while (!pending.empty()) {
        const std::string path = *pending.begin();
        pending.erase(pending.begin());
        if (!seen.insert(path).second) continue;
        const Reply reply = get(bmc, path);
        ASSERT_EQ(reply.status, 200) << path;
        const json document = reply.document();
        EXPECT_EQ(document["@odata.id"], path);
        EXPECT_TRUE(document.contains("@odata.type")) << path;
        if (document.contains("Members")) {
            EXPECT_EQ(document["Members@odata.count"], document["Members"].size()) << path;
        }
        collect_links(document, pending);
    }
    EXPECT_TRUE(seen.contains(kMetrics));
    EXPECT_TRUE(seen.contains("/redfish/v1/Chassis/1U/Power"));
}

TEST_F(FakeBmcTest, UnavailableAnswers503UntilCleared) {
    FakeBmc bmc({}, dir_.path());
    bmc.set_fault(FakeBmc::Fault::unavailable);
    const Reply refused = get(bmc, kMetrics);
    EXPECT_EQ(refused.status, 503);
    EXPECT_EQ(refused.headers.at("retry-after"), "1");
    EXPECT_EQ(refused.document()["error"]["code"], "Base.1.8.GeneralError");
    EXPECT_EQ(login(bmc).status, 503);
    bmc.set_fault(FakeBmc::Fault::none);
    EXPECT_EQ(get(bmc, kMetrics).status, 200);
}

TEST_F(FakeBmcTest, MalformedAnswers200WithTruncatedJson) {
    FakeBmc bmc({}, dir_.path());
    bmc.set_fault(FakeBmc::Fault::malformed);
    const Reply reply = get(bmc, kMetrics);
    EXPECT_EQ(reply.status, 200);
    EXPECT_FALSE(reply.body.empty());
    EXPECT_TRUE(reply.document().is_discarded());
}

TEST_F(FakeBmcTest, SlowAnswersAfterTheDelay) {
    FakeBmc bmc({}, dir_.path());
    bmc.set_fault(FakeBmc::Fault::slow, 0.3);
    const auto start = Clock::now();
    EXPECT_EQ(get(bmc, kMetrics).status, 200);
    EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(300));
}

TEST_F(FakeBmcTest, HugeIsAValidDocumentOfTheGivenSize) {
    FakeBmcOptions options;
    options.huge_body_bytes = 5'000'000;
    FakeBmc bmc(options, dir_.path());
    bmc.set_fault(FakeBmc::Fault::huge);
    const Reply reply = get(bmc, kMetrics);
    EXPECT_EQ(reply.status, 200);
    EXPECT_GE(reply.body.size(), 5'000'000u);
    EXPECT_EQ(reply.document()["@odata.id"], kMetrics);
}

TEST_F(FakeBmcTest, AClientHangingUpMidway100MbBodyLeavesTheServerServing) {
    FakeBmc bmc({}, dir_.path());
    bmc.set_fault(FakeBmc::Fault::huge);
    Call call;
    call.url = bmc.url() + kMetrics;
    call.ca_file = bmc.ca_file();
    call.user_password = "admin:secret";
    call.hang_up_after_bytes = 1 << 20;
    EXPECT_EQ(perform(call).code, CURLE_WRITE_ERROR);
    bmc.set_fault(FakeBmc::Fault::none);
    EXPECT_EQ(get(bmc, kMetrics).status, 200) << "the broken pipe was only a failed write";
}

TEST_F(FakeBmcTest, HangHoldsTheRequestUntilTheFaultIsCleared) {
    FakeBmc bmc({}, dir_.path());
    bmc.set_fault(FakeBmc::Fault::hang);
    EXPECT_EQ(get(bmc, kMetrics, 300).code, CURLE_OPERATION_TIMEDOUT);
    auto waiting = std::async(std::launch::async, [&] { return get(bmc, kMetrics).status; });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    bmc.set_fault(FakeBmc::Fault::none);
    EXPECT_EQ(waiting.get(), 200);
}

TEST_F(FakeBmcTest, DestructionIsPromptWhileARequestHangs) {
    auto bmc = std::make_unique<FakeBmc>(FakeBmcOptions{}, dir_.path());
    bmc->set_fault(FakeBmc::Fault::hang);
    const std::string url = bmc->url() + kMetrics;
    const fs::path ca_file = bmc->ca_file();
    auto waiting = std::async(std::launch::async, [&] {
        Call call;
        call.url = url;
        call.ca_file = ca_file;
        call.user_password = "admin:secret";
        return perform(call).status;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const auto start = Clock::now();
    bmc.reset();
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
    EXPECT_NE(waiting.get(), 200);
}

TEST_F(FakeBmcTest, DestructionIsPromptWhileAClientSaysNothing) {
    auto bmc = std::make_unique<FakeBmc>(FakeBmcOptions{}, dir_.path());
    const int silent = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(std::stoi(bmc->url().substr(bmc->url().rfind(':') + 1))));
    ASSERT_EQ(connect(silent, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the server now waits for its TLS hello
    const auto start = Clock::now();
    bmc.reset();
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(1)) << "not the 5 s a silent client is given";
    close(silent);
}

TEST_F(FakeBmcTest, UnknownPathsAre404WithARedfishError) {
    FakeBmc bmc({}, dir_.path());
    const Reply reply = get(bmc, "/redfish/v1/Systems");
    EXPECT_EQ(reply.status, 404);
    EXPECT_EQ(reply.document()["error"]["code"], "Base.1.8.GeneralError");
    EXPECT_EQ(get(bmc, "/redfish/v1/Chassis/1U/PowerSubsystem/PowerSupplies/Bay3").status, 404);
    EXPECT_EQ(bmc.requests(), 2u);
}

/// The fake_bmc program: URL and CA file on its first two lines, commands on stdin, exit 0 at EOF.
TEST_F(FakeBmcTest, TheProgramPrintsItsUrlAndTakesCommands) {
    int to_child[2], from_child[2];
    ASSERT_EQ(pipe(to_child), 0);
    ASSERT_EQ(pipe(from_child), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, to_child[1]);
    posix_spawn_file_actions_addclose(&actions, from_child[0]);
    const std::string dir = dir_.path().string();
    std::vector<char*> argv = {const_cast<char*>(FAKE_BMC_BINARY), const_cast<char*>("--dir"), const_cast<char*>(dir.c_str()),
                               const_cast<char*>("--watts"), const_cast<char*>("210"), nullptr};
    pid_t pid = -1;
    ASSERT_EQ(posix_spawn(&pid, FAKE_BMC_BINARY, &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    close(to_child[0]);
    close(from_child[1]);
    FILE* output = fdopen(from_child[0], "r");
    char line[512];
    ASSERT_NE(fgets(line, sizeof line, output), nullptr);
    const std::string url = std::string(line).substr(0, std::string(line).find('\n'));
    ASSERT_NE(fgets(line, sizeof line, output), nullptr);
    const std::string ca_file = std::string(line).substr(0, std::string(line).find('\n'));

    Call call;
    call.url = url + kMetrics;
    call.ca_file = ca_file;
    call.user_password = "admin:secret";
    EXPECT_EQ(perform(call).document()["InputPowerWatts"]["Reading"], 210.0);
    // The program takes its commands on its own time: each is awaited by polling.
    const auto command_then_poll = [&](const std::string& command, const std::function<bool(const Reply&)>& done) {
        const std::string text = command + "\n";
        if (write(to_child[1], text.data(), text.size()) != static_cast<ssize_t>(text.size())) return false;
        for (int tries = 0; tries < 100; ++tries) {
            if (done(perform(call))) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return false;
    };
    EXPECT_TRUE(command_then_poll("watts 1U Bay1 123", [](const Reply& r) { return r.document()["InputPowerWatts"]["Reading"] == 123.0; }));
    EXPECT_TRUE(command_then_poll("fault unavailable", [](const Reply& r) { return r.status == 503; }));
    close(to_child[1]);
    int exit_status = -1;
    ASSERT_EQ(waitpid(pid, &exit_status, 0), pid);
    EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0);
    fclose(output);
}

}  // namespace
}  // namespace kepler::testing
