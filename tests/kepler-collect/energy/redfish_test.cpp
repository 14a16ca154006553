// Platform power from a BMC over Redfish, against a fake BMC at the real protocol (HTTPS with its own
// certificate, sessions, DMTF's document shapes): discovery through PowerSubsystem and the older
// PowerControl, sessions that expire, a BMC that refuses, is slow, hangs, answers 100 MB or garbage,
// or shows a certificate nobody signed; and the source's readings turned into energy without ever
// making the frame loop wait.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/text_io.hpp"
#include "energy/redfish/redfish_client.hpp"
#include "energy/redfish/redfish_source.hpp"
#include "fakes/fake_bmc.hpp"
#include "keplershm/keplershm.hpp"
#include "test_support.hpp"

namespace kepler::collect {
namespace {

using kepler::testing::FakeBmc;
using kepler::testing::FakeBmcOptions;
using namespace std::chrono_literals;

BmcConfig config_for(const FakeBmc& bmc) {
    BmcConfig c;
    c.id = "bmc-test";
    c.endpoint = bmc.url();
    c.ca_file = bmc.ca_file().string();
    c.username = "admin";
    c.password = "secret";
    c.request_timeout = 2s;
    return c;
}

/// The message of the RedfishError that `call` throws, or "no error".
std::string redfish_error(const std::function<void()>& call) {
    try {
        call();
    } catch (const RedfishError& e) {
        return e.what();
    }
    return "no error";
}

TEST(RedfishClient, PowerSuppliesThroughPowerSubsystemWithTheirInputPower) {
    testing::TempDir dir;
    FakeBmc bmc(FakeBmcOptions{}, dir.path());
    bmc.set_input_watts("1U", "Bay1", 180.5);
    bmc.set_input_watts("1U", "Bay2", 0);  // a supply that carries no load still reads 0 W
    RedfishClient client(config_for(bmc));
    const std::vector<RedfishMeter> meters = client.discover();
    ASSERT_EQ(meters.size(), 2u);
    EXPECT_EQ(redfish_zone_name(meters[0]), "1U/Bay1");
    EXPECT_EQ(meters[0].detail, static_cast<uint32_t>(KEPLERSHM_METER_POWER_SUPPLY));
    EXPECT_EQ(meters[0].source_name, "Power Supply Bay 1");
    const std::vector<RedfishReading> readings = client.read(meters);
    ASSERT_EQ(readings.size(), 2u);
    EXPECT_DOUBLE_EQ(readings[0].watts.value_or(-1), 180.5);
    EXPECT_DOUBLE_EQ(readings[1].watts.value_or(-1), 0.0);
    EXPECT_FALSE(readings[0].energy_kwh);
    EXPECT_EQ(client.logins(), 1) << "one session for discovery and reading";
}

TEST(RedfishClient, OlderBmcsWithPowerControlOnly) {
    testing::TempDir dir;
    FakeBmcOptions options;
    options.power_subsystem = false;
    FakeBmc bmc(options, dir.path());
    bmc.set_consumed_watts("1U", 344);
    RedfishClient client(config_for(bmc));
    const std::vector<RedfishMeter> meters = client.discover();
    ASSERT_EQ(meters.size(), 1u);
    EXPECT_EQ(meters[0].detail, static_cast<uint32_t>(KEPLERSHM_METER_POWER_CONTROL));
    EXPECT_EQ(redfish_zone_name(meters[0]), "1U/0");
    EXPECT_DOUBLE_EQ(client.read(meters)[0].watts.value_or(-1), 344.0);
}

TEST(RedfishClient, TwoChassisTwoSuppliesOneOfflineAndEnergyCounters) {
    testing::TempDir dir;
    FakeBmcOptions options;
    options.chassis = {"1U", "2U"};
    options.energy_kwh = true;
    FakeBmc bmc(options, dir.path());
    bmc.set_power_supply_state("2U", "Bay2", "UnavailableOffline");
    bmc.set_energy_kwh("1U", "Bay1", 1234.5);
    RedfishClient client(config_for(bmc));
    const std::vector<RedfishMeter> meters = client.discover();
    ASSERT_EQ(meters.size(), 4u);
    EXPECT_EQ(redfish_zone_name(meters[3]), "2U/Bay2");
    const std::vector<RedfishReading> readings = client.read(meters);
    EXPECT_DOUBLE_EQ(readings[0].energy_kwh.value_or(-1), 1234.5);
    EXPECT_FALSE(readings[3].watts) << "an offline supply's null reading is no reading, not 0 W";
}

TEST(RedfishClient, ExpiredSessionIsReplacedOnce) {
    testing::TempDir dir;
    FakeBmc bmc(FakeBmcOptions{}, dir.path());
    RedfishClient client(config_for(bmc));
    const auto meters = client.discover();
    bmc.expire_sessions();
    EXPECT_TRUE(client.read(meters)[0].watts);
    EXPECT_EQ(client.logins(), 2);
    EXPECT_EQ(bmc.logins(), 2);
}

TEST(RedfishClient, BasicAuthenticationWhenAsked) {
    testing::TempDir dir;
    FakeBmcOptions options;
    options.accept_sessions = false;
    FakeBmc bmc(options, dir.path());
    BmcConfig config = config_for(bmc);
    config.basic_auth = true;
    RedfishClient client(config);
    EXPECT_EQ(client.discover().size(), 2u);
    EXPECT_EQ(client.logins(), 0);
}

TEST(RedfishClient, WrongCredentialsAreSaidClearly) {
    testing::TempDir dir;
    FakeBmc bmc(FakeBmcOptions{}, dir.path());
    BmcConfig config = config_for(bmc);
    config.password = "wrong";
    RedfishClient client(config);
    const std::string error = redfish_error([&] { (void)client.discover(); });
    EXPECT_NE(error.find("refuses the credentials of user \"admin\""), std::string::npos) << error;
}

TEST(RedfishClient, ACertificateNobodySignedIsRefused) {
    testing::TempDir dir;
    FakeBmc bmc(FakeBmcOptions{}, dir.path());
    BmcConfig config = config_for(bmc);
    config.ca_file.clear();  // the system's CAs: the BMC's self-signed certificate is not among them
    RedfishClient client(config);
    const std::string error = redfish_error([&] { (void)client.discover(); });
    EXPECT_NE(error.find("certificate"), std::string::npos) << error;
    config.insecure = true;  // the lab option, logged loudly by the source
    RedfishClient lab(config);
    EXPECT_EQ(lab.discover().size(), 2u);
}

TEST(RedfishClient, RefusalsGarbageAndHugeAnswersAreErrorsNamingTheUrl) {
    testing::TempDir dir;
    FakeBmc bmc(FakeBmcOptions{}, dir.path());  // its huge answer is 100 MB
    BmcConfig config = config_for(bmc);
    // The fake builds its 100 MB answer per request, which took over 2 s on a loaded machine: the size cap,
    // not the time limit, is what this test is about.
    config.request_timeout = 60s;
    RedfishClient client(config);
    const auto meters = client.discover();
    auto error_of = [&] { return redfish_error([&] { (void)client.read(meters); }); };
    bmc.set_fault(FakeBmc::Fault::unavailable);
    EXPECT_NE(error_of().find("HTTP 503"), std::string::npos);
    bmc.set_fault(FakeBmc::Fault::malformed);
    EXPECT_NE(error_of().find("did not answer a JSON object"), std::string::npos);
    bmc.set_fault(FakeBmc::Fault::huge);
    EXPECT_NE(error_of().find("exceeds 1048576 bytes"), std::string::npos);
    bmc.set_fault(FakeBmc::Fault::none);
    EXPECT_EQ(error_of(), "no error");
}

TEST(RedfishClient, ASlowBmcCostsTheTimeoutNotMore) {
    testing::TempDir dir;
    FakeBmc bmc(FakeBmcOptions{}, dir.path());
    BmcConfig config = config_for(bmc);
    config.request_timeout = 500ms;
    RedfishClient client(config);
    const auto meters = client.discover();
    bmc.set_fault(FakeBmc::Fault::slow, 5.0);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW((void)client.read(meters), RedfishError);
    // The bound is the feature: the timeout, not the BMC's 5 s.
    EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
    bmc.set_fault(FakeBmc::Fault::none);
}

TEST(RedfishClient, ReadingsThatAreNotPowerAreRefused) {
    EXPECT_FALSE(redfish_watts(nlohmann::json::parse(R"({"Reading": null})")));
    EXPECT_FALSE(redfish_watts(nlohmann::json::parse(R"({"Reading": -5})")));
    EXPECT_FALSE(redfish_watts(nlohmann::json::parse(R"({"Reading": 1e300})")));
    EXPECT_DOUBLE_EQ(*redfish_watts(nlohmann::json::parse(R"({"Reading": 12.5})")), 12.5);
    EXPECT_DOUBLE_EQ(*redfish_watts(nlohmann::json::parse("344")), 344.0);
}

/// Reads the source until `done` holds for a sample set, at most `limit`; returns the last samples.
std::vector<keplershm_zone_sample> read_until(EnergySource& source, std::chrono::milliseconds limit,
                                              const std::function<bool(const std::vector<keplershm_zone_sample>&)>& done) {
    std::vector<keplershm_zone_sample> samples(source.zones().size());
    const auto deadline = std::chrono::steady_clock::now() + limit;
    do {
        std::this_thread::sleep_for(50ms);
        source.read(samples, monotonic_now_ns());
    } while (!done(samples) && std::chrono::steady_clock::now() < deadline);
    return samples;
}

TEST(RedfishSource, HeldPowerBecomesEnergyAndAHungBmcNeverDelaysARead) {
    testing::TempDir dir;
    FakeBmc bmc(FakeBmcOptions{}, dir.path());
    bmc.set_input_watts("1U", "Bay1", 200);
    bmc.set_input_watts("1U", "Bay2", 100);
    BmcConfig config = config_for(bmc);
    config.poll_interval = 100ms;
    config.max_age = 600ms;
    config.request_timeout = 3s;
    std::unique_ptr<EnergySource> source = make_redfish_source(config);
    ASSERT_EQ(source->zones().size(), 2u);
    EXPECT_EQ(source->zones()[0].kind, static_cast<uint32_t>(KEPLERSHM_ZONE_PLATFORM));
    EXPECT_EQ(source->zones()[0].power_source, static_cast<uint32_t>(KEPLERSHM_POWER_REDFISH));
    EXPECT_EQ(keplershm::get_text(source->zones()[1].name), "1U/Bay2");

    std::vector<keplershm_zone_sample> first(2), second(2);
    source->read(first, monotonic_now_ns());  // the baseline
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(400ms);
    source->read(second, monotonic_now_ns());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(second[0].flags & KEPLERSHM_ZONE_VALID);
    EXPECT_TRUE(second[0].flags & KEPLERSHM_ZONE_INTEGRATED);
    // Constant power held between readings: the energy is power × time, whatever the poll phase.
    EXPECT_NEAR(static_cast<double>(second[0].energy_delta_uj) / 1e6, 200 * seconds, 200 * 0.05);
    EXPECT_NEAR(static_cast<double>(second[1].energy_delta_uj) / 1e6, 100 * seconds, 100 * 0.05);

    bmc.set_fault(FakeBmc::Fault::hang);
    const auto stale = read_until(*source, 5s, [](const auto& s) { return (s[0].flags & KEPLERSHM_ZONE_STALE) != 0; });
    EXPECT_TRUE(stale[0].flags & KEPLERSHM_ZONE_STALE) << "a hung BMC's zones go stale after max_age";
    EXPECT_FALSE(stale[0].flags & KEPLERSHM_ZONE_VALID);
    EXPECT_EQ(stale[0].energy_delta_uj, 0u);
    const auto before = std::chrono::steady_clock::now();
    source->read(first, monotonic_now_ns());
    EXPECT_LT(std::chrono::steady_clock::now() - before, 1s) << "read() waited for the hung BMC";

    bmc.set_fault(FakeBmc::Fault::none);
    const auto back = read_until(*source, 10s, [](const auto& s) { return (s[0].flags & KEPLERSHM_ZONE_VALID) != 0; });
    EXPECT_TRUE(back[0].flags & KEPLERSHM_ZONE_VALID) << "zones come back when the BMC answers again";
    EXPECT_GE(back[0].energy_total_uj, second[0].energy_total_uj) << "totals never go back";
}

/// A BMC with one supply, 1U/Bay1, drawing 100 W and publishing its energy counter (10 kWh to start),
/// and the source reading it every `poll` (readings stale after 2 s).
struct CountingBmc {
    explicit CountingBmc(std::chrono::milliseconds poll) : bmc(options(), dir.path()) {
        bmc.set_input_watts("1U", "Bay1", 100);
        bmc.set_energy_kwh("1U", "Bay1", 10.0);
        BmcConfig config = config_for(bmc);
        config.poll_interval = poll;
        config.max_age = 2s;
        source = make_redfish_source(config);
    }
    static FakeBmcOptions options() {
        FakeBmcOptions o;
        o.energy_kwh = true;
        o.power_supplies = {"Bay1"};
        return o;
    }
    testing::TempDir dir;
    FakeBmc bmc;
    std::unique_ptr<EnergySource> source;
};

TEST(RedfishSource, TheSuppliesOwnCounterDisciplinesTheTotal) {
    CountingBmc counting(100ms);
    FakeBmc& bmc = counting.bmc;
    EnergySource* source = counting.source.get();
    std::vector<keplershm_zone_sample> s(1);
    source->read(s, monotonic_now_ns());  // baseline
    std::this_thread::sleep_for(300ms);
    source->read(s, monotonic_now_ns());
    EXPECT_FALSE(s[0].flags & KEPLERSHM_ZONE_INTEGRATED) << "energy is the BMC's own";
    const uint64_t before = s[0].energy_total_uj;
    bmc.set_energy_kwh("1U", "Bay1", 10.001);  // 3.6 kJ more than 100 W explains: the counter wins
    const auto after = read_until(*source, 3s, [&](const auto& x) { return x[0].energy_total_uj >= before + 3'000'000'000ull; });
    EXPECT_GE(after[0].energy_total_uj, before + 3'600'000'000ull - 100'000'000ull);
    EXPECT_LT(after[0].energy_total_uj, before + 3'600'000'000ull + 1'000'000'000ull);
}

// A supply's energy counter that jumps by 1e5 kWh (the frames got 3.6e11 J in 0.5 s) and by 1e12 kWh
// (past what a 64-bit µJ total holds; the total went back to 0): the jumps are no energy, the total
// never goes back, and the zone keeps counting its 100 W from the counter's new value.
TEST(RedfishSource, AnEnergyCounterThatJumpsAddsNothingAndTheTotalNeverGoesBack) {
    CountingBmc counting(50ms);
    FakeBmc& bmc = counting.bmc;
    EnergySource* source = counting.source.get();
    std::vector<keplershm_zone_sample> s(1);
    source->read(s, monotonic_now_ns());  // the baseline
    const auto start = std::chrono::steady_clock::now();
    uint64_t total = s[0].energy_total_uj, counted = 0;
    auto run_for = [&](std::chrono::milliseconds span) {
        const auto end = std::chrono::steady_clock::now() + span;
        while (std::chrono::steady_clock::now() < end) {
            std::this_thread::sleep_for(100ms);
            source->read(s, monotonic_now_ns());
            EXPECT_GE(s[0].energy_total_uj, total) << "the total went back";
            EXPECT_LE(s[0].energy_delta_uj, 1'000'000'000u) << "more than 1 kJ in 0.1 s from a 100 W supply";
            total = s[0].energy_total_uj;
            counted += s[0].energy_delta_uj;
        }
    };
    run_for(500ms);
    bmc.set_energy_kwh("1U", "Bay1", 10.0 + 1e5);
    run_for(700ms);
    bmc.set_energy_kwh("1U", "Bay1", 1e12);
    run_for(700ms);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_TRUE(s[0].flags & KEPLERSHM_ZONE_VALID) << "counting went on after the jumps";
    EXPECT_NEAR(static_cast<double>(counted) / 1e6, 100 * seconds, 100 * 0.25) << "100 W all along, nothing from the jumps";
}

TEST(RedfishSource, ABmcWithNothingToReadIsAClearError) {
    testing::TempDir dir;
    FakeBmcOptions options;
    options.power_subsystem = false;
    options.power_control = false;
    FakeBmc bmc(options, dir.path());
    const std::string error = redfish_error([&] { (void)make_redfish_source(config_for(bmc)); });
    EXPECT_NE(error.find("no power supply metrics and no PowerControl"), std::string::npos) << error;
}

TEST(BmcConfig, KeplersNodeToBmcMapWithSecretFiles) {
    testing::TempDir dir;
    dir.write("user", "admin\n");
    dir.write("pass", "s3cret\n");
    dir.write("bmc.json", R"({"nodes": {"node-a": "bmc-1"},
        "bmcs": {"bmc-1": {"endpoint": "https://10.0.0.9", "username_file": ")" + (dir.path() / "user").string() +
                              R"(", "password_file": ")" + (dir.path() / "pass").string() + R"(", "auth": "basic"}}})");
    const BmcConfig c = bmc_config_for_node((dir.path() / "bmc.json").string(), "node-a");
    EXPECT_EQ(c.id, "bmc-1");
    EXPECT_EQ(c.endpoint, "https://10.0.0.9");
    EXPECT_EQ(c.username, "admin");
    EXPECT_EQ(c.password, "s3cret");
    EXPECT_TRUE(c.basic_auth);
    auto error_of = [&](const std::string& text, const std::string& node = "node-a") {
        dir.write("bad.json", text);
        try {
            (void)bmc_config_for_node((dir.path() / "bad.json").string(), node);
        } catch (const BmcConfigError& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    EXPECT_NE(error_of("{").find("not a JSON object"), std::string::npos);
    EXPECT_NE(error_of(R"({"nodes": {}, "bmcs": {}})").find("no BMC for node \"node-a\""), std::string::npos);
    EXPECT_NE(error_of(R"({"nodes": {"node-a": "x"}, "bmcs": {}})").find("which \"bmcs\" lacks"), std::string::npos);
    EXPECT_NE(error_of(R"({"nodes": {"node-a": "x"}, "bmcs": {"x": {"endpoint": "https://u:p@h/redfish"}}})").find("no path, no credentials"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"nodes": {"node-a": "x"}, "bmcs": {"x": {"endpoint": "https://h", "username": "u"}}})").find("needs a password"),
              std::string::npos);
}

TEST(BmcConfig, CredentialsOverPlainHttpOnlyWhenTheOperatorAllowsIt) {
    BmcConfig c;
    c.id = "bmc-1";
    c.endpoint = "http://10.0.0.9";
    EXPECT_NO_THROW(check_bmc_transport(c)) << "no credentials, nothing to leak";
    c.username = "admin";
    c.password = "secret";
    try {
        check_bmc_transport(c);
        ADD_FAILURE() << "credentials over plain http were accepted";
    } catch (const BmcConfigError& e) {
        EXPECT_NE(std::string(e.what()).find("clear text"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("allow_plain_http"), std::string::npos) << e.what();
    }
    c.allow_plain_http = true;
    EXPECT_NO_THROW(check_bmc_transport(c));
    c.allow_plain_http = false;
    c.endpoint = "https://10.0.0.9";
    EXPECT_NO_THROW(check_bmc_transport(c));

    testing::TempDir dir;
    dir.write("bmc.json", R"({"nodes": {"node-a": "bmc-1"},
        "bmcs": {"bmc-1": {"endpoint": "http://10.0.0.9", "username": "u", "password": "p", "allow_plain_http": true}}})");
    EXPECT_TRUE(bmc_config_for_node((dir.path() / "bmc.json").string(), "node-a").allow_plain_http);
    dir.write("bmc.json", R"({"nodes": {"node-a": "bmc-1"}, "bmcs": {"bmc-1": {"endpoint": "http://h", "allow_plain_http": "yes"}}})");
    EXPECT_THROW((void)bmc_config_for_node((dir.path() / "bmc.json").string(), "node-a"), BmcConfigError);
}

TEST(EnergySourceArithmetic, HeldPowerIsConsistentAndGapsAreNotBridged) {
    HeldPowerIntegral p(1'000'000'000);  // max age 1 s
    EXPECT_FALSE(p.total_uj(0));
    p.add(1'000'000'000, 100);
    EXPECT_DOUBLE_EQ(*p.total_uj(1'500'000'000), 50e6);  // 100 W held for 0.5 s
    p.add(2'000'000'000, 300);
    EXPECT_DOUBLE_EQ(*p.total_uj(2'000'000'000), 100e6) << "what extrapolation predicted: no step back";
    EXPECT_DOUBLE_EQ(*p.total_uj(2'500'000'000), 250e6);
    EXPECT_DOUBLE_EQ(*p.total_uj(1'500'000'000), 50e6) << "a frame that ended before the newest reading arrived";
    EXPECT_TRUE(p.stale(3'500'000'000));
    EXPECT_DOUBLE_EQ(*p.total_uj(9'000'000'000), 400e6) << "held at most max_age";
    p.add(9'000'000'000, 10);
    EXPECT_DOUBLE_EQ(*p.total_uj(9'000'000'000), 400e6) << "the gap's energy is unknown: not counted";
}

TEST(EnergySourceArithmetic, PublishedTotalsNeverDecreaseAndCarryFractions) {
    ZoneTotal total("test", 1e9);
    keplershm_zone_sample s{};
    uint64_t t = 1'000'000'000;
    auto publish = [&](double uj, uint32_t flags) { total.publish(uj, t += 1'000'000'000, flags, s); };
    publish(1000.0, 0);
    EXPECT_FALSE(s.flags & KEPLERSHM_ZONE_VALID) << "the first total is the baseline";
    publish(1500.7, KEPLERSHM_ZONE_INTEGRATED);
    EXPECT_EQ(s.energy_delta_uj, 500u);
    EXPECT_EQ(s.flags, static_cast<uint32_t>(KEPLERSHM_ZONE_VALID | KEPLERSHM_ZONE_INTEGRATED));
    publish(1501.0, 0);
    EXPECT_EQ(s.energy_delta_uj, 1u) << "fractions carry";
    publish(1200.0, 0);
    EXPECT_EQ(s.energy_delta_uj, 0u) << "a meter that counted less is held back, never negative";
    EXPECT_EQ(s.energy_total_uj, 501u);
    publish(1600.0, 0);
    EXPECT_EQ(s.energy_delta_uj, 99u);
    total.publish_invalid(KEPLERSHM_ZONE_STALE, s);
    EXPECT_EQ(s.energy_total_uj, 600u);
    EXPECT_EQ(s.flags, static_cast<uint32_t>(KEPLERSHM_ZONE_STALE));
}

// Jumps a BMC, a driver or a reset can put in a meter's total, one second apart on a 1 kW zone: a step
// just above the ceiling, one of 1e5 kWh, one of 1e12 kWh (beyond what a 64-bit µJ count holds), and
// totals that are not numbers. Each interval with a jump is invalid, the published total never moves
// back or jumps, and counting goes on from the meter's new value.
TEST(EnergySourceArithmetic, TotalsThatJumpBeyondTheCeilingRebaseTheZone) {
    constexpr double kWatts = 1000, kSecondUj = 1e9;  // 1 kW for 1 s
    ZoneTotal total("test", kWatts);
    keplershm_zone_sample s{};
    uint64_t t = 0;
    double meter = 5e9;
    uint64_t published = 0;
    auto step = [&](double by) {
        meter += by;
        total.publish(meter, t += 1'000'000'000, 0, s);
        EXPECT_GE(s.energy_total_uj, published) << "the total went back at meter " << meter;
        published = s.energy_total_uj;
    };
    step(0);  // the baseline
    step(0.5 * kSecondUj);
    EXPECT_EQ(s.energy_delta_uj, 500'000'000u);
    EXPECT_TRUE(s.flags & KEPLERSHM_ZONE_VALID);
    for (const double jump : {1.01 * kSecondUj, 1e5 * 3.6e12, 1e12 * 3.6e12}) {
        step(jump);
        EXPECT_FALSE(s.flags & KEPLERSHM_ZONE_VALID) << jump;
        EXPECT_EQ(s.energy_delta_uj, 0u) << jump;
        if (jump > 1e20) {  // past 2^64 µJ a double's step is kilojoules: the meter restarts (the BMC source does so)
            meter = 5e9;
            total.rebase();
            step(0);
        }
        step(0.25 * kSecondUj);
        EXPECT_TRUE(s.flags & KEPLERSHM_ZONE_VALID) << "counting goes on from the new value after the jump of " << jump;
        EXPECT_NEAR(static_cast<double>(s.energy_delta_uj), 250e6, 1e3) << jump;
    }
    for (const double not_a_number : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
        total.publish(not_a_number, t += 1'000'000'000, 0, s);
        EXPECT_FALSE(s.flags & KEPLERSHM_ZONE_VALID);
        EXPECT_EQ(s.energy_total_uj, published);
        step(0);
        step(0.1 * kSecondUj);
        EXPECT_EQ(s.energy_delta_uj, 100'000'000u) << "after " << not_a_number;
    }
    // Steps (counters, integrated power) are bounded the same way.
    total.publish_step(2 * kSecondUj, 1'000'000'000, 0, s);
    EXPECT_FALSE(s.flags & KEPLERSHM_ZONE_VALID);
    EXPECT_EQ(s.energy_total_uj, published);
    total.publish_step(std::numeric_limits<double>::infinity(), 1'000'000'000, 0, s);
    EXPECT_FALSE(s.flags & KEPLERSHM_ZONE_VALID);
    total.publish_step(0.75 * kSecondUj, 1'000'000'000, KEPLERSHM_ZONE_WRAPPED, s);
    EXPECT_EQ(s.flags, static_cast<uint32_t>(KEPLERSHM_ZONE_VALID | KEPLERSHM_ZONE_WRAPPED));
    EXPECT_EQ(s.energy_delta_uj, 750'000'000u);
    EXPECT_EQ(total.jumps(), 7u);
}

}  // namespace
}  // namespace kepler::collect
