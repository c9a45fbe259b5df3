/*
 * client.c: blocking HTTP client over libcurl's easy interface.
 *
 * ci-ctl runs one request at a time, so the easy interface is enough; one
 * handle is kept for the client's life so `ci-ctl rm A B C` reuses one
 * connection.  Bodies are either buffered (capped at CLIENT_BODY_MAX) or,
 * for streaming and downloads, handed to a callback; an error answer is
 * always buffered, so callers can parse {"error":{...}} whatever they
 * asked for.
 */
#include "client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "buf.h"
#include "err.h"
#include "json.h"
#include "util.h"
#include "version.h"
#include "xalloc.h"

/* A dead server should fail fast; the request itself may take long. */
#define CLIENT_CONNECT_TIMEOUT_S 5L
/* With no whole-request limit, give up on a transfer that moved nothing
 * for this long, so a vanished peer cannot hang the CLI forever. */
#define CLIENT_STALL_S 120L

struct client {
	CURL *curl;
	char *server;    /* as the user wrote it, for messages */
	char *base_url;  /* scheme://authority[/prefix], no trailing '/' */
	char *unix_path; /* set for unix:PATH servers */
	char *auth;      /* "Authorization: Bearer KEY", or NULL */
	char *cacert;    /* CA file for https://, or NULL for the system's */
	char *agent;     /* User-Agent */
};

/* One transfer's state, shared by the curl callbacks. */
struct client_xfer {
	struct client *c;
	const struct client_req *req;
	struct buf body;
	int decided;   /* streaming chosen yet (at the first body bytes) */
	int streaming; /* body goes to req->on_data */
	int too_big;
	int read_errno;
	struct err *cb_err;
	int cancel_called; /* req->on_cancel ran */
};

/* Whether the transfer must stop for req->cancel (see client.h). */
static int client_cancelled(struct client_xfer *x)
{
	const struct client_req *req = x->req;

	if (req->cancel == NULL || *req->cancel == 0)
		return 0;
	if (req->on_cancel == NULL || *req->cancel >= 2)
		return 1;
	if (!x->cancel_called) {
		x->cancel_called = 1;
		req->on_cancel(req->cancel_arg);
	}
	return 0;
}

static int client_parse_server(struct client *c, const char *server, struct err **err)
{
	const char *rest;
	size_t n;
	CURLU *u;
	CURLUcode uc;

	if (strncmp(server, "unix:", 5) == 0) {
		rest = server + 5;
		/* unix:///run/ci.sock is the URL spelling of unix:/run/ci.sock */
		if (strncmp(rest, "//", 2) == 0 && rest[2] == '/')
			rest += 2;
		if (*rest == '\0') {
			err_set(err, ERR_BAD_REQUEST, "bad server '%s': unix: needs a socket path",
				server);
			return -1;
		}
		c->unix_path = xstrdup(rest);
		/* The host is not used to connect, but HTTP/1.1 needs a Host. */
		c->base_url = xstrdup("http://localhost");
		return 0;
	}
	if (strncmp(server, "http://", 7) == 0 || strncmp(server, "https://", 8) == 0) {
		c->base_url = xstrdup(server);
	} else if (strstr(server, "://") == NULL && strchr(server, '/') == NULL &&
		   strchr(server, ':') != NULL) {
		/* host:port, the daemon's own --listen spelling */
		c->base_url = xasprintf("http://%s", server);
	} else {
		err_set(err, ERR_BAD_REQUEST,
			"bad server '%s': want http://HOST:PORT or unix:/PATH", server);
		return -1;
	}
	n = strlen(c->base_url);
	while (n > 0 && c->base_url[n - 1] == '/')
		c->base_url[--n] = '\0';

	/* Let curl judge the syntax now, so a typo is a usage error rather
	 * than a confusing transport failure later. */
	u = curl_url();
	if (u == NULL) {
		fprintf(stderr, "ci-ctl: out of memory (curl_url)\n");
		abort();
	}
	uc = curl_url_set(u, CURLUPART_URL, c->base_url, 0);
	curl_url_cleanup(u);
	if (uc != CURLUE_OK) {
		err_set(err, ERR_BAD_REQUEST, "bad server '%s': %s", server, curl_url_strerror(uc));
		return -1;
	}
	return 0;
}

struct client *client_new(const char *server, const char *api_key, struct err **err)
{
	struct client *c = xcalloc(1, sizeof(*c));

	/* curl_global_init is reference counted; client_free undoes it. */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		err_set(err, ERR_UNAVAILABLE, "cannot initialise libcurl");
		free(c);
		return NULL;
	}
	c->server = xstrdup(server);
	c->agent = xasprintf("ci-ctl/%s", ci_version);
	if (client_parse_server(c, server, err) < 0) {
		client_free(c);
		return NULL;
	}
	if (api_key != NULL && *api_key != '\0')
		c->auth = xasprintf("Authorization: Bearer %s", api_key);
	c->curl = curl_easy_init();
	if (c->curl == NULL) {
		err_set(err, ERR_UNAVAILABLE, "cannot create a libcurl handle");
		client_free(c);
		return NULL;
	}
	return c;
}

void client_free(struct client *c)
{
	if (c == NULL)
		return;
	if (c->curl != NULL)
		curl_easy_cleanup(c->curl);
	free(c->server);
	free(c->base_url);
	free(c->unix_path);
	free(c->cacert);
	free(c->agent);
	if (c->auth != NULL) {
		/* Do not leave the key lying in freed memory. */
		memset(c->auth, 0, strlen(c->auth));
		free(c->auth);
	}
	free(c);
	curl_global_cleanup();
}

void client_set_cacert(struct client *c, const char *path)
{
	free(c->cacert);
	c->cacert = path != NULL && *path != '\0' ? xstrdup(path) : NULL;
}

const char *client_server(const struct client *c)
{
	return c->server;
}

void client_resp_release(struct client_resp *resp)
{
	free(resp->body);
	resp->body = NULL;
	resp->len = 0;
	resp->status = 0;
}

static size_t client_on_write(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct client_xfer *x = arg;
	size_t n = size * nmemb;

	if (!x->decided) {
		long status = 0;

		/* The write callback only sees the final answer's body, so the
		 * status is known here: stream successes, buffer errors. */
		curl_easy_getinfo(x->c->curl, CURLINFO_RESPONSE_CODE, &status);
		x->streaming = x->req->on_data != NULL && status >= 200 && status < 300;
		x->decided = 1;
	}
	if (client_cancelled(x))
		return 0; /* curl stops with CURLE_WRITE_ERROR */
	if (x->streaming) {
		if (n > 0 && x->req->on_data(ptr, n, x->req->arg, &x->cb_err) < 0) {
			if (x->cb_err == NULL)
				err_set(&x->cb_err, ERR_UNAVAILABLE, "transfer aborted");
			return 0; /* short count: curl stops with CURLE_WRITE_ERROR */
		}
		return n;
	}
	if (buf_append(&x->body, ptr, n) < 0) {
		x->too_big = 1;
		return 0;
	}
	return n;
}

/* Called about once a second even when nothing moves: a non-zero return
 * aborts the transfer (CURLE_ABORTED_BY_CALLBACK). */
static int client_on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
			      curl_off_t ulnow)
{
	struct client_xfer *x = arg;

	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return client_cancelled(x);
}

static size_t client_on_read(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct client_xfer *x = arg;
	size_t n = fread(ptr, 1, size * nmemb, x->req->upload);

	if (n == 0 && ferror(x->req->upload)) {
		x->read_errno = errno;
		return CURL_READFUNC_ABORT;
	}
	return n;
}

static struct curl_slist *client_headers(struct client *c, const struct client_req *req)
{
	struct curl_slist *h = NULL, *t;
	char *line;

	line = xasprintf("Accept: %s", req->accept ? req->accept : "application/json");
	t = curl_slist_append(h, line);
	free(line);
	if (t == NULL)
		goto oom;
	h = t;
	/* No type: none at all ("Content-Type:" removes the form-urlencoded
	 * one libcurl would add to a POST). */
	{
		line = req->content_type != NULL ? xasprintf("Content-Type: %s", req->content_type)
						 : xstrdup("Content-Type:");
		t = curl_slist_append(h, line);
		free(line);
		if (t == NULL)
			goto oom;
		h = t;
	}
	if (c->auth != NULL) {
		t = curl_slist_append(h, c->auth);
		if (t == NULL)
			goto oom;
		h = t;
	}
	return h;
oom:
	fprintf(stderr, "ci-ctl: out of memory (curl_slist_append)\n");
	abort();
}

/*
 * Proxies: curl follows http_proxy/https_proxy, which a remote daemon
 * behind a corporate proxy may need.  But a unix socket or the loopback
 * daemon (the default) must never be sent to a proxy, whatever no_proxy
 * says, so those are added to the user's own no_proxy list.
 */
static void client_proxy(struct client *c, CURL *h)
{
	const char *user = getenv("no_proxy");
	char *list;

	if (c->unix_path != NULL) {
		curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
		return;
	}
	if (user == NULL || *user == '\0')
		user = getenv("NO_PROXY");
	if (user != NULL && strcmp(user, "*") == 0) {
		curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
		return;
	}
	list = xasprintf("%s%slocalhost,127.0.0.1,::1", user != NULL ? user : "",
			 user != NULL && *user != '\0' ? "," : "");
	curl_easy_setopt(h, CURLOPT_NOPROXY, list); /* curl copies strings */
	free(list);
}

static void client_setup(struct client *c, struct client_xfer *x, struct curl_slist *headers,
			 const char *url, char *errbuf)
{
	const struct client_req *req = x->req;
	CURL *h = c->curl;

	/* Reset keeps the connection cache, drops the last request's options. */
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	if (c->unix_path != NULL)
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->unix_path);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_USERAGENT, c->agent);
	/* https://: verify the server against this CA (a self-made one) rather
	 * than the system's; verification itself is never turned off. */
	if (c->cacert != NULL)
		curl_easy_setopt(h, CURLOPT_CAINFO, c->cacert);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, CLIENT_CONNECT_TIMEOUT_S);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	if (req->timeout_s > 0) {
		curl_easy_setopt(h, CURLOPT_TIMEOUT, req->timeout_s);
	} else if (req->timeout_s == 0) {
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, CLIENT_STALL_S);
	}
	if (req->cancel != NULL) {
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, client_on_progress);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	}
	client_proxy(c, h);
	/* Send "a/../b" as written: the server must see it to answer
	 * bad_path, instead of curl quietly resolving it to another URL. */
	curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, client_on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);

	if (req->upload != NULL) {
		/* CURLOPT_UPLOAD over HTTP is a PUT streamed from the callback,
		 * so a large file never sits in memory. */
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, client_on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, x);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)req->upload_size);
		if (strcmp(req->method, "PUT") != 0)
			curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
	} else if (strcmp(req->method, "GET") == 0) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	} else if (req->body != NULL || strcmp(req->method, "POST") == 0) {
		/* A POST without a body still sends Content-Length: 0. */
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)(req->body ? req->body_len : 0));
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body ? req->body : "");
		if (strcmp(req->method, "POST") != 0)
			curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
	} else {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
	}
}

/* Turns a curl failure into "cannot reach SERVER: reason" and kin. */
static void client_transport_error(struct client *c, CURLcode rc, const char *errbuf,
				   long timeout_s, struct err **err)
{
	const char *why = errbuf[0] ? errbuf : curl_easy_strerror(rc);
	long os_errno = 0;
	curl_off_t sent_us = 0;

	curl_easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &os_errno);
	/* Time until the request could be sent: 0 means there never was a
	 * connection (CONNECT_TIME is also 0 for a reused one, so not that). */
	curl_easy_getinfo(c->curl, CURLINFO_PRETRANSFER_TIME_T, &sent_us);
	switch (rc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
		/* strerror says "Connection refused", curl's own text buries it. */
		err_set(err, ERR_UNAVAILABLE, "cannot reach %s: %s", c->server,
			os_errno ? strerror((int)os_errno) : why);
		break;
	case CURLE_OPERATION_TIMEDOUT:
		if (sent_us == 0)
			err_set(err, ERR_UNAVAILABLE, "cannot reach %s: no connection after %ld s",
				c->server, CLIENT_CONNECT_TIMEOUT_S);
		else if (timeout_s > 0)
			err_set(err, ERR_UNAVAILABLE, "%s: no complete answer within %ld s",
				c->server, timeout_s);
		else
			err_set(err, ERR_UNAVAILABLE, "%s: transfer stalled for %ld s", c->server,
				CLIENT_STALL_S);
		break;
	case CURLE_PARTIAL_FILE:
		/* curl: "transfer closed with outstanding read data remaining" */
		err_set(err, ERR_UNAVAILABLE, "%s: the connection closed before the answer ended",
			c->server);
		break;
	case CURLE_GOT_NOTHING:
		err_set(err, ERR_UNAVAILABLE, "%s: server closed the connection without answering",
			c->server);
		break;
	default: err_set(err, ERR_UNAVAILABLE, "%s: %s", c->server, why); break;
	}
}

/* Fills err from a non-2xx answer, preferring the API's error object. */
static void client_answer_error(long status, const char *body, struct err **err)
{
	AUTOJSON yajl_val doc = NULL;
	const char *code = NULL, *msg = NULL;
	AUTOFREE char *line = NULL;
	enum err_code ec = ERR_UNAVAILABLE;
	struct err *e;

	if (body[0] != '\0' && (doc = json_parse(body, strlen(body), NULL)) != NULL) {
		code = json_path_str(doc, "error.code");
		msg = json_path_str(doc, "error.message");
	}
	if (msg == NULL && body[0] != '\0' && doc == NULL) {
		/* Not ours (a proxy page?): show the start of it. */
		size_t n = strcspn(body, "\r\n");

		line = xstrndup(body, n > 200 ? 200 : n);
	}
	/* A code this build does not know still shows as sent (peer_code). */
	if (code != NULL)
		err_code_from_name(code, &ec);
	e = err_new(ec, "%s", msg ? msg : line ? line : "no error message in the answer");
	err_set_peer(e, (int)status, code);
	err_give(err, e);
}

int client_do(struct client *c, const struct client_req *req, struct client_resp *resp,
	      struct err **err)
{
	struct client_xfer x = {.c = c, .req = req};
	struct curl_slist *headers;
	char errbuf[CURL_ERROR_SIZE] = "";
	char *url;
	CURLcode rc;
	int ret = -1;

	buf_init(&x.body, CLIENT_BODY_MAX);
	resp->status = 0;
	resp->body = NULL;
	resp->len = 0;

	url = xasprintf("%s%s", c->base_url, req->path);
	headers = client_headers(c, req);
	client_setup(c, &x, headers, url, errbuf);
	rc = curl_easy_perform(c->curl);
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &resp->status);
	/* These point at locals freed below; the handle lives on. */
	curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, NULL);
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, NULL);
	curl_easy_setopt(c->curl, CURLOPT_READDATA, NULL);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, NULL);

	if (rc != CURLE_OK && req->cancel != NULL && *req->cancel >= (req->on_cancel ? 2 : 1)) {
		err_set(err, ERR_UNAVAILABLE, "%s: interrupted", c->server);
		err_free(x.cb_err);
	} else if (x.cb_err != NULL) {
		err_give(err, steal_pointer(&x.cb_err));
	} else if (x.too_big) {
		err_set(err, ERR_UNAVAILABLE, "%s: answer larger than the %zu MiB cap", c->server,
			CLIENT_BODY_MAX >> 20);
	} else if (x.read_errno != 0) {
		err_set(err, ERR_INTERNAL, "reading upload: %s", strerror(x.read_errno));
	} else if (rc != CURLE_OK) {
		client_transport_error(c, rc, errbuf, req->timeout_s, err);
	} else if (resp->status < 200 || resp->status > 299) {
		resp->body = buf_steal(&x.body, &resp->len);
		client_answer_error(resp->status, resp->body, err);
	} else {
		ret = 0;
	}
	if (resp->body == NULL)
		resp->body = buf_steal(&x.body, &resp->len);
	buf_release(&x.body);
	curl_slist_free_all(headers);
	free(url);
	return ret;
}
