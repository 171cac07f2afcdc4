/* goldminer native ops: the pipeline engine's image ops for one process, through
 * a C ABI (libgoldminer_native.so). A virtual DataLoader worker of `goldminer run
 * --offload native` (python/goldminer/_native.py) makes each batch of a recognised
 * torchvision pipeline with it: the files' bytes are read, decoded and transformed
 * by the ops a pipeline.json's "stages" name (man goldminer-pipeline(5)), one
 * sample after the other on the calling thread, and written side by side into the
 * caller's buffer.
 *
 * Every function returns 0 on success and -1 on failure; gm_native_last_error()
 * then says why (this thread's last failure), naming the file or the stage.
 * A gm_native is immutable once open: calls on it from several threads at once
 * are safe. */
#ifndef GOLDMINER_NATIVE_H_
#define GOLDMINER_NATIVE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GM_NATIVE_ABI_VERSION 1

typedef struct gm_native gm_native;

int gm_native_abi_version(void);
const char* gm_native_last_error(void);

/* Builds the ops of `stages_json`, a JSON array of pipeline.json stages (the
 * first a decode_jpeg). */
int gm_native_open(const char* stages_json, gm_native** out);

/* Makes `count` samples: sample i from the file paths[i], its randomness drawn
 * from (seed, epoch, indices[i], stage) as a pipeline's is. Each must come out
 * `sample_bytes` long; it is written at out + i * sample_bytes. `shape` (3
 * values) receives the last sample's shape ([C, H, W] or [H, W, C]). */
int gm_native_batch(const gm_native* native, const char* const* paths, const uint64_t* indices,
                    size_t count, uint64_t seed, uint64_t epoch, void* out, size_t sample_bytes,
                    int64_t* shape);

void gm_native_close(gm_native* native);

#ifdef __cplusplus
}
#endif

#endif /* GOLDMINER_NATIVE_H_ */
