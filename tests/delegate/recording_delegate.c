/*
 * A tiny TFLite external delegate that the tests build with gcc and load through LiteRT's own
 * load_delegate(), so that edgeaccel's Edge TPU path (library lookup, option passing, one interpreter per
 * device, teardown) runs against the real runtime on a machine without an Edge TPU.
 *
 * It implements the documented plugin interface (tensorflow/lite/delegates/external/README.md):
 *   TfLiteDelegate* tflite_plugin_create_delegate(char** keys, char** values, size_t n,
 *                                                 void (*report_error)(const char*));
 *   void tflite_plugin_destroy_delegate(TfLiteDelegate* delegate);
 * Its Prepare claims no nodes, so the interpreter runs every node on the CPU: outputs must equal the
 * CPU's, and an Edge TPU compiled model keeps its unresolved edgetpu-custom-op.
 *
 * Options it understands (anything else is only recorded):
 *   record=PATH          append one line per call: "create k=v ...", "prepare", "destroy"
 *   fail=message         return NULL after report_error("recording delegate refused: ...")
 *   fail=silent          return NULL without a message, as libedgetpu does when it finds no device
 * It also exports edgetpu_version() (libedgetpu's C API names it so) returning the string in
 * RECORDING_DELEGATE_VERSION, so that the version check reads a real exported symbol.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef RECORDING_DELEGATE_VERSION
#define RECORDING_DELEGATE_VERSION "BuildLabel(COMPILER=gcc,DATE=test,TIME=test), RuntimeVersion(14)"
#endif

/* TfLiteDelegate as declared in tensorflow/lite/core/c/common.h. That header promises the fields are
 * only ever appended, never reordered; the struct is allocated with spare zeroed room after the known
 * fields so that a runtime reading a field added later sees its zero default. */
typedef int TfLiteStatus; /* kTfLiteOk == 0 */
typedef struct TfLiteDelegate {
  void* data_;
  TfLiteStatus (*Prepare)(void* context, struct TfLiteDelegate* delegate);
  TfLiteStatus (*CopyFromBufferHandle)(void* context, struct TfLiteDelegate* delegate, int handle, void* tensor);
  TfLiteStatus (*CopyToBufferHandle)(void* context, struct TfLiteDelegate* delegate, int handle, void* tensor);
  void (*FreeBufferHandle)(void* context, struct TfLiteDelegate* delegate, int* handle);
  int64_t flags; /* kTfLiteDelegateFlagsNone */
  void* opaque_delegate_builder; /* must stay NULL: when set, the runtime ignores Prepare above */
} TfLiteDelegate;

typedef struct {
  char record[4096];
} State;

static void record_line(const State* state, const char* line) {
  if (!state || !state->record[0]) return;
  FILE* f = fopen(state->record, "a");
  if (!f) return;
  fprintf(f, "%s\n", line);
  fclose(f);
}

static TfLiteStatus prepare(void* context, TfLiteDelegate* delegate) {
  (void)context;
  record_line((const State*)delegate->data_, "prepare");
  return 0; /* claims nothing: no ReplaceNodeSubsetsWithDelegateKernels call */
}

TfLiteDelegate* tflite_plugin_create_delegate(char** keys, char** values, size_t n,
                                              void (*report_error)(const char*)) {
  State* state = (State*)calloc(1, sizeof(State));
  const char* fail = NULL;
  char line[8192];
  size_t used = 0;
  if (!state) return NULL;
  used += snprintf(line, sizeof line, "create");
  for (size_t i = 0; i < n; ++i) {
    if (strcmp(keys[i], "record") == 0) {
      strncpy(state->record, values[i], sizeof state->record - 1);
    } else if (strcmp(keys[i], "fail") == 0) {
      fail = values[i];
    }
    if (used < sizeof line) used += snprintf(line + used, sizeof line - used, " %s=%s", keys[i], values[i]);
  }
  record_line(state, line);
  if (fail) {
    record_line(state, "refused");
    if (strcmp(fail, "silent") != 0 && report_error) report_error("recording delegate refused: fail=message");
    free(state);
    return NULL;
  }
  TfLiteDelegate* delegate = (TfLiteDelegate*)calloc(1, sizeof(TfLiteDelegate) + 256);
  if (!delegate) {
    free(state);
    return NULL;
  }
  delegate->data_ = state;
  delegate->Prepare = prepare;
  return delegate;
}

void tflite_plugin_destroy_delegate(TfLiteDelegate* delegate) {
  if (!delegate) return; /* the interface allows NULL */
  State* state = (State*)delegate->data_;
  record_line(state, "destroy");
  free(state);
  free(delegate);
}

const char* edgetpu_version(void) { return RECORDING_DELEGATE_VERSION; }
