/* shim.h — libcairn's internal C side, shared with the Go side through cgo.
 * Not part of the public ABI (cairn.h is). */
#ifndef CAIRN_SHIM_H
#define CAIRN_SHIM_H

#include <stddef.h>
#include <stdint.h>

/* A call handed to a library-owned thread by cairn_submit. */
typedef struct cairn_req {
	uint64_t ticket;       /* its id in the ticket table (shim.c) */
	uint64_t handle;
	char *method;          /* malloc'd copy */
	uint8_t *request;      /* malloc'd copy */
	size_t request_len;
	uint8_t *response;     /* set by the Go side (malloc'd) */
	size_t response_len;
	char *err;             /* set by the Go side (malloc'd) */
	int rc;
	int done;              /* set (atomically) once the Go side filled it in */
	struct cairn_req *next;
} cairn_req;

/* Called by the Go side. */
cairn_req *cairn_shim_next(void);           /* blocks until a call is queued */
void cairn_shim_finish(cairn_req *r);       /* the Go side filled rc/response/err */
int cairn_shim_forked(void);                /* 1 in a forked child */
const char *cairn_shim_library_path(void);  /* the loaded libcairn's absolute path, or "" */

/* Implemented in Go (capi.go). */
int cairn_go_open(char *options, uint64_t *handle, char **err);
int cairn_go_call(uint64_t handle, char *method, uint8_t *request, size_t request_len,
                  uint8_t **response, size_t *response_len, char **err);
int cairn_go_call_buf(uint64_t handle, char *method, uint8_t *request, size_t request_len, uint8_t *buf,
                      size_t buf_cap, uint8_t **response, size_t *response_len, char **err);
int cairn_go_close(uint64_t handle, char **err);
int cairn_go_open_handles(void);
char *cairn_go_version(void);

#endif
