/* tls.c: the API listener's OpenSSL context (tls.h).
 *
 * TLS 1.2 at least; OpenSSL's default ciphers (its own choice, which
 * follows the advice of the day) with compression and renegotiation off:
 * compression leaks secrets through sizes (CRIME), and renegotiation lets
 * a client make the server redo the costly handshake on one connection. */
#include "tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>

#include "xalloc.h"

struct tls {
	SSL_CTX *ctx;
	char desc[512];
};

/* OpenSSL's reason for the last failure, for a message. */
static const char *ssl_reason(char *buf, size_t size)
{
	unsigned long e = ERR_peek_last_error();
	if (e == 0)
		snprintf(buf, size, "unknown error");
	else
		ERR_error_string_n(e, buf, size);
	ERR_clear_error();
	return buf;
}

/* A file OpenSSL could not open would be "system lib": say why first. */
static int readable(const char *what, const char *path, struct err **errp)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return err_set(errp, ERR_BAD_REQUEST, "%s %s: %s", what, path, strerror(errno));
	fclose(f);
	return 0;
}

static SSL_CTX *ctx_load(const char *cert, const char *key, char *desc, size_t desc_size,
			 struct err **errp)
{
	char why[256];
	if (readable("tls-cert", cert, errp) < 0 || readable("tls-key", key, errp) < 0)
		return NULL;
	ERR_clear_error();
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (ctx == NULL) {
		err_set(errp, ERR_INTERNAL, "tls: SSL_CTX_new: %s", ssl_reason(why, sizeof(why)));
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
				     SSL_OP_CIPHER_SERVER_PREFERENCE);
	/* An idle connection gives its buffers back (about 34 KiB each). */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		err_set(errp, ERR_BAD_REQUEST, "tls-cert %s: cannot load a PEM certificate: %s",
			cert, ssl_reason(why, sizeof(why)));
		SSL_CTX_free(ctx);
		return NULL;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
			err_set(errp, ERR_BAD_REQUEST,
				"tls-key %s does not match tls-cert %s (not its private key)", key,
				cert);
			ERR_clear_error();
			SSL_CTX_free(ctx);
			return NULL;
		}
		err_set(errp, ERR_BAD_REQUEST,
			"tls-key %s: cannot load a PEM private key for tls-cert %s: %s", key, cert,
			ssl_reason(why, sizeof(why)));
		SSL_CTX_free(ctx);
		return NULL;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		err_set(errp, ERR_BAD_REQUEST, "tls-key %s does not match tls-cert %s: %s", key,
			cert, ssl_reason(why, sizeof(why)));
		SSL_CTX_free(ctx);
		return NULL;
	}
	X509 *x = SSL_CTX_get0_certificate(ctx);
	char subject[256] = "?", until[64] = "?";
	if (x) {
		X509_NAME_oneline(X509_get_subject_name(x), subject, sizeof(subject));
		BIO *b = BIO_new(BIO_s_mem());
		if (b && ASN1_TIME_print(b, X509_get0_notAfter(x)) == 1) {
			int n = BIO_read(b, until, sizeof(until) - 1);
			until[n > 0 ? n : 0] = '\0';
		}
		BIO_free(b);
	}
	snprintf(desc, desc_size, "%s, valid until %s", subject, until);
	ERR_clear_error();
	return ctx;
}

struct tls *tls_new(const char *cert, const char *key, struct err **errp)
{
	struct tls *t = xcalloc(1, sizeof(*t));
	t->ctx = ctx_load(cert, key, t->desc, sizeof(t->desc), errp);
	if (t->ctx == NULL) {
		free(t);
		return NULL;
	}
	return t;
}

void tls_free(struct tls *t)
{
	if (t == NULL)
		return;
	SSL_CTX_free(t->ctx);
	free(t);
}

int tls_reload(struct tls *t, const char *cert, const char *key, struct err **errp)
{
	char desc[sizeof(t->desc)];
	SSL_CTX *ctx = ctx_load(cert, key, desc, sizeof(desc), errp);
	if (ctx == NULL)
		return -1;
	SSL_CTX_free(t->ctx); /* connections hold their own references */
	t->ctx = ctx;
	memcpy(t->desc, desc, sizeof(desc));
	return 0;
}

struct ssl_st *tls_ssl_new(struct tls *t)
{
	SSL *ssl = SSL_new(t->ctx);
	if (ssl == NULL)
		abort(); /* out of memory */
	return ssl;
}

const char *tls_describe(const struct tls *t)
{
	return t->desc;
}

int tls_error_is_plain_http(unsigned long first_error)
{
	int plain = ERR_GET_LIB(first_error) == ERR_LIB_SSL &&
		    ERR_GET_REASON(first_error) == SSL_R_HTTP_REQUEST;
	ERR_clear_error();
	return plain;
}
