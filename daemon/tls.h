/* tls.h: the API listener's TLS: a certificate and key loaded into an
 * OpenSSL context, replaced whole on reload.
 *
 * Connections take a reference to the context in force when they start
 * (SSL_new), so a reload changes what new connections get and leaves
 * running ones alone. The only file besides digest.c that includes OpenSSL
 * headers; the server gets SSL objects through tls_ssl_new. */
#ifndef CI_TLS_H
#define CI_TLS_H

#include "err.h"

struct tls;
struct ssl_st;

/* Load cert (PEM, the chain after the leaf) and key (PEM); fails, saying
 * which file and why, when either is unreadable or they do not match.
 * Caller frees (tls_free, NULL-safe). */
struct tls *tls_new(const char *cert, const char *key, struct err **errp);
void tls_free(struct tls *t);

/* Load cert and key again (the same paths or new ones); on failure the
 * context in force stays. */
int tls_reload(struct tls *t, const char *cert, const char *key, struct err **errp);

/* A server-side SSL object for one connection (the caller owns it; the
 * bufferevent that takes it frees it). */
struct ssl_st *tls_ssl_new(struct tls *t);

/* The certificate's subject and expiry, for the log ("CN=x, until ..."). */
const char *tls_describe(const struct tls *t);

/* Whether the failure queued in OpenSSL's error list (ERR_get_error ...)
 * for a handshake is a client that spoke plain HTTP. Clears the list. */
int tls_error_is_plain_http(unsigned long first_error);

#endif
