// Typed messages (dataplane/messages*.h): what each Decode accepts and how it
// names what it refuses; Encode and Decode agree.
#include "dataplane/messages.h"

#include <gtest/gtest.h>

#include <tuple>

#include "core/log.h"
#include "dataplane/messages_control.h"
#include "dataplane/messages_offload.h"
#include "dataplane/messages_pool.h"

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
  StageStats decode;
  decode.name = "decode_jpeg+random_resized_crop";
  decode.count = 100;
  decode.cpu_s = 0.25;
  decode.wall_s = 0.5;
  decode.bytes_in = 5000000;
  decode.bytes_out = 15000000;
  SplitDoneMsg done{3, 17, 4, 9, std::vector<StageStats>{decode}};
  auto d = SplitDoneMsg::Decode(done.Encode());
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->epoch, 3u);
  EXPECT_EQ(d->split, 17u);
  EXPECT_EQ(d->batch_count, 4u);
  EXPECT_EQ(d->skipped, 9u);
  ASSERT_TRUE(d->stages.has_value());
  ASSERT_EQ(d->stages->size(), 1u);
  EXPECT_EQ((*d->stages)[0].name, decode.name);
  EXPECT_EQ((*d->stages)[0].count, 100u);
  EXPECT_EQ((*d->stages)[0].cpu_s, 0.25);
  EXPECT_EQ((*d->stages)[0].wall_s, 0.5);
  EXPECT_EQ((*d->stages)[0].bytes_in, 5000000u);
  EXPECT_EQ((*d->stages)[0].bytes_out, 15000000u);
  EXPECT_FALSE(SplitDoneMsg::Decode({{"epoch", 0}, {"split", 1}, {"batch_count", 2}})->stages)
      << "no report: none, not an empty one";
  // "skipped" is optional (0 when absent) and range-checked when present.
  EXPECT_EQ(SplitDoneMsg::Decode({{"epoch", 0}, {"split", 1}, {"batch_count", 2}})->skipped, 0u);
  EXPECT_NE(Refusal(SplitDoneMsg::Decode(
                        {{"epoch", 0}, {"split", 1}, {"batch_count", 2}, {"skipped", -1}}))
                .find("$.skipped"),
            std::string::npos);
  // The pool's messages: round trips, and each field range-checked.
  PoolReportMsg report{"job-12", 4, 2, 1, 3, 1500, {{1, 400}, {4, 1100.5}}, "", "4242"};
  auto rep = PoolReportMsg::Decode(report.Encode());
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->Encode(), report.Encode());
  EXPECT_EQ(rep->rates, report.rates);
  for (const auto& [field, value, path] :
       std::vector<std::tuple<std::string, nlohmann::json, std::string>>{
           {"run_id", "", "$.run_id"},
           {"run_id", "has space", "$.run_id"},
           {"gpus", 0, "$.gpus"},
           {"cpus_per_worker", 0, "$.cpus_per_worker"},
           {"extra_workers", -1, "$.extra_workers"},
           {"demand_samples_per_s", "fast", "$.demand_samples_per_s"},
           {"rates", {{1, -3}}, "$.rates[0][1]"},
           {"rates", {{1.5, 3}}, "$.rates[0][0]"},
           {"rates", {{1}}, "$.rates[0]"},
           {"slurm_job", "", "$.slurm_job"},
           {"slurm_job", "12; rm -rf /", "$.slurm_job"},
           {"slurm_job", "_1", "$.slurm_job"},
           {"slurm_job", std::string(33, '1'), "$.slurm_job"},
           {"slurm_job", 12, "$.slurm_job"}}) {
    nlohmann::json bad = report.Encode();
    bad[field] = value;
    EXPECT_NE(Refusal(PoolReportMsg::Decode(bad)).find(path), std::string::npos) << field;
  }
  nlohmann::json many = report.Encode();
  many["rates"] = nlohmann::json::array();
  for (int i = 1; i <= static_cast<int>(kMaxPoolCounts) + 1; ++i) many["rates"].push_back({i, 1});
  EXPECT_NE(Refusal(PoolReportMsg::Decode(many)).find("at most 1024"), std::string::npos);
  const PoolGrantMsg plain{3, 6, "", ""}, reasoned{3, 6, "divided anew", ""};
  EXPECT_EQ(PoolGrantMsg::Decode(plain.Encode())->cpus, 6);
  const nlohmann::json as_older = {{"extra_workers", 3}, {"cpus", 6}};
  EXPECT_EQ(plain.Encode(), as_older) << "no reason: as older pools send it";
  EXPECT_EQ(PoolGrantMsg::Decode(reasoned.Encode())->reason, "divided anew");
  EXPECT_NE(
      Refusal(PoolGrantMsg::Decode({{"extra_workers", -1}, {"cpus", 0}})).find("$.extra_workers"),
      std::string::npos);
  // A reason is shown and recorded: printable, bounded.
  for (const std::string& reason :
       {std::string("a\nb"), std::string("\x1b[2J"), std::string(kMaxPoolReasonBytes + 1, 'x')}) {
    EXPECT_NE(Refusal(PoolGrantMsg::Decode({{"extra_workers", 0}, {"cpus", 0}, {"reason", reason}}))
                  .find("$.reason"),
              std::string::npos);
  }
  EXPECT_NE(Refusal(PoolGrantMsg::Decode({{"extra_workers", 0}, {"cpus", 0}, {"reason", 7}}))
                .find("$.reason"),
            std::string::npos);
  PoolStateMsg state{8,
                     {{"job-12", 4, 3, 6, 2, 1.5, report}, {"job-13", 1, 0, 0, 0, 2, std::nullopt}},
                     {{12.5, "job-12", 2, 6, "divided anew"}}};
  auto st = PoolStateMsg::Decode(state.Encode());
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->Encode(), state.Encode());
  nlohmann::json older = state.Encode();
  older.erase("history");
  EXPECT_TRUE(PoolStateMsg::Decode(older).ok()) << "an older pool sends no history";
  nlohmann::json long_history = state.Encode();
  for (size_t i = 0; i < kMaxPoolHistory; ++i) long_history["history"].push_back(older["runs"][0]);
  EXPECT_NE(Refusal(PoolStateMsg::Decode(long_history)).find("at most 64 changes"),
            std::string::npos);
  EXPECT_EQ(st->runs[0].report->rates, report.rates) << "the inputs travel with the division";
  EXPECT_FALSE(st->runs[1].report.has_value());
  nlohmann::json bad_input = state.Encode();
  bad_input["runs"][0]["report"]["demand_samples_per_s"] = -1;
  EXPECT_NE(Refusal(PoolStateMsg::Decode(bad_input)).find("demand_samples_per_s"),
            std::string::npos);
  nlohmann::json bad_change = state.Encode();
  bad_change["history"][0]["to_cpus"] = -1;
  EXPECT_NE(Refusal(PoolStateMsg::Decode(bad_change)).find("$.history[0].to_cpus"),
            std::string::npos);
  // GET_SPLIT's "draining" is optional (false when absent) and a boolean.
  EXPECT_FALSE(GetSplitMsg::Decode(nlohmann::json::object())->draining);
  EXPECT_TRUE(GetSplitMsg::Decode(GetSplitMsg{true}.Encode())->draining);
  EXPECT_EQ(GetSplitMsg{false}.Encode(), nlohmann::json::object()) << "as old workers send it";
  EXPECT_NE(Refusal(GetSplitMsg::Decode({{"draining", 1}})).find("$.draining"), std::string::npos);
  AckMsg ack{2, {{1, 0}, {1, 1}}, {}};
  auto a = AckMsg::Decode(ack.Encode());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->batches, ack.batches);
  EXPECT_TRUE(a->samples.empty());  // optional
  ack.samples = {4, 1};
  EXPECT_EQ(AckMsg::Decode(ack.Encode())->samples, ack.samples);
  // One count per batch, each an integer from 1.
  for (const json& bad : {json::array({4}), json::array({4, 0}), json::array({4, 1.0}),
                          json::array({4, "1"}), json("x")}) {
    EXPECT_NE(
        Refusal(AckMsg::Decode({{"epoch", 2}, {"batches", {{1, 0}, {1, 1}}}, {"samples", bad}}))
            .find("$.samples"),
        std::string::npos)
        << bad;
  }
  // A pair's integers are integers: 1.0 is not 1.
  EXPECT_NE(Refusal(AckMsg::Decode({{"epoch", 2}, {"batches", {{1, 1.0}}}})).find("$.batches"),
            std::string::npos);
  auto s = SubscribeMsg::Decode(SubscribeMsg{1, 4, false}.Encode(), true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->world_size, 4);
  EXPECT_FALSE(s->shm);
  EXPECT_TRUE(SubscribeMsg::Decode(SubscribeMsg{1, -1, true}.Encode(), false)->shm);
  EXPECT_NE(Refusal(SubscribeMsg::Decode({{"rank", 1}, {"shm", 1}}, false)).find("$.shm"),
            std::string::npos);
  EXPECT_EQ(CreditMsg::Decode(CreditMsg{7, {}}.Encode())->n, 7u);
  // A CREDIT may return segments (dataplane/shm.h), then with n = 0 too.
  auto released = CreditMsg::Decode(CreditMsg{0, {3, 0}}.Encode());
  ASSERT_TRUE(released.ok()) << released.status().message();
  EXPECT_EQ(released->release, (std::vector<uint64_t>{3, 0}));
  EXPECT_NE(Refusal(CreditMsg::Decode({{"n", 0}})).find("$.n"), std::string::npos);
  for (const json& bad : {json("x"), json::array({-1}), json::array({kMaxCreditReleases}),
                          json(std::vector<int>(kMaxCreditReleases + 1, 0))}) {
    EXPECT_NE(Refusal(CreditMsg::Decode({{"n", 1}, {"release", bad}})).find("$.release"),
              std::string::npos)
        << bad;
  }
  ResumeMsg resume;
  resume.epoch = 1;
  resume.position = 9;
  EXPECT_EQ(ResumeMsg::Decode(resume.Encode())->position, 9u);
  EXPECT_FALSE(ResumeMsg::Decode(resume.Encode())->at.has_value());
  resume.at = SequenceKey{4, 2};
  EXPECT_EQ(ResumeMsg::Decode(resume.Encode())->at, (SequenceKey{4, 2}));
  // Both of split_index and split_batch, or neither; each in range.
  EXPECT_EQ(ResumeMsg::Decode({{"epoch", 1}, {"position", 9}, {"split_index", 4}}).status().code(),
            Code::kCorrupt);
  EXPECT_EQ(
      ResumeMsg::Decode({{"epoch", 1}, {"position", 9}, {"split_index", -1}, {"split_batch", 0}})
          .status()
          .code(),
      Code::kCorrupt);
  EXPECT_EQ(GetPlanMsg::Decode(GetPlanMsg{5}.Encode())->epoch, 5u);
  EXPECT_EQ(RegisterMsg::Decode(RegisterMsg{"10.0.0.1:4000", "", "", ""}.Encode())->data_addr,
            "10.0.0.1:4000");
  // Where the worker runs, for the run's record: optional, typed, bounded.
  RegisterMsg placed{"10.0.0.1:4000", "cpu1", "7", "12.3"};
  auto p = RegisterMsg::Decode(placed.Encode());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->host, "cpu1");
  EXPECT_EQ(p->tag, "7");
  EXPECT_EQ(p->step, "12.3");
  EXPECT_EQ(
      RegisterMsg::Decode({{"data_addr", "a:1"}, {"tag", std::string(257, 'x')}}).status().code(),
      Code::kCorrupt);
  EXPECT_EQ(RegisterMsg::Decode({{"data_addr", "a:1"}, {"host", "a\nb"}}).status().code(),
            Code::kCorrupt);
  // Registering again at a restarted coordinator: the old id and the last
  // SPLIT_DONEs, bounded.
  RegisterMsg again{"10.0.0.1:4000", "", "", ""};
  again.worker_id = 7;
  again.made.push_back(SplitDoneMsg{2, 5, 3, 1, std::nullopt});
  auto back = RegisterMsg::Decode(again.Encode());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->worker_id, 7u);
  ASSERT_EQ(back->made.size(), 1u);
  EXPECT_EQ(back->made[0].epoch, 2u);
  EXPECT_EQ(back->made[0].split, 5u);
  EXPECT_EQ(back->made[0].batch_count, 3u);
  EXPECT_EQ(back->made[0].skipped, 1u);
  for (size_t i = 0; i < kMaxRegisterMade; ++i) again.made.push_back(again.made[0]);
  EXPECT_EQ(RegisterMsg::Decode(again.Encode()).status().code(), Code::kCorrupt);
  EXPECT_EQ(RegisterMsg::Decode({{"data_addr", "a:1"}, {"worker_id", 0}}).status().code(),
            Code::kCorrupt);
  EXPECT_EQ(RegisterMsg::Decode({{"data_addr", "a:1"}, {"worker_id", 1}, {"made", {1, 2}}})
                .status()
                .code(),
            Code::kCorrupt);
  SubscribeMsg resubscribe;
  resubscribe.world_size = 1;
  resubscribe.session = 9;
  EXPECT_EQ(SubscribeMsg::Decode(resubscribe.Encode(), true)->session, 9u);
  EXPECT_EQ(
      SubscribeMsg::Decode({{"rank", 0}, {"world_size", 1}, {"session", -2}}, true).status().code(),
      Code::kCorrupt);
  EXPECT_EQ(RegisterMsg::Decode({{"data_addr", "a:1"}, {"step", 12}}).status().code(),
            Code::kCorrupt);
}

TEST(MessagesTest, GivenAFault_ThenItRoundTripsAndItsFieldsAreChecked) {
  auto f = FaultMsg::Decode(FaultMsg{"127.0.0.1:9", 2, "held it"}.Encode());
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->worker, "127.0.0.1:9");
  EXPECT_EQ(f->epoch, 2u);
  EXPECT_EQ(f->why, "held it");
  // A long text is cut on a character's first byte, so it stays UTF-8.
  std::string long_why(kMaxFaultWhyBytes - 1, 'x');
  long_why += "\u00e9\u00e9";  // two 2-byte characters across the bound
  nlohmann::json cut = FaultMsg{"h:1", 0, long_why}.Encode();
  EXPECT_EQ(cut["why"].get<std::string>(), std::string(kMaxFaultWhyBytes - 1, 'x'));
  EXPECT_NO_THROW((void)cut.dump());
  EXPECT_NE(Refusal(FaultMsg::Decode({{"worker", "a b"}, {"epoch", 0}, {"why", ""}}))
                .find("FAULT: $.worker"),
            std::string::npos);
  EXPECT_NE(Refusal(FaultMsg::Decode({{"worker", "h:1"}, {"epoch", "0"}, {"why", ""}}))
                .find("FAULT: $.epoch"),
            std::string::npos);
  EXPECT_NE(
      Refusal(FaultMsg::Decode({{"worker", "h:1"}, {"epoch", 0}, {"why", std::string(2000, 'x')}}))
          .find("FAULT: $.why"),
      std::string::npos);
}

TEST(MessagesTest, GivenAHeartbeat_ThenItRoundTripsAndItsFieldsAreChecked) {
  HeartbeatMsg m;
  m.batches_sent = 7;
  m.splits_done = 2;
  m.making_split = true;
  m.cpu_s = 1.5;
  m.virtual_workers = 4;
  auto h = HeartbeatMsg::Decode(m.Encode());
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->virtual_workers, 4u);
  EXPECT_NE(Refusal(HeartbeatMsg::Decode({{"virtual_workers", -1}})).find("virtual_workers"),
            std::string::npos);
  EXPECT_NE(Refusal(HeartbeatMsg::Decode({{"virtual_workers", 1 << 21}})).find("virtual_workers"),
            std::string::npos);
  EXPECT_EQ(h->batches_sent, 7u);
  EXPECT_EQ(h->splits_done, 2u);
  EXPECT_TRUE(h->making_split);
  EXPECT_EQ(h->cpu_s, 1.5);
  // Every field is optional: an older worker's heartbeat (or {}) is not in a split.
  auto empty = HeartbeatMsg::Decode(nlohmann::json::object());
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_FALSE(empty->making_split);
  EXPECT_NE(
      Refusal(HeartbeatMsg::Decode({{"making_split", "yes"}})).find("HEARTBEAT: $.making_split"),
      std::string::npos);
  EXPECT_NE(Refusal(HeartbeatMsg::Decode({{"batches_sent", -1}})).find("HEARTBEAT: $.batches_sent"),
            std::string::npos);
  EXPECT_NE(Refusal(HeartbeatMsg::Decode({{"cpu_s", -0.5}})).find("HEARTBEAT: $.cpu_s"),
            std::string::npos);
  EXPECT_NE(Refusal(HeartbeatMsg::Decode({{"cpu_s", "1"}})).find("HEARTBEAT: $.cpu_s"),
            std::string::npos);
}

TEST(MessagesTest, GivenOffloadNotesThenTheyRoundTripAndBadFieldsAreNamed) {
  OffloadNoteMsg served{true, "ImageFolder", 4, 12345, ""};
  auto s = OffloadNoteMsg::Decode(served.Encode());
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->served);
  EXPECT_EQ(s->dataset, "ImageFolder");
  EXPECT_EQ(s->workers, 4u);
  EXPECT_EQ(s->blob_bytes, 12345u);
  EXPECT_EQ(s->mode, "exact");
  OffloadNoteMsg elastic = served;
  elastic.mode = "elastic";
  auto e = OffloadNoteMsg::Decode(elastic.Encode());
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->mode, "elastic");
  OffloadNoteMsg native = served;
  native.mode = "native";
  auto n = OffloadNoteMsg::Decode(native.Encode());
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(n->mode, "native");
  nlohmann::json older = served.Encode();  // a client from before the modes: exact
  older.erase("mode");
  auto o = OffloadNoteMsg::Decode(older);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->mode, "exact");
  OffloadNoteMsg stock{false, "Lines", 0, 0, "dataset.meta['source'] cannot travel"};
  auto k = OffloadNoteMsg::Decode(stock.Encode());
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_FALSE(k->served);
  EXPECT_FALSE(k->in_process);
  EXPECT_EQ(k->why, stock.why);
  OffloadNoteMsg zero = stock;  // num_workers=0: in the trainer's process
  zero.in_process = true;
  auto z = OffloadNoteMsg::Decode(zero.Encode());
  ASSERT_TRUE(z.ok()) << z.status().message();
  EXPECT_TRUE(z->in_process);
  const auto refused = [](nlohmann::json m, const std::string& field) {
    EXPECT_NE(Refusal(OffloadNoteMsg::Decode(m)).find("OFFLOAD_NOTE: $." + field),
              std::string::npos)
        << m.dump();
  };
  nlohmann::json m = served.Encode();
  m["served"] = 1;
  refused(m, "served");
  m = zero.Encode();
  m["place"] = "gpu";
  refused(m, "place");
  m = served.Encode();
  m["dataset"] = "";
  refused(m, "dataset");
  m["dataset"] = "a\x1b[31m";
  refused(m, "dataset");
  m = served.Encode();
  m["workers"] = 0;
  refused(m, "workers");
  m["workers"] = 70000;
  refused(m, "workers");
  m = served.Encode();
  m["blob_bytes"] = -1;
  refused(m, "blob_bytes");
  m = served.Encode();
  m["mode"] = "fast";
  refused(m, "mode");
  m["mode"] = 1;
  refused(m, "mode");
  m = stock.Encode();
  m["why"] = std::string(2000, 'x');
  refused(m, "why");
  m.erase("why");
  EXPECT_FALSE(OffloadNoteMsg::Decode(m).ok());
}

TEST(MessagesTest, GivenTheOffloadMessagesThenTheyRoundTripAndBadFieldsAreNamed) {
  const std::string kProof(128, 'e');
  auto o = OffloadMsg::Decode(OffloadMsg{7}.Encode());
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->rank, 7);
  EXPECT_NE(Refusal(OffloadMsg::Decode({{"rank", 70000}})).find("OFFLOAD: $.rank"),
            std::string::npos);
  OffloadingMsg ing{"run-1", 4, std::string(64, 'c'), std::string(128, 'd'), {"h:1", "h:2"}};
  auto i = OffloadingMsg::Decode(ing.Encode());
  ASSERT_TRUE(i.ok()) << i.status().message();
  EXPECT_EQ(i->channel, 4u);
  EXPECT_EQ(i->workers, ing.workers);
  nlohmann::json bad = ing.Encode();
  bad["ticket"] = "xyz";
  EXPECT_NE(Refusal(OffloadingMsg::Decode(bad)).find("OFFLOADING: $.ticket"), std::string::npos);
  bad = ing.Encode();
  bad["channel"] = 0;
  EXPECT_NE(Refusal(OffloadingMsg::Decode(bad)).find("OFFLOADING: $.channel"), std::string::npos);
  EXPECT_EQ(i->proof, ing.proof);
  for (const nlohmann::json& proof : {nlohmann::json(std::string(127, 'd')), nlohmann::json(7),
                                      nlohmann::json(std::string(128, 'D'))}) {
    bad = ing.Encode();
    bad["proof"] = proof;
    EXPECT_NE(Refusal(OffloadingMsg::Decode(bad)).find("OFFLOADING: $.proof"), std::string::npos);
  }
  bad = ing.Encode();
  bad.erase("proof");
  EXPECT_NE(
      Refusal(OffloadingMsg::Decode(bad)).find("OFFLOADING: $: missing required key \"proof\""),
      std::string::npos);

  auto open = OffloadOpenMsg::Decode(
      OffloadOpenMsg{"/usr/bin/python3", {"torch", "a.b_c"}, kProof}.Encode());
  ASSERT_TRUE(open.ok()) << open.status().message();
  EXPECT_EQ(open->modules.size(), 2u);
  EXPECT_EQ(open->proof, kProof);
  EXPECT_NE(Refusal(OffloadOpenMsg::Decode(OffloadOpenMsg{"/p", {}, "12"}.Encode()))
                .find("OFFLOAD_OPEN: $.proof"),
            std::string::npos);
  EXPECT_NE(Refusal(OffloadOpenMsg::Decode(OffloadOpenMsg{"bin/python", {}, kProof}.Encode()))
                .find("OFFLOAD_OPEN: $.python"),
            std::string::npos);
  EXPECT_NE(Refusal(OffloadOpenMsg::Decode(OffloadOpenMsg{"/p", {"a b"}, kProof}.Encode()))
                .find("OFFLOAD_OPEN: $.modules"),
            std::string::npos);
  EXPECT_NE(Refusal(OffloadOpenMsg::Decode(OffloadOpenMsg{
                        "/p", std::vector<std::string>(kMaxOffloadModules + 1, "m"), kProof}
                                               .Encode()))
                .find("at most 4096 module names"),
            std::string::npos);

  auto opened = OffloadOpenedMsg::Decode(OffloadOpenedMsg{123, "node-1"}.Encode());
  ASSERT_TRUE(opened.ok());
  EXPECT_EQ(opened->pid, 123);
  EXPECT_NE(Refusal(OffloadOpenedMsg::Decode({{"pid", 0}})).find("OFFLOAD_OPENED: $.pid"),
            std::string::npos);

  EXPECT_TRUE(CheckOffloadData(EncodeOffloadData("bytes"), "bytes").ok());
  EXPECT_NE(CheckOffloadData(EncodeOffloadData("bytes"), "bytez")
                .message()
                .find("OFFLOAD_DATA: $.sha256"),
            std::string::npos);
  EXPECT_EQ(CheckOffloadData({{"sha256", 5}}, "x").code(), Code::kCorrupt);
  EXPECT_EQ(CheckOffloadData(nlohmann::json::object(), "x").code(), Code::kCorrupt);

  auto exit = OffloadExitMsg::Decode(OffloadExitMsg{-9, "killed"}.Encode());
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->status, -9);
  EXPECT_EQ(exit->why, "killed");
  EXPECT_NE(Refusal(OffloadExitMsg::Decode({{"status", 300}})).find("OFFLOAD_EXIT: $.status"),
            std::string::npos);
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
  EXPECT_NE(
      Refusal(AckMsg::Decode({{"epoch", 0}, {"batches", {{1}}}})).find("[split, split_batch]"),
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
  // Ports, pids and thread counts in range, and integers only as integers.
  for (const char* addr : {"a:99999", "a:0", "a:-5", "a:", "a:1x"}) {
    EXPECT_NE(Refusal(RegisterMsg::Decode({{"data_addr", addr}})).find("port from 1 to 65535"),
              std::string::npos)
        << addr;
  }
  for (const json& threads : {json("1"), json(0), json(1000000), json(1.0)}) {
    EXPECT_NE(Refusal(RegisterMsg::Decode({{"data_addr", "a:1"}, {"threads", threads}}))
                  .find("REGISTER: $.threads: expected an integer from 1 to 4096"),
              std::string::npos)
        << threads;
  }
  EXPECT_NE(Refusal(RegisterMsg::Decode({{"data_addr", "a:1"}, {"pid", -1}})).find("$.pid"),
            std::string::npos);
  auto placed2 = RegisterMsg::Decode({{"data_addr", "a:1"}, {"pid", 42}, {"threads", 4}});
  ASSERT_TRUE(placed2.ok()) << placed2.status().message();
  EXPECT_EQ(placed2->pid, 42);
  EXPECT_EQ(placed2->threads, 4);
  EXPECT_NE(Refusal(CreditMsg::Decode({{"n", 1.0}})).find("CREDIT: $.n"), std::string::npos);
}

TEST(MessagesTest, GivenTheCoordinatorsRepliesWhenDecodedThenTheyRoundTripAndBadFieldsAreNamed) {
  SubscribedMsg sub{"run-1", 32, 2, 3, 9, std::string(64, 'c'), std::string(64, 'd'), 42};
  auto s = SubscribedMsg::Decode(sub.Encode());
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->session, 9u);
  EXPECT_EQ(s->ticket, sub.ticket);
  EXPECT_EQ(s->order, sub.order);
  EXPECT_EQ(s->seed, 42);
  json no_order = sub.Encode();  // a peer that does not say: empty, and nothing is checked
  no_order.erase("order");
  no_order.erase("seed");
  EXPECT_EQ(SubscribedMsg::Decode(no_order)->order, "");
  json bad_order = sub.Encode();
  bad_order["order"] = "ABC";
  EXPECT_NE(Refusal(SubscribedMsg::Decode(bad_order)).find("$.order"), std::string::npos);
  json bad_seed = sub.Encode();
  bad_seed["seed"] = -3;
  EXPECT_NE(Refusal(SubscribedMsg::Decode(bad_seed)).find("$.seed"), std::string::npos);
  json no_ticket = sub.Encode();
  no_ticket["ticket"] = "short";
  EXPECT_NE(Refusal(SubscribedMsg::Decode(no_ticket)).find("SUBSCRIBED: $.ticket"),
            std::string::npos);
  json session0 = sub.Encode();
  session0["session"] = 0;
  EXPECT_NE(Refusal(SubscribedMsg::Decode(session0)).find("$.session"), std::string::npos);
  EXPECT_EQ(s->device_stages, json::array());
  sub.device_stages = json::array({{{"op", "normalize"}, {"mean", {0, 0, 0}}}});
  EXPECT_EQ(SubscribedMsg::Decode(sub.Encode())->device_stages, sub.device_stages);
  for (const json& bad : {json("x"), json::array({1}), json::array({{{"kind", "x"}}}),
                          json(std::vector<json>(kMaxDeviceStages + 1, {{"op", "x"}}))}) {
    json m = sub.Encode();
    m["device_stages"] = bad;
    EXPECT_NE(Refusal(SubscribedMsg::Decode(m)).find("$.device_stages"), std::string::npos) << bad;
  }

  RegisteredMsg reg;
  reg.worker_id = 4;
  reg.pipeline = {{"version", 1}};
  reg.heartbeat_s = 0.5;
  auto r = RegisteredMsg::Decode(reg.Encode());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->worker_id, 4u);
  EXPECT_EQ(r->heartbeat_s, 0.5);
  json bad_reg = reg.Encode();
  bad_reg["liveness_timeout_s"] = -1;
  EXPECT_NE(Refusal(RegisteredMsg::Decode(bad_reg)).find("REGISTERED: $.liveness_timeout_s"),
            std::string::npos);
  bad_reg = reg.Encode();
  bad_reg["pipeline"] = "x";
  EXPECT_NE(Refusal(RegisteredMsg::Decode(bad_reg)).find("$.pipeline"), std::string::npos);
  EXPECT_EQ(r->offload_key, "") << "optional: a coordinator that gives none";
  reg.offload_key = std::string(64, 'f');
  auto keyed = RegisteredMsg::Decode(reg.Encode());
  ASSERT_TRUE(keyed.ok()) << keyed.status().message();
  EXPECT_EQ(keyed->offload_key, reg.offload_key);
  bad_reg = reg.Encode();
  bad_reg["offload_key"] = "f";
  EXPECT_NE(Refusal(RegisteredMsg::Decode(bad_reg)).find("REGISTERED: $.offload_key"),
            std::string::npos);

  AssignMsg assign;
  assign.kind = AssignMsg::Kind::kAssign;
  assign.split = 12;
  assign.rank = 1;
  assign.start_batch = 2;
  assign.end_batch = 5;
  auto a = AssignMsg::Decode(assign.Encode());
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->split, 12u);
  EXPECT_EQ(a->end_batch, 5);
  EXPECT_EQ(AssignMsg::Decode({{"kind", "epoch_done"}})->kind, AssignMsg::Kind::kEpochDone);
  EXPECT_NE(Refusal(AssignMsg::Decode({{"kind", "dance"}})).find("ASSIGN: $.kind"),
            std::string::npos);
  json backwards = assign.Encode();
  backwards["end_batch"] = 1;  // before start_batch 2
  EXPECT_NE(Refusal(AssignMsg::Decode(backwards)).find("$.end_batch"), std::string::npos);

  PlanMsg plan;
  plan.epoch = 1;
  plan.splits = {{3, 2}, {4, -1}};
  plan.workers = {"h:1"};
  auto p = PlanMsg::Decode(plan.Encode());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->splits, plan.splits);
  EXPECT_EQ(p->workers, plan.workers);
  EXPECT_EQ(PlanMsg::Decode({{"epoch", 2}, {"end", true}, {"epochs", 2}})->kind,
            PlanMsg::Kind::kEnd);
  EXPECT_NE(Refusal(PlanMsg::Decode({{"epoch", 0}, {"splits", {{1, -2}}}})).find("PLAN: $.splits"),
            std::string::npos);
  EXPECT_NE(Refusal(PlanMsg::Decode({{"epoch", 0}, {"splits", json::array()}, {"workers", {7}}}))
                .find("$.workers"),
            std::string::npos);
  EXPECT_NE(
      Refusal(PlanMsg::Decode({{"epoch", 0}, {"end", true}, {"done", true}})).find("at most one"),
      std::string::npos);
  EXPECT_EQ(
      WorkersMsg::Decode(WorkersMsg{{"a:1", "b:2"}, 0, {}, false, {}}.Encode())->workers.size(),
      2u);
  // A restart's revoked splits: a round trip, and each index within the workers.
  const WorkersMsg revoked{{"a:1", "b:2"}, 3, {{7, 1}}, true, {{7, 0}, {9, 1}}};
  EXPECT_EQ(WorkersMsg::Decode(revoked.Encode())->revoked, revoked.revoked);
  json bad = revoked.Encode();
  bad["revoked"] = {{7, 2}};
  EXPECT_NE(Refusal(WorkersMsg::Decode(bad)).find("$.revoked[0]"), std::string::npos);
  EXPECT_EQ(ErrorMsg::Decode({{"message", 5}}).message, "(no message)");
}

TEST(MessagesTest, GivenAStringOfInvalidUtf8InAField_WhenRefused_ThenTheMessageIsWrittenNotThrown) {
  // Found by fuzz_handlers: quoting such a value in the error threw from the JSON
  // library. Frames from the wire are valid UTF-8, but the decoders must not rely on it.
  EXPECT_NE(Refusal(SplitDoneMsg::Decode({{"epoch", "\xff\xfe"}, {"split", 1}, {"batch_count", 1}}))
                .find("SPLIT_DONE: $.epoch"),
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

namespace gm {
namespace {

// Every field of a worker's stage report is typed and range-checked at the wire.
TEST(MessagesTest, GivenAMalformedStageReportThenItIsRefusedNamingTheField) {
  const json good = {{"name", "flip"}, {"count", 1},    {"cpu_s", 0.1},
                     {"wall_s", 0.1},  {"bytes_in", 2}, {"bytes_out", 2}};
  auto report = [&](const char* key, const json& value) {
    json e = good;
    if (value.is_null()) {
      e.erase(key);
    } else {
      e[key] = value;
    }
    return Refusal(DecodeStagesReport({{"stages", json::array({e})}}, "HEARTBEAT"));
  };
  EXPECT_TRUE(DecodeStagesReport({{"stages", json::array({good})}}, "HEARTBEAT").ok());
  EXPECT_NE(report("count", -1).find("HEARTBEAT: $.stages[0].count"), std::string::npos);
  EXPECT_NE(report("count", 1.5).find("$.stages[0].count"), std::string::npos);
  EXPECT_NE(report("bytes_in", "lots").find("$.stages[0].bytes_in"), std::string::npos);
  EXPECT_NE(report("bytes_out", nullptr).find("bytes_out"), std::string::npos);
  EXPECT_NE(report("cpu_s", -4).find("$.stages[0].cpu_s: expected seconds"), std::string::npos);
  EXPECT_NE(report("wall_s", 1e300).find("$.stages[0].wall_s"), std::string::npos);
  EXPECT_NE(report("name", "").find("$.stages[0].name"), std::string::npos);
  EXPECT_NE(report("name", std::string(kMaxStageNameBytes + 1, 'a')).find("$.stages[0].name"),
            std::string::npos);
  EXPECT_NE(report("name", "\x1b[2J").find("printable"), std::string::npos);
  EXPECT_NE(report("name", 7).find("$.stages[0].name"), std::string::npos);
  json many = json::array();
  for (size_t i = 0; i <= kMaxReportedStages; ++i) many.push_back(good);
  EXPECT_NE(Refusal(DecodeStagesReport({{"stages", many}}, "HEARTBEAT")).find("at most 256"),
            std::string::npos);
  EXPECT_NE(
      Refusal(DecodeStagesReport({{"stages", json::array({1})}}, "HEARTBEAT")).find("$.stages[0]"),
      std::string::npos);
}

}  // namespace
}  // namespace gm
