// Who may subscribe: a bearer token refuses calls without it; TLS with a server certificate, and with
// required client certificates. Certificates are made in the test with the openssl CLI (skipped,
// with the reason, where it is missing).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "support/feed_fixture.hpp"

namespace feed_test {
namespace {

class Security : public ::testing::Test {
protected:
    void SetUp() override { collector_ = start_collector(tmp_, name_); }

    /// A self-signed certificate for 127.0.0.1 (also its own CA); false when openssl is unavailable.
    bool make_certificate(const std::string& stem) {
        const e2e::Result r = e2e::run({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                                        "-subj", "/CN=" + stem, "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                                        "-keyout", (tmp_ / (stem + ".key")).string(), "-out", (tmp_ / (stem + ".crt")).string()},
                                       60s);
        return r.exit.code == 0;
    }
    std::string pem(const std::string& file) { return e2e::read_file(tmp_ / file); }

    e2e::TempDir tmp_;
    std::string name_ = e2e::unique_name("feed-sec");
    std::unique_ptr<Daemon> collector_;
};

TEST_F(Security, TokenIsRequiredWhenConfigured) {
    e2e::write_file(tmp_ / "token", "s3cret-token\n");
    Feed feed(tmp_, name_, {"--token-file", (tmp_ / "token").string()});
    ASSERT_NE(feed.port(), 0) << feed.log();
    auto stub = connect(feed.target());
    v1::Description d;
    grpc::Status s = describe(*stub, d);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    EXPECT_EQ(describe(*stub, d, "wrong-token").error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(describe(*stub, d, "s3cret-token-and-more").error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(refused(*stub, v1::SubscribeRequest{}).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    ASSERT_TRUE(describe(*stub, d, "s3cret-token").ok());
    Stream stream = subscribe(*stub, request_for({"zones"}), kDeadline, "s3cret-token");
    v1::Frame frame;
    EXPECT_TRUE(stream.read(frame)) << stream.finish().error_message();
}

TEST_F(Security, TlsServerCertificate) {
    if (!make_certificate("server")) GTEST_SKIP() << "openssl CLI not available: cannot make a test certificate";
    Feed feed(tmp_, name_, {"--tls-cert", (tmp_ / "server.crt").string(), "--tls-key", (tmp_ / "server.key").string()});
    ASSERT_NE(feed.port(), 0) << feed.log();
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = pem("server.crt");
    auto stub = connect(feed.target(), grpc::SslCredentials(ssl));
    ASSERT_TRUE(wait_for_frames(*stub)) << feed.log();
    Stream stream = subscribe(*stub, request_for({"zones", "unaccounted"}));
    v1::Frame frame;
    EXPECT_TRUE(stream.read(frame)) << stream.finish().error_message();

    // A plain-text client cannot talk to it (bounded: the channel gives up on the handshake).
    auto plain = connect(feed.target());
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::Description d;
    EXPECT_FALSE(plain->Describe(&context, v1::DescribeRequest{}, &d).ok());
}

TEST_F(Security, TlsClientCertificatesAreRequiredWithClientCa) {
    if (!make_certificate("server") || !make_certificate("client"))
        GTEST_SKIP() << "openssl CLI not available: cannot make test certificates";
    Feed feed(tmp_, name_, {"--tls-cert", (tmp_ / "server.crt").string(), "--tls-key", (tmp_ / "server.key").string(),
                            "--tls-client-ca", (tmp_ / "client.crt").string()});
    ASSERT_NE(feed.port(), 0) << feed.log();
    grpc::SslCredentialsOptions with_cert;
    with_cert.pem_root_certs = pem("server.crt");
    with_cert.pem_private_key = pem("client.key");
    with_cert.pem_cert_chain = pem("client.crt");
    auto stub = connect(feed.target(), grpc::SslCredentials(with_cert));
    ASSERT_TRUE(wait_for_frames(*stub)) << feed.log();

    grpc::SslCredentialsOptions without_cert;
    without_cert.pem_root_certs = pem("server.crt");
    auto anonymous = connect(feed.target(), grpc::SslCredentials(without_cert));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::Description d;
    EXPECT_FALSE(anonymous->Describe(&context, v1::DescribeRequest{}, &d).ok());
}

}  // namespace
}  // namespace feed_test
