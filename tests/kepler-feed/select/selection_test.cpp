// parse_selection: what a subscriber may ask for, checked before anything is sent.
#include <gtest/gtest.h>

#include "select/encode.hpp"
#include "select/selection.hpp"

namespace kepler::feed {
namespace {

std::optional<Selection> parse(const v1::SubscribeRequest& request, std::string& error) {
    return parse_selection(request, library_schema(), Limits{}, error);
}

TEST(Selection, EmptyRequestMeansEverySectionEveryField) {
    std::string error;
    const auto s = parse(v1::SubscribeRequest{}, error);
    ASSERT_TRUE(s) << error;
    EXPECT_EQ(s->sections.size(), section_kinds().size());
    for (const SectionPlan& plan : s->sections) EXPECT_TRUE(plan.fields.empty());
}

TEST(Selection, NamedFieldsAreKept) {
    v1::SubscribeRequest r;
    auto* section = r.add_sections();
    section->set_name("processes");
    section->add_fields("pid");
    section->add_fields("cpu_time_ns");
    std::string error;
    const auto s = parse(r, error);
    ASSERT_TRUE(s) << error;
    ASSERT_EQ(s->sections.size(), 1u);
    EXPECT_EQ(s->sections[0].fields, (std::vector<std::string>{"pid", "cpu_time_ns"}));
}

TEST(Selection, UnknownSectionAndFieldAreNamed) {
    std::string error;
    v1::SubscribeRequest r;
    r.add_sections()->set_name("gpus");
    EXPECT_FALSE(parse(r, error));
    EXPECT_NE(error.find("unknown section 'gpus'"), std::string::npos) << error;
    r.mutable_sections(0)->set_name("processes");
    r.mutable_sections(0)->add_fields("watts");
    EXPECT_FALSE(parse(r, error));
    EXPECT_NE(error.find("unknown field 'watts' in section 'processes'"), std::string::npos) << error;
    EXPECT_NE(error.find("cpu_time_ns"), std::string::npos) << "the message lists the known fields: " << error;
}

TEST(Selection, HostileSizesAreRefused) {
    std::string error;
    v1::SubscribeRequest r;
    r.mutable_filter()->set_top_n_by_cpu(1u << 30);
    EXPECT_FALSE(parse(r, error));
    EXPECT_NE(error.find("top_n_by_cpu"), std::string::npos) << error;

    r.Clear();
    for (int i = 0; i < 100000; ++i) r.mutable_filter()->add_namespaces("ns");
    EXPECT_FALSE(parse(r, error));
    EXPECT_NE(error.find("at most"), std::string::npos) << error;

    r.Clear();
    r.mutable_filter()->add_pods(std::string(1 << 20, '\x01'));
    EXPECT_FALSE(parse(r, error));
    EXPECT_LT(error.size(), 400u) << "a hostile value is not echoed in full";

    r.Clear();
    for (int i = 0; i < 8; ++i) r.add_sections()->set_name("zones");
    EXPECT_FALSE(parse(r, error));

    r.Clear();
    r.add_sections()->set_name("zones");
    r.add_sections()->set_name("zones");
    EXPECT_FALSE(parse(r, error));
    EXPECT_NE(error.find("twice"), std::string::npos) << error;

    r.Clear();
    auto* strings = r.add_sections();
    strings->set_name("strings");
    strings->add_fields("pid");
    EXPECT_FALSE(parse(r, error));
}

TEST(Encode, TextFromTheSegmentBecomesValidUtf8) {
    EXPECT_EQ(utf8("node-1"), "node-1");
    EXPECT_EQ(utf8("caf\xc3\xa9"), "caf\xc3\xa9");
    EXPECT_EQ(utf8("bad\xff\xc3"), "bad??");
    EXPECT_EQ(utf8("\xe2\x82"), "??") << "a sequence cut short";
}

}  // namespace
}  // namespace kepler::feed
