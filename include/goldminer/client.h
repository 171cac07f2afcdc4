/* The goldminer client C ABI: a trainer rank's handle on the data plane, for
 * bindings (the Python package loads it with ctypes) and C/C++ trainers.
 *
 * A gm_client connects to the coordinator of a `goldminer run` and to its data
 * workers, and hands out the rank's batches in the rank's sequence order, each
 * exactly once (see client/client.h for the behaviour behind it).
 *
 * Errors: functions returning int return 0 (GM_OK) on success and a gm_status code
 * otherwise; gm_last_error() then gives the message (what failed, on which
 * address, why) for the calling thread until its next failing call.
 *
 * Ownership: gm_client_open hands out a client that gm_client_close frees;
 * gm_client_next hands out a batch that gm_batch_free frees. A batch's buffers
 * (data, labels, shape, keys) stay valid, unchanged, until gm_batch_free, also
 * after the client is closed: bindings may view them without copying.
 *
 * Threads: one thread at a time may call gm_client_next, gm_client_start_epoch,
 * gm_client_resume, gm_client_resume_from and gm_client_close on a client;
 * gm_client_stats, gm_client_state and gm_client_resume_state_get may be called
 * from any thread while the client is open.
 * Batches are independent of each other and of the client.
 */
#ifndef GOLDMINER_CLIENT_H_
#define GOLDMINER_CLIENT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GM_CLIENT_ABI_VERSION 1

/* Status codes. */
enum gm_status {
  GM_OK = 0,
  GM_INVALID_ARGUMENT = 1, /* bad address, rank, secret (authentication failed) */
  GM_NOT_FOUND = 2,        /* no secret: GOLDMINER_SECRET_FILE / GOLDMINER_SECRET unset */
  GM_IO_ERROR = 3,
  GM_CORRUPT = 4,     /* a peer sent something that is not the protocol */
  GM_UNAVAILABLE = 5, /* coordinator unreachable or gone, timeout without progress */
  GM_UNIMPLEMENTED = 6,
  GM_CANCELLED = 7,
  GM_INTERNAL = 8
};

/* Element types of gm_batch_data. */
enum gm_dtype { GM_DTYPE_UINT8 = 0, GM_DTYPE_INT32 = 1, GM_DTYPE_INT64 = 2, GM_DTYPE_FLOAT32 = 3 };

/* Per-sample layout of gm_batch_data. */
enum gm_layout { GM_LAYOUT_NONE = 0, GM_LAYOUT_HWC = 1, GM_LAYOUT_CHW = 2 };

typedef struct gm_client gm_client;
typedef struct gm_batch gm_batch;

typedef struct gm_client_stats {
  double data_wait_s;          /* seconds spent inside gm_client_next */
  uint64_t batches;            /* batches delivered */
  uint64_t samples;            /* samples in them */
  uint64_t bytes;              /* data + label bytes delivered */
  uint64_t duplicates_dropped; /* copies and batches past the rank's share, dropped */
  uint64_t workers_connected;  /* worker connections open now */
  uint64_t connections_lost;   /* worker connections that broke */
} gm_client_stats;

/* GM_CLIENT_ABI_VERSION of the loaded library. */
int gm_abi_version(void);

/* The calling thread's message for its latest failure ("" when none). Valid until
 * that thread's next call into this library. */
const char* gm_last_error(void);

/* Connects to the coordinator (NULL: $GOLDMINER_ADDR) as trainer rank `rank` of
 * `world_size` (-1: from $RANK/$WORLD_SIZE, else $SLURM_PROCID/$SLURM_NTASKS, else
 * 0 and 1). The secret comes from $GOLDMINER_SECRET_FILE or $GOLDMINER_SECRET. On
 * success *out is the new client; on failure *out is NULL. */
int gm_client_open(const char* coordinator, int rank, int world_size, gm_client** out);

/* The next batch of the rank's sequence, blocking until it arrives. *out is NULL
 * at the end of the epoch (call gm_client_start_epoch for the next one). Starts
 * epoch 0 when no epoch was started. GM_UNAVAILABLE when the coordinator goes away
 * or no batch arrives for the client's timeout (300 s). */
int gm_client_next(gm_client* client, gm_batch** out);

/* Starts `epoch` from its first batch. */
int gm_client_start_epoch(gm_client* client, uint64_t epoch);

/* Fills *out with the client's counters. */
int gm_client_stats_get(const gm_client* client, gm_client_stats* out);

/* The epoch being consumed and the number of its batches consumed so far: what a
 * checkpoint saves. */
int gm_client_state(const gm_client* client, uint64_t* epoch, uint64_t* position);

/* Continues `epoch` after its first `position` batches (from gm_client_state),
 * within the run that knows the batch counts of the splits before it. */
int gm_client_resume(gm_client* client, uint64_t epoch, uint64_t position);

/* A checkpoint of a rank's place: enough to continue in a NEW run (a requeued
 * job) of the same pipeline, seed and world size, with any number of workers. */
typedef struct gm_resume_state {
  uint64_t epoch;       /* the epoch being consumed */
  uint64_t position;    /* its batches consumed so far */
  uint64_t split_index; /* where that lies: the split's index among the rank's splits */
  uint64_t split_batch; /* ... and its batches consumed */
  int64_t seed;         /* the pipeline's seed; -1: not known */
  int32_t world_size;
  int32_t rank;
  char order[65]; /* 64 hex + NUL: the pipeline and split size; "" if not known */
} gm_resume_state;

/* Fills *out with where the client stands. */
int gm_client_resume_state_get(const gm_client* client, gm_resume_state* out);

/* Continues from *state (from gm_client_resume_state_get, possibly in an earlier
 * run). GM_INVALID_ARGUMENT, saying which, when its order, seed, world size or rank
 * differ from this run's; the coordinator's reason when it refuses the state. */
int gm_client_resume_from(gm_client* client, const gm_resume_state* state);

/* The pipeline's stages "on": "device", which the trainer applies to each batch
 * (the workers stop before them), as a JSON array of stage objects: "[]" when
 * there are none. Valid until gm_client_close. NULL for a NULL client. */
const char* gm_client_device_stages(const gm_client* client);

/* The same-host path (batches in shared memory, used automatically when a data
 * worker shares the trainer's host; GOLDMINER_SAME_HOST=off turns it off):
 * worker connections open on it now, and batches received through it. */
int gm_client_same_host_stats(const gm_client* client, uint64_t* connections, uint64_t* batches);

/* Says goodbye to the coordinator, closes every connection, frees the client.
 * NULL is allowed. Batches already handed out stay valid. */
void gm_client_close(gm_client* client);

/* The batch's data tensor: bytes, element type, rank (ndim) and shape [n, ...]. */
const void* gm_batch_data(const gm_batch* batch);
size_t gm_batch_data_bytes(const gm_batch* batch);
int gm_batch_dtype(const gm_batch* batch);
int gm_batch_layout(const gm_batch* batch);
int gm_batch_ndim(const gm_batch* batch);
const int64_t* gm_batch_shape(const gm_batch* batch);
/* n, the number of samples, and their int64 labels (-1: none). */
size_t gm_batch_size(const gm_batch* batch);
const int64_t* gm_batch_labels(const gm_batch* batch);
/* Sample i's key (NUL-terminated), NULL when i >= n. */
const char* gm_batch_key(const gm_batch* batch, size_t i);
/* Where the batch comes from: epoch, split, batch number within the split. */
uint64_t gm_batch_epoch(const gm_batch* batch);
uint64_t gm_batch_split(const gm_batch* batch);
uint64_t gm_batch_split_batch(const gm_batch* batch);

/* Frees the batch and its buffers. NULL is allowed. */
void gm_batch_free(gm_batch* batch);

/* ---- The DataLoader offload (python/goldminer/offload.py) ----
 *
 * A gm_offload is a rank's offload session at the coordinator (it takes no rank
 * session: a gm_client of the same rank may run beside it). A gm_vchannel is one
 * virtual DataLoader worker on a data worker: a Python process there that reads
 * the bytes sent and whose output comes back by gm_vchannel_recv. Threads: one
 * sender and one receiver at a time per channel; gm_vchannel_shutdown from any
 * thread; gm_offload_* from any thread. */
typedef struct gm_offload gm_offload;
typedef struct gm_vchannel gm_vchannel;

/* Connects to the coordinator (NULL: $GOLDMINER_ADDR) as rank `rank` (-1: from
 * the environment, as gm_client_open) and asks for an offload channel. */
int gm_offload_open(const char* coordinator, int rank, gm_offload** out);

/* The run's live data workers, as a JSON array of "HOST:PORT" strings, asked of
 * the coordinator. *json is valid until the next gm_offload_workers call on
 * this thread. */
int gm_offload_workers(gm_offload* offload, const char** json);

/* The data worker ("HOST:PORT") the coordinator names for this client's next
 * virtual worker: the one hosting the fewest, as the workers report them plus
 * those placed since. *worker is valid until the next gm_offload_place call on
 * this thread. */
int gm_offload_place(gm_offload* offload, const char** worker);

/* Tells the coordinator, for the run's record, what became of one DataLoader:
 * served (1: its `workers` workers run as virtual workers, `blob_bytes` of it
 * shipped, in `mode` "exact" or "elastic"; NULL: exact) or not (0: it runs on
 * stock local workers; 2: in the trainer's process, num_workers=0; `why` saying
 * why). `dataset`: the dataset's class name. No answer comes. */
int gm_offload_note(gm_offload* offload, int served, const char* dataset, int workers,
                    uint64_t blob_bytes, const char* why, const char* mode);

/* BYE to the coordinator; frees the offload (open channels stay usable). NULL is allowed. */
void gm_offload_close(gm_offload* offload);

/* Opens a virtual worker on the data worker `worker` ("HOST:PORT" from
 * gm_offload_workers) running `python` (an absolute path; the worker's
 * $GOLDMINER_PYTHON wins) after importing the modules of `modules_json` (a JSON
 * array of names). */
int gm_vchannel_open(gm_offload* offload, const char* worker, const char* python,
                     const char* modules_json, gm_vchannel** out);

/* The process's pid on its host, and the host's name (valid until close). */
int64_t gm_vchannel_pid(const gm_vchannel* channel);
const char* gm_vchannel_host(const gm_vchannel* channel);

/* Sends n bytes to the process. */
int gm_vchannel_send(gm_vchannel* channel, const void* data, size_t n);

/* The next bytes the process wrote: *data and *n, valid until the next recv or
 * close. *n is 0 at the end of its stream; *exit_status is then how it ended
 * (Python's returncode: negative for a signal) and *has_status 1, or 0 when
 * the worker could not tell. */
int gm_vchannel_recv(gm_vchannel* channel, const void** data, size_t* n, int* exit_status,
                     int* has_status);

/* Wakes a blocked send or recv (they fail); the data worker ends the process. */
void gm_vchannel_shutdown(gm_vchannel* channel);

/* 1 when the channel's data worker shares this host (its bytes may come with
 * descriptors, see gm_vchannel_take_fd), else 0. */
int gm_vchannel_same_host(const gm_vchannel* channel);

/* The descriptor that came with the bytes of the last gm_vchannel_recv (a sealed
 * memfd of a result's buffers; the caller owns it and closes it), or -1. */
int gm_vchannel_take_fd(gm_vchannel* channel);

/* Closes the connection (the process is ended) and frees the channel. NULL is allowed. */
void gm_vchannel_close(gm_vchannel* channel);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GOLDMINER_CLIENT_H_ */
