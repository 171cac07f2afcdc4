// The C ABI of include/goldminer/client.h over gm::Client. No C++ exception may
// cross it: the client reports failures as Status values, and the few library
// calls that can throw (allocation) are caught at this boundary.
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/client.h"
#include "client/offload.h"
#include "include/goldminer/client.h"

#define GM_API extern "C" __attribute__((visibility("default")))

struct gm_client {
  std::unique_ptr<gm::Client> client;
};

struct gm_batch {
  gm::Batch batch;
  std::shared_ptr<gm::BufferPool> pool;  // takes the data buffer back on gm_batch_free
};

static_assert(GM_DTYPE_FLOAT32 == static_cast<int>(gm::DType::kFloat32) &&
              GM_DTYPE_INT64 == static_cast<int>(gm::DType::kInt64) &&
              GM_DTYPE_INT32 == static_cast<int>(gm::DType::kInt32) &&
              GM_DTYPE_UINT8 == static_cast<int>(gm::DType::kUInt8));
static_assert(GM_LAYOUT_CHW == static_cast<int>(gm::Layout::kCHW) &&
              GM_LAYOUT_HWC == static_cast<int>(gm::Layout::kHWC));
static_assert(GM_UNAVAILABLE == static_cast<int>(gm::Code::kUnavailable) &&
              GM_INTERNAL == static_cast<int>(gm::Code::kInternal));

namespace {

thread_local std::string last_error;

int Fail(const gm::Status& status) {
  last_error = status.message();
  return static_cast<int>(status.code());
}

int FailArg(const char* what) { return Fail(gm::Status::InvalidArgument(what)); }

// Runs `body` (returning int) with allocation failures turned into a status.
template <typename F>
int Guard(F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(gm::Status::Internal("out of memory in the goldminer client"));
  }
}

}  // namespace

GM_API int gm_abi_version(void) { return GM_CLIENT_ABI_VERSION; }

GM_API const char* gm_last_error(void) { return last_error.c_str(); }

GM_API int gm_client_open(const char* coordinator, int rank, int world_size, gm_client** out) {
  if (out == nullptr) return FailArg("gm_client_open: out is NULL");
  *out = nullptr;
  return Guard([&] {
    gm::ClientOptions options;
    if (coordinator != nullptr) options.coordinator = coordinator;
    options.rank = rank;
    options.world_size = world_size;
    auto client = gm::Client::Connect(options);
    if (!client.ok()) return Fail(client.status());
    *out = new gm_client{std::move(*client)};
    return 0;
  });
}

GM_API int gm_client_next(gm_client* client, gm_batch** out) {
  if (client == nullptr || out == nullptr) return FailArg("gm_client_next: client or out is NULL");
  *out = nullptr;
  return Guard([&] {
    auto next = client->client->Next();
    if (!next.ok()) return Fail(next.status());
    if (next->has_value()) *out = new gm_batch{std::move(**next), client->client->buffer_pool()};
    return 0;
  });
}

GM_API int gm_client_start_epoch(gm_client* client, uint64_t epoch) {
  if (client == nullptr) return FailArg("gm_client_start_epoch: client is NULL");
  return Guard([&] {
    gm::Status status = client->client->StartEpoch(epoch);
    return status.ok() ? 0 : Fail(status);
  });
}

GM_API int gm_client_stats_get(const gm_client* client, gm_client_stats* out) {
  if (client == nullptr || out == nullptr)
    return FailArg("gm_client_stats_get: client or out is NULL");
  gm::ClientStats s = client->client->stats();
  *out = gm_client_stats{s.data_wait_s,        s.batches,           s.samples,         s.bytes,
                         s.duplicates_dropped, s.workers_connected, s.connections_lost};
  return 0;
}

GM_API int gm_client_state(const gm_client* client, uint64_t* epoch, uint64_t* position) {
  if (client == nullptr || epoch == nullptr || position == nullptr) {
    return FailArg("gm_client_state: client, epoch or position is NULL");
  }
  gm::ResumeState state = client->client->state();
  *epoch = state.epoch;
  *position = state.position;
  return 0;
}

GM_API int gm_client_resume(gm_client* client, uint64_t epoch, uint64_t position) {
  if (client == nullptr) return FailArg("gm_client_resume: client is NULL");
  gm::ResumeState state;
  state.epoch = epoch;
  state.position = position;
  return Guard([&] {
    gm::Status status = client->client->Resume(state);
    return status.ok() ? 0 : Fail(status);
  });
}

GM_API int gm_client_resume_state_get(const gm_client* client, gm_resume_state* out) {
  if (client == nullptr || out == nullptr) {
    return FailArg("gm_client_resume_state_get: client or out is NULL");
  }
  gm::ResumeState state = client->client->state();
  *out = gm_resume_state{};
  out->epoch = state.epoch;
  out->position = state.position;
  const gm::SequenceKey at = state.at.value_or(gm::SequenceKey{});
  out->split_index = at.index;
  out->split_batch = at.batch;
  out->seed = state.seed;
  out->world_size = state.world_size;
  out->rank = state.rank;
  std::snprintf(out->order, sizeof out->order, "%s", state.order.c_str());
  return 0;
}

GM_API int gm_client_resume_from(gm_client* client, const gm_resume_state* state) {
  if (client == nullptr || state == nullptr) {
    return FailArg("gm_client_resume_from: client or state is NULL");
  }
  const size_t order_len = ::strnlen(state->order, sizeof state->order);
  if (order_len == sizeof state->order) {
    return FailArg("gm_client_resume_from: state->order is not NUL-terminated");
  }
  gm::ResumeState r;
  r.epoch = state->epoch;
  r.position = state->position;
  r.at = gm::SequenceKey{static_cast<size_t>(state->split_index), state->split_batch};
  r.order.assign(state->order, order_len);
  r.seed = state->seed;
  r.world_size = state->world_size;
  r.rank = state->rank;
  return Guard([&] {
    gm::Status status = client->client->Resume(r);
    return status.ok() ? 0 : Fail(status);
  });
}

GM_API const char* gm_client_device_stages(const gm_client* client) {
  return client == nullptr ? nullptr : client->client->device_stages().c_str();
}

GM_API int gm_client_same_host_stats(const gm_client* client, uint64_t* connections,
                                     uint64_t* batches) {
  if (client == nullptr || connections == nullptr || batches == nullptr) {
    return FailArg("gm_client_same_host_stats: client, connections or batches is NULL");
  }
  const gm::ClientStats s = client->client->stats();
  *connections = s.same_host_connections;
  *batches = s.same_host_batches;
  return 0;
}

GM_API void gm_client_close(gm_client* client) { delete client; }

GM_API const void* gm_batch_data(const gm_batch* b) { return b->batch.data_ptr(); }
GM_API size_t gm_batch_data_bytes(const gm_batch* b) { return b->batch.data_size(); }
GM_API int gm_batch_dtype(const gm_batch* b) { return static_cast<int>(b->batch.data.dtype); }
GM_API int gm_batch_layout(const gm_batch* b) { return static_cast<int>(b->batch.layout); }
GM_API int gm_batch_ndim(const gm_batch* b) { return static_cast<int>(b->batch.data.shape.size()); }
GM_API const int64_t* gm_batch_shape(const gm_batch* b) { return b->batch.data.shape.data(); }
GM_API size_t gm_batch_size(const gm_batch* b) { return b->batch.size(); }
GM_API const int64_t* gm_batch_labels(const gm_batch* b) { return b->batch.labels.data<int64_t>(); }
GM_API const char* gm_batch_key(const gm_batch* b, size_t i) {
  return i < b->batch.keys.size() ? b->batch.keys[i].c_str() : nullptr;
}
GM_API uint64_t gm_batch_epoch(const gm_batch* b) { return b->batch.epoch; }
GM_API uint64_t gm_batch_split(const gm_batch* b) { return b->batch.split; }
GM_API uint64_t gm_batch_split_batch(const gm_batch* b) { return b->batch.split_batch; }
GM_API void gm_batch_free(gm_batch* batch) {
  if (batch != nullptr && batch->pool) batch->pool->Give(std::move(batch->batch.data.bytes));
  delete batch;
}

// ---- the DataLoader offload ----

struct gm_offload {
  std::unique_ptr<gm::Offload> offload;
};

struct gm_vchannel {
  std::unique_ptr<gm::VirtualChannel> channel;
};

GM_API int gm_offload_open(const char* coordinator, int rank, gm_offload** out) {
  if (out == nullptr) return FailArg("gm_offload_open: out is NULL");
  *out = nullptr;
  return Guard([&] {
    gm::ClientOptions options;
    if (coordinator != nullptr) options.coordinator = coordinator;
    options.rank = rank;
    auto offload = gm::Offload::Open(options);
    if (!offload.ok()) return Fail(offload.status());
    *out = new gm_offload{std::move(*offload)};
    return 0;
  });
}

GM_API int gm_offload_workers(gm_offload* offload, const char** json) {
  if (offload == nullptr || json == nullptr) return FailArg("gm_offload_workers: NULL argument");
  return Guard([&] {
    static thread_local std::string text;
    auto workers = offload->offload->Workers();
    if (!workers.ok()) return Fail(workers.status());
    text = nlohmann::json(*workers).dump();
    *json = text.c_str();
    return 0;
  });
}

GM_API int gm_offload_place(gm_offload* offload, const char** worker) {
  if (offload == nullptr || worker == nullptr) return FailArg("gm_offload_place: NULL argument");
  return Guard([&] {
    static thread_local std::string text;
    auto placed = offload->offload->Place();
    if (!placed.ok()) return Fail(placed.status());
    text = *placed;
    *worker = text.c_str();
    return 0;
  });
}

GM_API int gm_offload_note(gm_offload* offload, int served, const char* dataset, int workers,
                           uint64_t blob_bytes, const char* why, const char* mode) {
  if (offload == nullptr || dataset == nullptr) return FailArg("gm_offload_note: NULL argument");
  return Guard([&] {
    gm::OffloadNoteMsg note;
    note.served = served == 1;
    note.in_process = served == 2;
    note.dataset = dataset;
    note.workers = workers > 0 ? static_cast<uint64_t>(workers) : 0;
    note.blob_bytes = blob_bytes;
    note.why = why != nullptr ? why : "";
    note.mode = mode != nullptr && *mode != '\0' ? mode : "exact";
    gm::Status st = offload->offload->Note(note);
    return st.ok() ? 0 : Fail(st);
  });
}

GM_API void gm_offload_close(gm_offload* offload) { delete offload; }

GM_API int gm_vchannel_open(gm_offload* offload, const char* worker, const char* python,
                            const char* modules_json, gm_vchannel** out) {
  if (out == nullptr) return FailArg("gm_vchannel_open: out is NULL");
  *out = nullptr;
  if (offload == nullptr || worker == nullptr || python == nullptr || modules_json == nullptr)
    return FailArg("gm_vchannel_open: NULL argument");
  return Guard([&] {
    std::vector<std::string> modules;
    const nlohmann::json parsed = nlohmann::json::parse(modules_json, nullptr, false);
    if (!parsed.is_array()) return FailArg("gm_vchannel_open: modules_json is not a JSON array");
    for (const auto& m : parsed) {
      if (!m.is_string()) return FailArg("gm_vchannel_open: modules_json holds a non-string");
      modules.push_back(m.get<std::string>());
    }
    auto channel = offload->offload->OpenChannel(worker, python, modules);
    if (!channel.ok()) return Fail(channel.status());
    *out = new gm_vchannel{std::move(*channel)};
    return 0;
  });
}

GM_API int64_t gm_vchannel_pid(const gm_vchannel* channel) {
  return channel == nullptr ? 0 : channel->channel->pid();
}

GM_API const char* gm_vchannel_host(const gm_vchannel* channel) {
  return channel == nullptr ? "" : channel->channel->host().c_str();
}

GM_API int gm_vchannel_same_host(const gm_vchannel* channel) {
  return channel != nullptr && channel->channel->same_host() ? 1 : 0;
}

GM_API int gm_vchannel_take_fd(gm_vchannel* channel) {
  return channel == nullptr ? -1 : channel->channel->TakeFd();
}

GM_API int gm_vchannel_send(gm_vchannel* channel, const void* data, size_t n) {
  if (channel == nullptr || (data == nullptr && n > 0))
    return FailArg("gm_vchannel_send: NULL argument");
  return Guard([&] {
    gm::Status st = channel->channel->Write(std::string_view(static_cast<const char*>(data), n));
    return st.ok() ? 0 : Fail(st);
  });
}

GM_API int gm_vchannel_recv(gm_vchannel* channel, const void** data, size_t* n, int* exit_status,
                            int* has_status) {
  if (channel == nullptr || data == nullptr || n == nullptr || exit_status == nullptr ||
      has_status == nullptr)
    return FailArg("gm_vchannel_recv: NULL argument");
  return Guard([&] {
    std::optional<int> status;
    auto bytes = channel->channel->Read(&status);
    if (!bytes.ok()) return Fail(bytes.status());
    *data = bytes->data();
    *n = bytes->size();
    *exit_status = status.value_or(0);
    *has_status = status.has_value() ? 1 : 0;
    return 0;
  });
}

GM_API void gm_vchannel_shutdown(gm_vchannel* channel) {
  if (channel != nullptr) channel->channel->Shutdown();
}

GM_API void gm_vchannel_close(gm_vchannel* channel) { delete channel; }
