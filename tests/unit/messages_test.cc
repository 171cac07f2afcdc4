// Typed messages (dataplane/messages.h): what each Decode accepts and how it
// names what it refuses; Encode and Decode agree.
#include "dataplane/messages.h"

#include <gtest/gtest.h>

#include "core/log.h"

namespace gm {
namespace {

using nlohmann::json;

template <typename T>
std::string Refusal(const Result<T>& r) {
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kCorrupt) << r.status().message();
  return r.status().message();
}

TEST(MessagesTest, GivenEncodedMessagesWhenDecodedThenTheyRoundTrip) {
  SplitDoneMsg done{3, 17, 4, json::array({{{"name", "decode"}}})};
  auto d = SplitDoneMsg::Decode(done.Encode());
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->epoch, 3u);
  EXPECT_EQ(d->split, 17u);
  EXPECT_EQ(d->batch_count, 4u);
  EXPECT_EQ(d->stages.size(), 1u);
  AckMsg ack{2, {{1, 0}, {1, 1}}};
  auto a = AckMsg::Decode(ack.Encode());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->batches, ack.batches);
  auto s = SubscribeMsg::Decode(SubscribeMsg{1, 4}.Encode(), true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->world_size, 4);
  EXPECT_EQ(CreditMsg::Decode(CreditMsg{7}.Encode())->n, 7u);
  EXPECT_EQ(ResumeMsg::Decode(ResumeMsg{1, 9}.Encode())->position, 9u);
  EXPECT_EQ(GetPlanMsg::Decode(GetPlanMsg{5}.Encode())->epoch, 5u);
  EXPECT_EQ(RegisterMsg::Decode(RegisterMsg{"10.0.0.1:4000"}.Encode())->data_addr, "10.0.0.1:4000");
}

TEST(MessagesTest, GivenFieldsOfTheWrongTypeOrRangeThenCorruptNamingMessageAndField) {
  EXPECT_NE(Refusal(SubscribeMsg::Decode({{"rank", "0"}, {"world_size", 1}}, true))
                .find("SUBSCRIBE: $.rank: expected an integer from 0 to 65535"),
            std::string::npos);
  EXPECT_NE(Refusal(SubscribeMsg::Decode({{"rank", 0}}, true)).find("world_size"),
            std::string::npos);
  EXPECT_NE(Refusal(SplitDoneMsg::Decode({{"epoch", 0}, {"split", 1}})).find("batch_count"),
            std::string::npos);
  EXPECT_NE(Refusal(SplitDoneMsg::Decode({{"epoch", 0}, {"split", 1}, {"batch_count", -1}}))
                .find("SPLIT_DONE: $.batch_count"),
            std::string::npos);
  EXPECT_NE(Refusal(SplitDoneMsg::Decode(
                        {{"epoch", 0}, {"split", 1}, {"batch_count", 1}, {"stages", "x"}}))
                .find("$.stages"),
            std::string::npos);
  EXPECT_NE(Refusal(AckMsg::Decode({{"epoch", 0}, {"batches", {{1}}}})).find("[split, split_batch]"),
            std::string::npos);
  EXPECT_NE(Refusal(AckMsg::Decode({{"epoch", 0}, {"batches", {{1, -2}}}})).find("ACK"),
            std::string::npos);
  json many = json::array();
  for (size_t i = 0; i <= kMaxAckBatches; ++i) many.push_back({0, i});
  EXPECT_NE(Refusal(AckMsg::Decode({{"epoch", 0}, {"batches", many}})).find("at most 4096"),
            std::string::npos);
  EXPECT_NE(Refusal(CreditMsg::Decode({{"n", 0}})).find("CREDIT: $.n"), std::string::npos);
  EXPECT_NE(Refusal(CreditMsg::Decode({{"n", 1.5}})).find("CREDIT"), std::string::npos);
  EXPECT_NE(Refusal(GetPlanMsg::Decode(json::object())).find("epoch"), std::string::npos);
  EXPECT_NE(Refusal(RegisterMsg::Decode({{"data_addr", "a\x1b[31m:1"}})).find("printable"),
            std::string::npos);
  EXPECT_NE(Refusal(RegisterMsg::Decode({{"data_addr", std::string(300, 'a')}})).find("256"),
            std::string::npos);
}

TEST(PeerTextTest, GivenControlCharactersAndLongTextThenTheyAreEscapedAndCut) {
  EXPECT_EQ(PeerText("a\x1b[31mb\r\n"), "a\\x1b[31mb\\x0d\\x0a");
  EXPECT_EQ(PeerText(std::string(10, 'x'), 4), "xxxx...");
  EXPECT_EQ(PeerText("caf\xc3\xa9"), "caf\\xc3\\xa9");
}

TEST(RateLimitTest, GivenRepeatedWarningsThenOnePerIntervalAndTheRestAreCounted) {
  RateLimit limit(3600);
  uint64_t held = 99;
  EXPECT_TRUE(limit.Allow(&held));
  EXPECT_EQ(held, 0u);
  EXPECT_FALSE(limit.Allow());
  EXPECT_FALSE(limit.Allow());
  RateLimit zero(0);
  EXPECT_TRUE(zero.Allow());
  EXPECT_TRUE(zero.Allow());
}

}  // namespace
}  // namespace gm
