#include "worker/tar_reader.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/unit/tar_fixture.h"
#include "tests/unit/test_util.h"

namespace gm {
namespace {

using testing::PackTar;
using testing::TarHeader;
using testing::TarPadded;
using testing::TempDir;

struct Read {
  std::vector<std::pair<std::string, std::string>> members;  // (name, data)
  Status status;
};

Read ReadAllMembers(std::string_view archive) {
  Read out;
  TarReader reader(archive);
  TarMember m;
  for (;;) {
    Result<bool> more = reader.Next(&m);
    if (!more.ok()) {
      out.status = more.status();
      return out;
    }
    if (!*more) return out;
    out.members.emplace_back(m.name, std::string(m.data));
  }
}

TEST(TarReaderTest, GivenGnuTarWithDirectory_WhenRead_ThenYieldsFilesInOrderAndSkipsDirectory) {
  TempDir dir;
  dir.Write("sub/b.txt", "bee");
  dir.Write("sub/a.txt", std::string(700, 'a'));
  dir.Write("empty.txt", "");
  PackTar(dir.path(), {"sub", "sub/b.txt", "sub/a.txt", "empty.txt"}, dir.path() + "/x.tar");

  Read r = ReadAllMembers(testing::ReadAll(dir.path() + "/x.tar"));

  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.members.size(), 3u);
  EXPECT_EQ(r.members[0], std::make_pair(std::string("sub/b.txt"), std::string("bee")));
  EXPECT_EQ(r.members[1], std::make_pair(std::string("sub/a.txt"), std::string(700, 'a')));
  EXPECT_EQ(r.members[2], std::make_pair(std::string("empty.txt"), std::string()));
}

TEST(TarReaderTest, GivenLongNamesInGnuAndPaxFormats_WhenRead_ThenFullNamesComeBack) {
  TempDir dir;
  std::string long_dir(120, 'd');
  std::string name = long_dir + "/" + std::string(110, 'f') + ".jpg";
  dir.Write(name, "long");
  dir.Write("short.cls", "3");
  for (std::string format : {"gnu", "pax", "ustar"}) {
    std::string out = dir.path() + "/" + format + ".tar";
    if (format == "ustar") {
      // ustar cannot hold a 110-character last component; use a prefix-split path.
      std::filesystem::create_directories(dir.path() + "/" + long_dir + "/x");
      dir.Write(long_dir + "/x/short.jpg", "long");
      PackTar(dir.path(), {long_dir + "/x/short.jpg", "short.cls"}, out, format);
    } else {
      PackTar(dir.path(), {name, "short.cls"}, out, format);
    }
    Read r = ReadAllMembers(testing::ReadAll(out));
    ASSERT_TRUE(r.status.ok()) << format << ": " << r.status.message();
    ASSERT_EQ(r.members.size(), 2u) << format;
    EXPECT_EQ(r.members[0].first, format == "ustar" ? long_dir + "/x/short.jpg" : name) << format;
    EXPECT_EQ(r.members[0].second, "long");
    EXPECT_EQ(r.members[1].first, "short.cls") << format;
  }
}

TEST(TarReaderTest, GivenHandcraftedGnuLongLinkEntry_WhenRead_ThenItNamesTheNextMember) {
  std::string long_name = std::string(300, 'n') + ".txt";
  std::string archive = TarHeader("././@LongLink", long_name.size() + 1, 'L') +
                        TarPadded(long_name + '\0') + TarHeader("truncated-name", 5) +
                        TarPadded("hello") + std::string(1024, '\0');

  Read r = ReadAllMembers(archive);

  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.members.size(), 1u);
  EXPECT_EQ(r.members[0].first, long_name);
  EXPECT_EQ(r.members[0].second, "hello");
}

TEST(TarReaderTest, GivenTruncatedMember_WhenRead_ThenEarlierMembersThenCorruptWithOffset) {
  std::string archive =
      TarHeader("a.txt", 3) + TarPadded("abc") + TarHeader("b.txt", 2000) + std::string(100, 'x');

  Read r = ReadAllMembers(archive);

  ASSERT_EQ(r.members.size(), 1u);
  EXPECT_EQ(r.members[0].first, "a.txt");
  EXPECT_EQ(r.status.code(), Code::kCorrupt);
  EXPECT_NE(r.status.message().find("byte 1024"), std::string::npos) << r.status.message();
  EXPECT_NE(r.status.message().find("b.txt"), std::string::npos) << r.status.message();
}

TEST(TarReaderTest, GivenTruncatedHeader_WhenRead_ThenCorruptAtThatHeader) {
  std::string archive = TarHeader("a.txt", 3) + TarPadded("abc") + std::string(100, 'x');

  Read r = ReadAllMembers(archive);

  EXPECT_EQ(r.members.size(), 1u);
  EXPECT_EQ(r.status.code(), Code::kCorrupt);
  EXPECT_NE(r.status.message().find("byte 1024: truncated header"), std::string::npos)
      << r.status.message();
}

TEST(TarReaderTest, GivenBadChecksum_WhenRead_ThenCorruptNamesChecksum) {
  TempDir dir;
  dir.Write("a.txt", "abc");
  dir.Write("b.txt", "def");
  PackTar(dir.path(), {"a.txt", "b.txt"}, dir.path() + "/x.tar");
  std::string archive = testing::ReadAll(dir.path() + "/x.tar");
  archive[1024] = 'B';  // second header's name: "b.txt" -> "B.txt"

  Read r = ReadAllMembers(archive);

  ASSERT_EQ(r.members.size(), 1u);
  EXPECT_EQ(r.status.code(), Code::kCorrupt);
  EXPECT_NE(r.status.message().find("byte 1024: header checksum mismatch"), std::string::npos)
      << r.status.message();
}

TEST(TarReaderTest, GivenZeroBytes_WhenRead_ThenEmptyArchive) {
  Read r = ReadAllMembers("");
  EXPECT_TRUE(r.status.ok());
  EXPECT_TRUE(r.members.empty());
}

TEST(TarReaderTest, GivenErrorOnce_WhenNextCalledAgain_ThenSameError) {
  std::string archive(600, 'z');
  TarReader reader(archive);
  TarMember m;
  Result<bool> first = reader.Next(&m);
  Result<bool> second = reader.Next(&m);
  ASSERT_FALSE(first.ok());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(first.status().message(), second.status().message());
}

TEST(TarReaderTest, GivenPaxHeaderWithBadRecord_WhenRead_ThenCorrupt) {
  std::string pax = "99 path=x\n";
  std::string archive =
      TarHeader("pax", pax.size(), 'x') + TarPadded(pax) + TarHeader("a.txt", 1) + TarPadded("a");

  Read r = ReadAllMembers(archive);

  EXPECT_EQ(r.status.code(), Code::kCorrupt);
  EXPECT_NE(r.status.message().find("byte 0: malformed pax header"), std::string::npos)
      << r.status.message();
}

}  // namespace
}  // namespace gm
