// cairn_test.c — exercises libcairn through its C ABI, as a C host would:
// open, save, resume, errors, cairn_call_buf, cairn_submit with the completion pipe,
// concurrent calls from threads, the fork rule, close.
//
// usage: cairn_test WORKSPACE [CAIRND]
//   With CAIRND, it also runs the basic calls in daemon mode (the daemon is
//   started with a short idle timeout; its pid is printed as "daemon_pid=N"
//   so the caller can stop it).
// It prints "ok <name>" per check, "handles_open=N" at the end, and exits
// non-zero at the first failure.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cairn.h"

#define CHECK(cond, name, ...)                                  \
	do {                                                        \
		if (cond) {                                             \
			printf("ok %s\n", name);                            \
		} else {                                                \
			printf("FAIL %s: ", name);                          \
			printf(__VA_ARGS__);                                \
			printf("\n");                                       \
			exit(1);                                            \
		}                                                       \
	} while (0)

// call runs method with params and returns the return code; the response
// (NUL-terminated copy) or the error JSON goes to *out, freed by the caller.
static int call(uint64_t h, const char *method, const char *params, char **out) {
	uint8_t *resp = NULL;
	size_t n = 0;
	char *err = NULL;
	int rc = cairn_call(h, method, (const uint8_t *)params, params ? strlen(params) : 0, &resp, &n, &err);
	if (rc == CAIRN_OK) {
		*out = malloc(n + 1);
		memcpy(*out, resp, n);
		(*out)[n] = 0;
		cairn_free(resp);
		if (err) {
			printf("FAIL err set on success\n");
			exit(1);
		}
	} else {
		*out = strdup(err ? err : "");
		cairn_free(err);
	}
	return rc;
}

static uint64_t handle;

static void *saver(void *arg) {
	long id = (long)arg;
	for (int i = 0; i < 50; i++) {
		char params[128];
		snprintf(params, sizeof params, "{\"session_id\":\"threads\",\"change\":{\"append_messages\":[{\"t\":%ld,\"i\":%d}]}}", id, i);
		char *out;
		int rc;
		if (i % 2) {
			// Every other save answers into this thread's own buffer.
			uint8_t buf[64], *resp = NULL;
			size_t n = 0;
			char *err = NULL;
			rc = cairn_call_buf(handle, "save", (const uint8_t *)params, strlen(params), buf, sizeof buf, &resp, &n, &err);
			if (rc == CAIRN_OK && (resp != NULL || n == 0 || n > sizeof buf || !memmem(buf, n, "\"generation\":", 13))) {
				printf("FAIL thread %ld save %d into a buffer: %p %zu %.*s\n", id, i, (void *)resp, n, (int)n, buf);
				exit(1);
			}
			out = err ? err : strdup("");
		} else {
			rc = call(handle, "save", params, &out);
		}
		if (rc != CAIRN_OK) {
			printf("FAIL thread %ld save %d: %d %s\n", id, i, rc, out);
			exit(1);
		}
		free(out);
	}
	return NULL;
}

// call_buf_path checks cairn_call_buf: a result that fits is written into
// the caller's buffer (nothing to free), one byte too large is allocated,
// errors are reported as cairn_call reports them.
static void call_buf_path(uint64_t h, const char *mode) {
	char name[64];
	const char *req = "{\"session_id\":\"s1\"}";
	char *want;
	int rc = call(h, "resumeSession", req, &want);
	size_t wn = strlen(want);
	snprintf(name, sizeof name, "%s call_buf reference", mode);
	CHECK(rc == CAIRN_OK && wn > 10, name, "%d %s", rc, want);

	uint8_t *buf = malloc(wn + 8);
	uint8_t *resp = (uint8_t *)"x";
	size_t n = 1;
	char *err = NULL;
	memset(buf, 'Z', wn + 8);
	rc = cairn_call_buf(h, "resumeSession", (const uint8_t *)req, strlen(req), buf, wn, &resp, &n, &err);
	snprintf(name, sizeof name, "%s call_buf exact fit", mode);
	CHECK(rc == CAIRN_OK && resp == NULL && err == NULL && n == wn && memcmp(buf, want, wn) == 0 && buf[wn] == 'Z', name,
	      "rc %d resp %p n %zu/%zu %.*s", rc, (void *)resp, n, wn, (int)n, buf);

	rc = cairn_call_buf(h, "resumeSession", (const uint8_t *)req, strlen(req), buf, wn - 1, &resp, &n, &err);
	snprintf(name, sizeof name, "%s call_buf one byte short", mode);
	CHECK(rc == CAIRN_OK && resp != NULL && resp != buf && n == wn && memcmp(resp, want, wn) == 0, name, "rc %d resp %p n %zu/%zu",
	      rc, (void *)resp, n, wn);
	cairn_free(resp);

	rc = cairn_call_buf(h, "resumeSession", (const uint8_t *)req, strlen(req), NULL, 0, &resp, &n, &err);
	snprintf(name, sizeof name, "%s call_buf without a buffer", mode);
	CHECK(rc == CAIRN_OK && resp != NULL && n == wn && memcmp(resp, want, wn) == 0, name, "rc %d n %zu", rc, n);
	cairn_free(resp);

	rc = cairn_call_buf(h, "resumeSession", (const uint8_t *)req, strlen(req), NULL, 8, &resp, &n, &err);
	snprintf(name, sizeof name, "%s call_buf NULL buffer with a size", mode);
	CHECK(rc == CAIRN_E_INVALID_ARGUMENT && resp == NULL && err && strstr(err, "invalid_argument"), name, "rc %d", rc);
	cairn_free(err);
	err = NULL;

	rc = cairn_call_buf(h, "resumeSession", (const uint8_t *)"{\"session_id\":\"missing\"}", 24, buf, wn, &resp, &n, &err);
	snprintf(name, sizeof name, "%s call_buf error", mode);
	CHECK(rc == CAIRN_E_NOT_FOUND && resp == NULL && n == 0 && err && strstr(err, "\"code\":\"not_found\""), name, "rc %d %s", rc,
	      err ? err : "");
	cairn_free(err);
	free(buf);
	free(want);

	// The results that encode themselves (a page of messages, a resumed
	// session) bound their size from above: one of exactly buf_cap bytes
	// is still written into buf.
	static const char *const fits[][2] = {{"messages", "{\"session_id\":\"s1\"}"}, {"resumeSession", "{\"session_id\":\"s1\"}"}};
	for (size_t i = 0; i < sizeof fits / sizeof fits[0]; i++) {
		rc = call(h, fits[i][0], fits[i][1], &want);
		wn = strlen(want);
		buf = malloc(wn + 1);
		buf[wn] = 'Z';
		rc = cairn_call_buf(h, fits[i][0], (const uint8_t *)fits[i][1], strlen(fits[i][1]), buf, wn, &resp, &n, &err);
		snprintf(name, sizeof name, "%s call_buf %s exact fit", mode, fits[i][0]);
		CHECK(rc == CAIRN_OK && resp == NULL && n == wn && memcmp(buf, want, wn) == 0 && buf[wn] == 'Z', name, "rc %d resp %p n %zu/%zu",
		      rc, (void *)resp, n, wn);
		if (resp)
			cairn_free(resp);
		free(buf);
		free(want);
	}
}

// expect calls method with params and checks that it returns want and that
// its response (or error) holds each substring of the NULL-terminated
// list; the check is named "<mode> <label>".
static void expect(uint64_t h, const char *mode, const char *label, const char *method, const char *params, int want, ...) {
	char *out;
	char name[64];
	int rc = call(h, method, params, &out);
	snprintf(name, sizeof name, "%s %s", mode, label);
	int ok = rc == want;
	va_list subs;
	va_start(subs, want);
	for (const char *sub; ok && (sub = va_arg(subs, const char *)) != NULL;)
		ok = strstr(out, sub) != NULL;
	va_end(subs);
	CHECK(ok, name, "%d %s", rc, out);
	free(out);
}

static void basic(uint64_t h, const char *mode) {
	expect(h, mode, "status", "status", NULL, CAIRN_OK, mode, NULL);
	expect(h, mode, "save snapshot", "save",
	       "{\"session_id\":\"s1\",\"snapshot\":{\"messages\":[{\"role\":\"user\",\"content\":\"h\\u00e9llo \\u2713\"},\"two\"],"
	       "\"artifacts\":[{\"id\":\"bin\",\"data\":\"AAEC/w==\"}]}}",
	       CAIRN_OK, "\"generation\":1", NULL);
	expect(h, mode, "save delta", "save", "{\"session_id\":\"s1\",\"change\":{\"append_messages\":[3]},\"expect_generation\":1}",
	       CAIRN_OK, "\"generation\":2", NULL);
	expect(h, mode, "resumeSession", "resumeSession", "{\"session_id\":\"s1\"}", CAIRN_OK,
	       "\"messages\":[{\"role\":\"user\",\"content\":\"h\\u00e9llo \\u2713\"},\"two\",3]", "\"data\":\"AAEC/w==\"",
	       "\"generation\":2", NULL);
	expect(h, mode, "conflict", "save", "{\"session_id\":\"s1\",\"change\":{},\"expect_generation\":1}",
	       CAIRN_E_CONFLICT, "\"code\":\"conflict\"", NULL);
	expect(h, mode, "not_found", "resumeSession", "{\"session_id\":\"missing\"}", CAIRN_E_NOT_FOUND,
	       "\"code\":\"not_found\"", NULL);
	expect(h, mode, "no_checkpoint", "resumeRun", "{\"run_id\":\"nope\"}", CAIRN_E_NO_CHECKPOINT, NULL);
	expect(h, mode, "method_not_found", "nosuchmethod", NULL, CAIRN_E_METHOD_NOT_FOUND, "method_not_found", NULL);
	expect(h, mode, "bad json", "save", "{not json", CAIRN_E_INVALID_ARGUMENT, NULL);
	expect(h, mode, "unknown field", "save", "{\"session_id\":\"s1\",\"chnage\":{}}", CAIRN_E_INVALID_ARGUMENT, "chnage", NULL);
	expect(h, mode, "schema_unsupported", "save", "{\"session_id\":\"s2\",\"snapshot\":{\"schema_version\":2}}",
	       CAIRN_E_SCHEMA_UNSUPPORTED, NULL);
}

// take_one reads the next ticket from the completion pipe and takes it; it
// returns the outcome's code and sets *ticket_out.
static int take_one(int fd, uint64_t *ticket_out, uint8_t **resp, size_t *n, char **err) {
	uint64_t t = 0;
	if (read(fd, &t, sizeof t) != sizeof t) {
		printf("FAIL read from the completion pipe\n");
		exit(1);
	}
	*ticket_out = t;
	return cairn_take(t, resp, n, err);
}

static void submit_path(uint64_t h) {
	uint64_t ticket = 1;
	uint8_t *resp = NULL;
	size_t n = 0;
	char *err = NULL;
	int fd = -1;
	CHECK(cairn_completion_fd(&fd, &err) == CAIRN_OK && fd >= 0, "completion fd", "fd %d", fd);

	int rc = cairn_submit(h, "status", NULL, 0, &ticket, &err);
	CHECK(rc == CAIRN_OK && ticket != 0 && err == NULL, "submit status", "rc %d ticket %llu", rc, (unsigned long long)ticket);
	uint64_t got = 0;
	rc = take_one(fd, &got, &resp, &n, &err);
	CHECK(got == ticket && rc == CAIRN_OK && n > 0 && memmem(resp, n, "\"mode\":\"embedded\"", 17), "ticket on the pipe, take",
	      "got %llu want %llu rc %d", (unsigned long long)got, (unsigned long long)ticket, rc);
	cairn_free(resp);

	// An error outcome travels the same way.
	const char *missing = "{\"session_id\":\"missing\"}";
	rc = cairn_submit(h, "resumeSession", (const uint8_t *)missing, strlen(missing), &ticket, &err);
	CHECK(rc == CAIRN_OK, "submit a failing call", "rc %d", rc);
	rc = take_one(fd, &got, &resp, &n, &err);
	CHECK(rc == CAIRN_E_NOT_FOUND && resp == NULL && err && strstr(err, "\"code\":\"not_found\""), "take a failing call", "rc %d %s", rc,
	      err ? err : "");
	cairn_free(err);
	err = NULL;

	// Tickets are looked up in a table: a taken or made-up ticket is an
	// error, not a read of freed memory.
	rc = cairn_take(got, &resp, &n, &err);
	CHECK(rc == CAIRN_E_BAD_TICKET && resp == NULL && err && strstr(err, "\"code\":\"bad_ticket\""), "take twice", "rc %d %s", rc,
	      err ? err : "");
	cairn_free(err);
	err = NULL;
	const uint64_t unknown[] = {0, 42, got ^ (1ULL << 32), got + 1, ~0ULL};
	for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
		rc = cairn_take(unknown[i], &resp, &n, &err);
		CHECK(rc == CAIRN_E_BAD_TICKET && err && strstr(err, "bad_ticket"), "take an unknown ticket", "ticket %llu rc %d",
		      (unsigned long long)unknown[i], rc);
		cairn_free(err);
		err = NULL;
	}
	rc = cairn_take(got, &resp, &n, NULL);
	CHECK(rc == CAIRN_E_BAD_TICKET, "take twice, err NULL", "rc %d", rc);
	rc = cairn_submit(h, NULL, NULL, 0, &ticket, &err);
	CHECK(rc == CAIRN_E_INVALID_ARGUMENT && ticket == 0, "submit without a method", "rc %d", rc);
	cairn_free(err);
	err = NULL;

	// A long poll stays pending until an event arrives: its ticket cannot
	// be taken before then.
	rc = call(h, "subscribe", "{}", (char **)&resp);
	free(resp);
	const char *p = "{\"subscription\":1,\"timeout_ms\":20000}";
	rc = cairn_submit(h, "nextEvent", (const uint8_t *)p, strlen(p), &ticket, &err);
	CHECK(rc == CAIRN_OK && ticket != 0, "submit a long poll", "rc %d", rc);
	rc = cairn_take(ticket, &resp, &n, &err);
	CHECK(rc == CAIRN_E_BAD_TICKET && strstr(err, "not finished"), "take before the call finished", "rc %d %s", rc, err ? err : "");
	cairn_free(err);
	err = NULL;
	rc = call(h, "save", "{\"session_id\":\"polled\",\"change\":{\"append_messages\":[1]}}", (char **)&resp);
	free(resp);
	CHECK(rc == CAIRN_OK, "save while a long poll waits", "rc %d", rc);
	rc = take_one(fd, &got, &resp, &n, &err);
	CHECK(got == ticket && rc == CAIRN_OK && n > 0 && memmem(resp, n, "\"session_id\":\"polled\"", 21), "take the long poll", "rc %d %.*s",
	      rc, (int)n, resp ? (char *)resp : "");
	cairn_free(resp);
	rc = call(h, "unsubscribe", "{\"subscription\":1}", (char **)&resp);
	free(resp);
	CHECK(rc == CAIRN_OK, "unsubscribe", "rc %d", rc);

	// More pending calls than the pipe holds (8192 tickets), none read
	// until all are submitted: none may block a library thread, none may be
	// lost, and every ticket is distinct.
	enum { MANY = 12000 };
	for (int i = 0; i < MANY; i++) {
		rc = cairn_submit(h, "status", NULL, 0, &ticket, &err);
		if (rc != CAIRN_OK) {
			printf("FAIL submit %d: rc %d\n", i, rc);
			exit(1);
		}
	}
	for (int taken = 0; taken < MANY; taken++) {
		if ((rc = take_one(fd, &got, &resp, &n, &err)) != CAIRN_OK) {
			printf("FAIL ticket %d of %d: rc %d\n", taken, MANY, rc);
			exit(1);
		}
		cairn_free(resp);
	}
	printf("ok %d pending calls past a full completion pipe all delivered\n", MANY);
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: %s WORKSPACE [CAIRND]\n", argv[0]);
		return 2;
	}
	const char *v = cairn_version();
	CHECK(v && *v, "version", "empty");

	char opts[4096];
	char *err = NULL;
	snprintf(opts, sizeof opts, "{\"workspace\":\"%s\",\"embedded\":true}", argv[1]);
	int rc = cairn_open(opts, &handle, &err);
	CHECK(rc == CAIRN_OK, "open embedded", "%d %s", rc, err ? err : "");
	CHECK(cairn_open_handles() == 1, "one handle open", "%d", cairn_open_handles());

	uint64_t second = 0;
	rc = cairn_open(opts, &second, &err);
	CHECK(rc == CAIRN_E_LOCKED && err && strstr(err, "embedded mode"), "second embedded open is locked", "%d %s", rc, err ? err : "");
	cairn_free(err);
	err = NULL;

	rc = cairn_open("{\"workspace\":\"/nonexistent/x\",\"embedded\":true}", &second, &err);
	CHECK(rc == CAIRN_E_INVALID_ARGUMENT, "bad workspace", "%d", rc);
	cairn_free(err);
	rc = cairn_open("{\"workspace\":\".\",\"embeded\":true}", &second, &err);
	CHECK(rc == CAIRN_E_INVALID_ARGUMENT, "unknown option", "%d", rc);
	cairn_free(err);
	err = NULL;

	basic(handle, "embedded");
	call_buf_path(handle, "embedded");
	submit_path(handle);

	pthread_t th[8];
	for (long i = 0; i < 8; i++) pthread_create(&th[i], NULL, saver, (void *)i);
	for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
	char *out;
	rc = call(handle, "resumeSession", "{\"session_id\":\"threads\"}", &out);
	CHECK(rc == CAIRN_OK && strstr(out, "\"generation\":400,"), "8 threads x 50 saves", "%d %.200s", rc, out);
	free(out);

	pid_t child = fork();
	if (child == 0) {
		char *cout;
		int crc = call(handle, "status", NULL, &cout);
		_exit(crc == CAIRN_E_FORKED && strstr(cout, "\"code\":\"forked\"") ? 0 : 1);
	}
	int status = 0;
	waitpid(child, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "forked child gets CAIRN_E_FORKED", "status %d", status);

	rc = cairn_close(handle, &err);
	CHECK(rc == CAIRN_OK, "close", "%d", rc);
	rc = call(handle, "status", NULL, &out);
	CHECK(rc == CAIRN_E_BAD_HANDLE, "call after close", "%d %s", rc, out);
	free(out);
	rc = cairn_close(handle, &err);
	CHECK(rc == CAIRN_E_BAD_HANDLE, "double close", "%d", rc);
	cairn_free(err);
	err = NULL;

	if (argc > 2) {
		snprintf(opts, sizeof opts, "{\"workspace\":\"%s/daemon-ws\",\"daemon\":\"%s\",\"daemon_args\":[\"--idle-timeout=30s\"]}", argv[1], argv[2]);
		char mk[4200];
		snprintf(mk, sizeof mk, "%s/daemon-ws", argv[1]);
		mkdir(mk, 0700);
		uint64_t dh;
		rc = cairn_open(opts, &dh, &err);
		CHECK(rc == CAIRN_OK, "open daemon mode (auto-start)", "%d %s", rc, err ? err : "");
		rc = call(dh, "status", NULL, &out);
		char *pid = out ? strstr(out, "\"daemon\":") : NULL;
		pid = pid ? strstr(pid, "\"pid\":") : NULL;
		if (pid) printf("daemon_pid=%ld\n", strtol(pid + 6, NULL, 10));
		free(out);
		basic(dh, "daemon");
		call_buf_path(dh, "daemon");
		rc = cairn_close(dh, &err);
		CHECK(rc == CAIRN_OK, "close daemon handle", "%d", rc);
	}
	printf("handles_open=%d\n", cairn_open_handles());
	return cairn_open_handles() == 0 ? 0 : 1;
}
