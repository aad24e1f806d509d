// shim.c — the C entry points of libcairn (see cairn.h). They guard against
// use in a forked child before anything enters the Go runtime, and implement
// cairn_submit, cairn_completion_fd and cairn_take in plain C: a hand-off to
// a thread the Go runtime owns, so that hosts whose threads are costly for
// Go to enter (koffi switches stacks, which makes every cgo callback re-read
// the thread's stack bounds through pthread_getattr_np, which for the main
// thread parses /proc/self/maps) never enter Go at all.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cairn.h"
#include "shim.h"

static atomic_int forked;
static pid_t init_pid;

static void on_fork_child(void) { atomic_store(&forked, 1); }

static char library_path[PATH_MAX];

// find_library_path records the file this code was loaded from. dladdr
// names it as the loader found it, which for a dlopen of a relative path
// is relative to the directory current at load time; realpath makes it
// absolute (and resolves symlinks, so that cairnd is looked for beside the
// real file) as early as possible, before the host can change directory.
static void find_library_path(void) {
	Dl_info info;
	if (!dladdr((void *)&cairn_shim_forked, &info) || !info.dli_fname || !info.dli_fname[0]) return;
	if (!realpath(info.dli_fname, library_path)) {
		strncpy(library_path, info.dli_fname, sizeof library_path - 1);
	}
}

// cairn_shim_library_path returns what the constructor recorded. Only the
// constructor may call dladdr: it runs on the thread that holds the
// loader's lock during dlopen, while the Go runtime initialises on a thread
// of its own, where dladdr would wait for that lock, and the constructor,
// had it waited for the Go thread, would never release it. So Go reads the
// path only when a handle is opened, after dlopen has returned.
const char *cairn_shim_library_path(void) { return library_path; }

__attribute__((constructor)) static void shim_init(void) {
	init_pid = getpid();
	pthread_atfork(NULL, NULL, on_fork_child);
	find_library_path();
}

int cairn_shim_forked(void) { return atomic_load(&forked) || getpid() != init_pid; }

static char *error_json(const char *code, const char *message) {
	size_t n = strlen(code) + strlen(message) + 32;
	char *s = malloc(n);
	if (s) snprintf(s, n, "{\"code\":\"%s\",\"message\":\"%s\"}", code, message);
	return s;
}

static int fail(char **err, int rc, const char *code, const char *message) {
	if (err) *err = error_json(code, message);
	return rc;
}

#define FORK_GUARD(err)                                                                     \
	do {                                                                                    \
		if (cairn_shim_forked())                                                            \
			return fail(err, CAIRN_E_FORKED, "forked",                                      \
			            "libcairn was called in a forked child; the Go runtime does not "       \
			            "survive fork() without exec(): open a new handle in the exec'd process"); \
	} while (0)

static const char *version_str;
static void load_version(void) { version_str = cairn_go_version(); /* allocated once, kept */ }

const char *cairn_version(void) {
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	if (cairn_shim_forked()) return version_str ? version_str : "unknown";
	pthread_once(&once, load_version);
	return version_str ? version_str : "unknown";
}

int cairn_open(const char *options_json, uint64_t *handle, char **err) {
	if (err) *err = NULL;
	FORK_GUARD(err);
	if (!handle) return fail(err, CAIRN_E_INVALID_ARGUMENT, "invalid_argument", "handle is NULL");
	return cairn_go_open((char *)(options_json ? options_json : ""), handle, err);
}

int cairn_call(uint64_t handle, const char *method, const uint8_t *request, size_t request_len,
               uint8_t **response, size_t *response_len, char **err) {
	if (err) *err = NULL;
	if (response) *response = NULL;
	if (response_len) *response_len = 0;
	FORK_GUARD(err);
	if (!method || !response || !response_len || (!request && request_len))
		return fail(err, CAIRN_E_INVALID_ARGUMENT, "invalid_argument", "method, response and response_len are required");
	return cairn_go_call(handle, (char *)method, (uint8_t *)request, request_len, response, response_len, err);
}

int cairn_call_buf(uint64_t handle, const char *method, const uint8_t *request, size_t request_len, uint8_t *buf,
                   size_t buf_cap, uint8_t **response, size_t *response_len, char **err) {
	if (err) *err = NULL;
	if (response) *response = NULL;
	if (response_len) *response_len = 0;
	FORK_GUARD(err);
	if (!method || !response || !response_len || (!request && request_len) || (!buf && buf_cap))
		return fail(err, CAIRN_E_INVALID_ARGUMENT, "invalid_argument",
		            "method, response and response_len are required, and buf when buf_cap is not 0");
	return cairn_go_call_buf(handle, (char *)method, (uint8_t *)request, request_len, buf, buf_cap, response,
	                         response_len, err);
}

int cairn_close(uint64_t handle, char **err) {
	if (err) *err = NULL;
	FORK_GUARD(err);
	return cairn_go_close(handle, err);
}

int cairn_open_handles(void) {
	if (cairn_shim_forked()) return 0;
	return cairn_go_open_handles();
}

void cairn_free(void *p) { free(p); }

/* The queue of submitted calls, drained by one Go-owned thread. */
static pthread_mutex_t queue_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_cv = PTHREAD_COND_INITIALIZER;
static cairn_req *queue_head, *queue_tail;

/* The ticket table: every submitted call that has not been taken yet, like
 * the handle table for handles. A ticket is (generation << 32) | slot. A
 * slot's generation changes each time its call is taken, so a ticket that
 * was already taken, or never issued, matches no call: cairn_take looks it
 * up under the lock and answers CAIRN_E_BAD_TICKET, never touching freed
 * memory. (A ticket number repeats only after 2^32 calls have gone through
 * the same slot.) Free slots form a stack, so the table holds at most as
 * many slots as calls were ever pending at once. */
struct ticket_slot {
	uint32_t gen;   /* never 0, so no ticket is 0 */
	cairn_req *req; /* NULL when free */
};
static pthread_mutex_t tickets_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ticket_slot *slots;
static uint32_t *free_slots;
static size_t slots_len, slots_cap, free_len;

/* ticket_add registers r and sets r->ticket; 0 when out of memory. */
static int ticket_add(cairn_req *r) {
	pthread_mutex_lock(&tickets_mu);
	uint32_t i;
	if (free_len > 0) {
		i = free_slots[--free_len];
	} else {
		if (slots_len == slots_cap) {
			size_t cap = slots_cap ? slots_cap * 2 : 64;
			if (cap > UINT32_MAX) {
				pthread_mutex_unlock(&tickets_mu);
				return 0;
			}
			struct ticket_slot *grown = realloc(slots, cap * sizeof *grown);
			if (!grown) {
				pthread_mutex_unlock(&tickets_mu);
				return 0;
			}
			slots = grown;
			uint32_t *grown_free = realloc(free_slots, cap * sizeof *grown_free);
			if (!grown_free) {
				pthread_mutex_unlock(&tickets_mu);
				return 0;
			}
			free_slots = grown_free;
			slots_cap = cap;
		}
		i = (uint32_t)slots_len++;
		slots[i].gen = 1;
	}
	slots[i].req = r;
	r->ticket = ((uint64_t)slots[i].gen << 32) | i;
	pthread_mutex_unlock(&tickets_mu);
	return 1;
}

/* ticket_remove_locked frees the slot of a registered ticket. */
static void ticket_remove_locked(uint64_t ticket) {
	uint32_t i = (uint32_t)ticket;
	slots[i].req = NULL;
	if (++slots[i].gen == 0) slots[i].gen = 1;
	free_slots[free_len++] = i;
}

/* ticket_find_locked returns the call of ticket, or NULL when the ticket is
 * unknown or already taken. */
static cairn_req *ticket_find_locked(uint64_t ticket) {
	uint32_t i = (uint32_t)ticket, gen = (uint32_t)(ticket >> 32);
	if (i >= slots_len || slots[i].gen != gen) return NULL;
	return slots[i].req;
}

/* The completion pipe: [0] read end handed to the host, [1] write end. */
static int completion_pipe[2] = {-1, -1};
static pthread_once_t pipe_once = PTHREAD_ONCE_INIT;
static int pipe_errno;

static void make_pipe(void) {
	if (pipe2(completion_pipe, O_CLOEXEC) != 0) {
		pipe_errno = errno;
		return;
	}
	/* The write end never blocks: a host that is slow to read must not park
	 * library threads (each would hold an OS thread of the Go runtime). */
	fcntl(completion_pipe[1], F_SETFL, fcntl(completion_pipe[1], F_GETFL) | O_NONBLOCK);
}

/* Tickets that found the pipe full, in completion order; flushed into the
 * pipe as the host takes tickets (and so makes room). */
static pthread_mutex_t notify_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *overflow;
static size_t overflow_len, overflow_cap, overflow_head;

/* flush_locked writes queued tickets while the pipe has room. A write of 8
 * bytes to a pipe is atomic: all of it or EAGAIN. */
static void flush_locked(void) {
	while (overflow_head < overflow_len) {
		ssize_t n = write(completion_pipe[1], &overflow[overflow_head], sizeof overflow[0]);
		if (n < 0 && errno == EINTR) continue;
		if (n != (ssize_t)sizeof overflow[0]) return;
		overflow_head++;
	}
	overflow_head = overflow_len = 0;
}

static void notify(uint64_t ticket) {
	pthread_mutex_lock(&notify_mu);
	flush_locked();
	if (overflow_len == 0) {
		for (;;) {
			ssize_t n = write(completion_pipe[1], &ticket, sizeof ticket);
			if (n < 0 && errno == EINTR) continue;
			if (n == (ssize_t)sizeof ticket) {
				pthread_mutex_unlock(&notify_mu);
				return;
			}
			break; /* full (EAGAIN): queue it */
		}
	}
	if (overflow_len == overflow_cap) {
		size_t cap = overflow_cap ? overflow_cap * 2 : 1024;
		uint64_t *grown = realloc(overflow, cap * sizeof *grown);
		if (!grown) { /* out of memory: the ticket is lost, its call leaks */
			pthread_mutex_unlock(&notify_mu);
			return;
		}
		overflow = grown;
		overflow_cap = cap;
	}
	overflow[overflow_len++] = ticket;
	pthread_mutex_unlock(&notify_mu);
}

cairn_req *cairn_shim_next(void) {
	pthread_mutex_lock(&queue_mu);
	while (!queue_head) pthread_cond_wait(&queue_cv, &queue_mu);
	cairn_req *r = queue_head;
	queue_head = r->next;
	if (!queue_head) queue_tail = NULL;
	pthread_mutex_unlock(&queue_mu);
	return r;
}

void cairn_shim_finish(cairn_req *r) {
	/* Read the ticket before publishing: once done is set, a host that
	 * guessed the ticket may take (and free) r. */
	uint64_t ticket = r->ticket;
	atomic_store_explicit((_Atomic int *)&r->done, 1, memory_order_release);
	notify(ticket);
}

static void release(cairn_req *r) {
	free(r->method);
	free(r->request);
	free(r);
}

int cairn_submit(uint64_t handle, const char *method, const uint8_t *request, size_t request_len, uint64_t *ticket,
                 char **err) {
	if (err) *err = NULL;
	if (ticket) *ticket = 0;
	FORK_GUARD(err);
	if (!method || !ticket || (!request && request_len))
		return fail(err, CAIRN_E_INVALID_ARGUMENT, "invalid_argument", "method and ticket are required");
	pthread_once(&pipe_once, make_pipe);
	if (completion_pipe[1] < 0) return fail(err, CAIRN_E_INTERNAL, "internal", strerror(pipe_errno));
	cairn_req *r = calloc(1, sizeof *r);
	if (!r) return fail(err, CAIRN_E_INTERNAL, "internal", "out of memory");
	r->handle = handle;
	r->method = strdup(method);
	r->request_len = request_len;
	r->request = malloc(request_len ? request_len : 1);
	if (!r->method || !r->request || !ticket_add(r)) {
		release(r);
		return fail(err, CAIRN_E_INTERNAL, "internal", "out of memory");
	}
	if (request_len) memcpy(r->request, request, request_len);
	/* The ticket is set before the call is queued: it may finish (and its
	 * ticket reach the pipe) before this function returns. */
	*ticket = r->ticket;

	pthread_mutex_lock(&queue_mu);
	if (queue_tail) queue_tail->next = r;
	else queue_head = r;
	queue_tail = r;
	pthread_cond_signal(&queue_cv);
	pthread_mutex_unlock(&queue_mu);
	return CAIRN_OK;
}

int cairn_completion_fd(int *fd, char **err) {
	if (err) *err = NULL;
	FORK_GUARD(err);
	if (!fd) return fail(err, CAIRN_E_INVALID_ARGUMENT, "invalid_argument", "fd is NULL");
	pthread_once(&pipe_once, make_pipe);
	if (completion_pipe[0] < 0) return fail(err, CAIRN_E_INTERNAL, "internal", strerror(pipe_errno));
	*fd = completion_pipe[0];
	return CAIRN_OK;
}

int cairn_take(uint64_t ticket, uint8_t **response, size_t *response_len, char **err) {
	if (err) *err = NULL;
	if (response) *response = NULL;
	if (response_len) *response_len = 0;
	FORK_GUARD(err);
	if (!response || !response_len)
		return fail(err, CAIRN_E_INVALID_ARGUMENT, "invalid_argument", "response and response_len are required");
	pthread_mutex_lock(&tickets_mu);
	cairn_req *r = ticket_find_locked(ticket);
	if (!r) {
		pthread_mutex_unlock(&tickets_mu);
		return fail(err, CAIRN_E_BAD_TICKET, "bad_ticket", "unknown or already taken ticket");
	}
	if (!atomic_load_explicit((_Atomic int *)&r->done, memory_order_acquire)) {
		pthread_mutex_unlock(&tickets_mu);
		return fail(err, CAIRN_E_BAD_TICKET, "bad_ticket",
		            "the ticket's call has not finished (take a ticket once it is read from the completion pipe)");
	}
	ticket_remove_locked(ticket);
	pthread_mutex_unlock(&tickets_mu);

	int rc = r->rc;
	if (rc == CAIRN_OK) {
		*response = r->response;
		*response_len = r->response_len;
		free(r->err);
	} else {
		free(r->response);
		if (err) *err = r->err;
		else free(r->err);
	}
	release(r);
	/* The host read a ticket, so the pipe may have room for queued ones. */
	pthread_mutex_lock(&notify_mu);
	flush_locked();
	pthread_mutex_unlock(&notify_mu);
	return rc;
}

// cairn_ws_mask XORs buf with key repeated, eight bytes at a time (the key
// twice in one word), then byte by byte: i is a multiple of 8 when the tail
// starts, so the key's phase there is i % 4.
void cairn_ws_mask(uint8_t *buf, size_t n, const uint8_t key[4]) {
	uint8_t k8[8];
	memcpy(k8, key, 4);
	memcpy(k8 + 4, key, 4);
	uint64_t k;
	memcpy(&k, k8, 8);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, buf + i, 8);
		w ^= k;
		memcpy(buf + i, &w, 8);
	}
	for (; i < n; i++) buf[i] ^= key[i & 3];
}
