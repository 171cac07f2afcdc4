#include "worker/text_ops.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/json.h"
#include "tests/unit/test_util.h"
#include "worker/op.h"

namespace gm {
namespace {

// tests/data/text/vocab.txt, id = line number - 1:
// 0 [PAD] 1 [UNK] 2 [CLS] 3 [SEP] 4 the 5 un 6 ##aff 7 ##able 8 hello 9 world
// 10 ! 11 , 12 . 13 cafe 14 want 15 ##ed 16 to 17 go 18 runn 19 ##ing 20 he 21 你
Result<std::unique_ptr<Op>> MakeOp(const std::string& json_text, const std::string& base_dir) {
  GM_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(json_text, "pipeline.json"));
  OpEnv env;
  env.base_dir = base_dir;
  return OpRegistry::BuiltIn().Make(JsonNode(j, "pipeline.json", "$.stages[0]"), env);
}

std::vector<int32_t> Ids(const Sample& s) {
  std::vector<int32_t> out(s.tensor.num_elements());
  if (!out.empty()) std::memcpy(out.data(), s.tensor.bytes.data(), out.size() * sizeof(int32_t));
  return out;
}

std::vector<int32_t> Tokenize(const std::string& json_text, const std::string& text) {
  auto op = MakeOp(json_text, testing::SourcePath("tests/data/text"));
  EXPECT_TRUE(op.ok()) << op.status().message();
  if (!op.ok()) return {};
  Sample s;
  s.data = text;
  Status st = (*op)->Apply(s, RunContext{});
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(s.tensor.dtype, DType::kInt32);
  EXPECT_EQ(s.tensor.shape.size(), 1u);
  EXPECT_EQ(s.layout, Layout::kNone);
  return Ids(s);
}

constexpr char kWhitespace[] = R"({"op":"tokenize","kind":"whitespace","vocab":"vocab.txt"})";
constexpr char kWordPiece[] = R"({"op":"tokenize","kind":"wordpiece","vocab":"vocab.txt"})";

TEST(TokenizeBytesTest, GivenUtf8TextWhenTokenizedThenIdsAreBytesPlusOffset) {
  EXPECT_EQ(Tokenize(R"({"op":"tokenize","kind":"bytes"})", "a\xc3\xa9"),
            (std::vector<int32_t>{97, 0xC3, 0xA9}));
  EXPECT_EQ(Tokenize(R"({"op":"tokenize","kind":"bytes","offset":3})", "a\xc3\xa9"),
            (std::vector<int32_t>{100, 0xC6, 0xAC}));
  EXPECT_TRUE(Tokenize(R"({"op":"tokenize","kind":"bytes"})", "").empty());
}

TEST(TokenizeWhitespaceTest, GivenPunctuationWhenTokenizedThenItIsSplitOff) {
  EXPECT_EQ(Tokenize(kWhitespace, "Hello, World!"), (std::vector<int32_t>{8, 11, 9, 10}));
}

TEST(TokenizeWhitespaceTest, GivenAccentsAndUnknownWordsWhenLoweredThenFoldedOrUnk) {
  EXPECT_EQ(Tokenize(kWhitespace, "  Caf\xc3\xa9\tunaffable\n"), (std::vector<int32_t>{13, 1}));
}

TEST(TokenizeWhitespaceTest, GivenLowercaseOffWhenTokenizedThenCaseMatters) {
  EXPECT_EQ(Tokenize(R"({"op":"tokenize","kind":"whitespace","vocab":"vocab.txt",
                         "lowercase":false})",
                     "Hello hello"),
            (std::vector<int32_t>{1, 8}));
}

TEST(TokenizeWhitespaceTest, GivenCjkControlAndInvalidBytesWhenTokenizedThenBertRulesApply) {
  // Each CJK character is a token; NUL and an invalid byte are dropped inside a word.
  EXPECT_EQ(Tokenize(kWhitespace, "\xe4\xbd\xa0\xe5\xa5\xbd!"), (std::vector<int32_t>{21, 1, 10}));
  EXPECT_EQ(Tokenize(kWhitespace, std::string("hel\0lo wor\xffld", 14)),
            (std::vector<int32_t>{8, 9}));
}

TEST(TokenizeWordPieceTest, GivenBertExamplesWhenTokenizedThenGreedyLongestMatchFirst) {
  // "unaffable" -> un ##aff ##able; "wanted" -> want ##ed; "running" -> runn ##ing.
  EXPECT_EQ(Tokenize(kWordPiece, "He wanted to go running, unaffable."),
            (std::vector<int32_t>{20, 14, 15, 16, 17, 18, 19, 11, 5, 6, 7, 12}));
}

TEST(TokenizeWordPieceTest, GivenWordWithoutFullCoverWhenTokenizedThenOneUnk) {
  EXPECT_EQ(Tokenize(kWordPiece, "unaffablex the"), (std::vector<int32_t>{1, 4}));
}

TEST(TokenizeWordPieceTest, GivenWordOverMaxCharsWhenTokenizedThenUnk) {
  EXPECT_EQ(Tokenize(R"({"op":"tokenize","kind":"wordpiece","vocab":"vocab.txt",
                         "max_chars_per_word":5})",
                     "wanted want"),
            (std::vector<int32_t>{1, 14}));
}

TEST(VocabTest, GivenCrlfLinesWhenLoadedThenIdsAreLineNumbers) {
  testing::TempDir dir;
  auto vocab = Vocab::Load(dir.Write("v.txt", "a\r\nb\r\n\r\nc"));
  ASSERT_TRUE(vocab.ok()) << vocab.status().message();
  EXPECT_EQ(vocab->Find("b"), 1);
  EXPECT_EQ(vocab->Find("c"), 3);
  EXPECT_FALSE(vocab->Find("d").has_value());
}

TEST(TokenizeConfigTest, GivenMissingVocabWhenBuiltThenErrorNamesFileAndPath) {
  auto op = MakeOp(R"({"op":"tokenize","kind":"wordpiece","vocab":"nope.txt"})",
                   testing::SourcePath("tests/data/text"));
  ASSERT_FALSE(op.ok());
  EXPECT_NE(op.status().message().find("pipeline.json: $.stages[0].vocab"), std::string::npos)
      << op.status().message();
  EXPECT_NE(op.status().message().find("nope.txt"), std::string::npos);
}

TEST(TokenizeConfigTest, GivenBadKeysOrUnkWhenBuiltThenErrors) {
  std::string dir = testing::SourcePath("tests/data/text");
  auto typo = MakeOp(R"({"op":"tokenize","kind":"bytes","ofset":1})", dir);
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("unknown key \"ofset\""), std::string::npos);
  auto unk =
      MakeOp(R"({"op":"tokenize","kind":"whitespace","vocab":"vocab.txt","unk":"<unk>"})", dir);
  ASSERT_FALSE(unk.ok());
  EXPECT_NE(unk.status().message().find("<unk>"), std::string::npos);
  auto kind = MakeOp(R"({"op":"tokenize","kind":"bpe"})", dir);
  ASSERT_FALSE(kind.ok());
  EXPECT_NE(kind.status().message().find("$.stages[0].kind"), std::string::npos);
}

Sample IntSample(std::vector<int32_t> ids) {
  Sample s;
  s.tensor.Reset(DType::kInt32, {static_cast<int64_t>(ids.size())});
  std::memcpy(s.tensor.bytes.data(), ids.data(), ids.size() * sizeof(int32_t));
  return s;
}

TEST(PadTest, GivenShortSequenceWhenPaddedThenFilledWithPadId) {
  auto op = MakeOp(R"({"op":"pad","length":5,"pad_id":9})", "");
  ASSERT_TRUE(op.ok()) << op.status().message();
  Sample s = IntSample({1, 2, 3});
  ASSERT_TRUE((*op)->Apply(s, RunContext{}).ok());
  EXPECT_EQ(s.tensor.shape, (std::vector<int64_t>{5}));
  EXPECT_EQ(Ids(s), (std::vector<int32_t>{1, 2, 3, 9, 9}));
}

TEST(PadTest, GivenLongSequenceWhenPaddedThenTruncated) {
  auto op = MakeOp(R"({"op":"pad","length":2})", "");
  ASSERT_TRUE(op.ok());
  Sample s = IntSample({1, 2, 3});
  ASSERT_TRUE((*op)->Apply(s, RunContext{}).ok());
  EXPECT_EQ(Ids(s), (std::vector<int32_t>{1, 2}));
}

TEST(PadTest, GivenInt64AndNegativePadWhenPaddedThenDtypeIsKept) {
  auto op = MakeOp(R"({"op":"pad","length":3,"pad_id":-1})", "");
  ASSERT_TRUE(op.ok());
  Sample s;
  s.tensor.Reset(DType::kInt64, {1});
  s.tensor.data<int64_t>()[0] = 5;
  ASSERT_TRUE((*op)->Apply(s, RunContext{}).ok());
  ASSERT_EQ(s.tensor.dtype, DType::kInt64);
  EXPECT_EQ(s.tensor.data<int64_t>()[2], -1);
  EXPECT_EQ(s.tensor.bytes.size(), 24u);
}

TEST(PadTest, GivenNonVectorOrBadLengthThenErrors) {
  auto op = MakeOp(R"({"op":"pad","length":3})", "");
  ASSERT_TRUE(op.ok());
  Sample s;
  s.tensor.Reset(DType::kUInt8, {2, 2});
  Status st = (*op)->Apply(s, RunContext{});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("[2, 2]"), std::string::npos) << st.message();
  EXPECT_FALSE(MakeOp(R"({"op":"pad","length":0})", "").ok());
  EXPECT_FALSE(MakeOp(R"({"op":"pad"})", "").ok());
}

}  // namespace
}  // namespace gm
