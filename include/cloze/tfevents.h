/* tfevents: TensorBoard event files of scalars, written without TensorFlow,
 * so that `tensorboard --logdir runs/` draws a run's curves while it runs.
 *
 * The format (TensorFlow's record_writer.cc and event.proto, as the
 * tensorboard package reads it in tensorboard/compat/tensorflow_stub and
 * tensorboard/backend/event_processing):
 *
 *   file    = record*
 *   record  = uint64 length (little-endian)
 *             uint32 masked_crc32c(the 8 length bytes)   (little-endian)
 *             data[length]          (one serialized Event protocol buffer)
 *             uint32 masked_crc32c(data)                  (little-endian)
 *   masked_crc32c(x) = ((c >> 15) | (c << 17)) + 0xa282ead8,  c = CRC-32C(x)
 *                      (mod 2^32; CRC-32C: Castagnoli, reflected polynomial
 *                      0x82f63b78, initial and final xor 0xffffffff;
 *                      CRC-32C("123456789") = 0xe3069283, RFC 3720 B.4)
 *
 *   Event      { double wall_time = 1;  int64 step = 2;
 *                oneof { string file_version = 3; Summary summary = 5;
 *                        SessionLog session_log = 6; } }
 *   Summary    { repeated Value value = 1; }
 *   Value      { string tag = 1; float simple_value = 2; }
 *   SessionLog { Status status = 1; }   (START = 1)
 *
 * Protocol buffer wire format: each field is a varint key (field << 3 |
 * wire type) then its value: wire type 0 a varint (step, status), 1 eight
 * little-endian bytes (wall_time), 2 a varint length and the bytes (strings,
 * messages), 5 four little-endian bytes (simple_value).
 *
 * The first record of every file is an Event with file_version
 * "brain.Event:2" (TensorBoard reads SessionLog only from version 2 on). A
 * resumed run redoes the steps after its checkpoint: cz_tfevents_open cuts
 * every earlier file of the directory before its first record of a step it
 * will write again, and before a damaged or partial record (a job killed
 * while writing), so that no reader sees a step twice or stops at a bad
 * record; the new file then starts with a SessionLog START at the first
 * step it writes, which makes TensorBoard, when it is already watching,
 * drop what it read of the old attempt (event_accumulator's purge). */
#ifndef CLOZE_TFEVENTS_H
#define CLOZE_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cloze/core.h"

/* CRC-32C of n bytes, and TFRecord's masked form of it (above). */
uint32_t cz_crc32c(const void *data, size_t n);
uint32_t cz_crc32c_masked(const void *data, size_t n);

/* One scalar of an event: TensorBoard's tag ("train/loss") and its value
 * (stored as float32). */
typedef struct cz_scalar {
    const char *tag;
    double value;
} cz_scalar;

/* A directory's event file being written (one per process that opens it). */
typedef struct cz_tfevents {
    FILE *f; /* NULL: closed, or stopped after a failed write */
    char path[CZ_PATH_MAX + 128];
} cz_tfevents;

/* Opens a new event file in `dir` (named events.out.tfevents.<seconds>.<host>.cloze,
 * sorting after every event file already there, as readers take a
 * directory's files in name order), after repairing the directory's earlier
 * files: each is cut before its first summary of a step >= keep_below and
 * before a damaged or partial record, each cut said in one warning; a file
 * left with no summary is removed. keep_below: the first step the caller
 * will write (0 for a fresh start: nothing earlier is kept). resumed: write
 * a SessionLog START at keep_below. Returns -1 with err naming the file. */
int cz_tfevents_open(cz_tfevents *w, const char *dir, long keep_below, int resumed, cz_error *err);

/* One Event at `step` holding n scalars (non-finite values are written as
 * they are: TensorBoard shows NaN). Flushed, so that a watching TensorBoard
 * sees it at once. Returns -1 with err on a failed write; the file is then
 * closed and later calls do nothing. */
int cz_tfevents_scalars(cz_tfevents *w, long step, const cz_scalar *v, int n, cz_error *err);

void cz_tfevents_close(cz_tfevents *w);

/* Reads one file's records in order: fn gets each record's byte offset, its
 * Event's step, whether it holds a summary and the Event's bytes. Returns the number of records
 * read whole; *bad_offset = the byte offset of the first damaged or partial record, or -1 when the
 * file ends cleanly; -1 with err when the file cannot be read. */
typedef void (*cz_tfevents_record_fn)(void *ctx, long offset, long step, int summary,
                                      const uint8_t *data, size_t len);
long cz_tfevents_read(const char *path, cz_tfevents_record_fn fn, void *ctx, long *bad_offset,
                      cz_error *err);

#endif
