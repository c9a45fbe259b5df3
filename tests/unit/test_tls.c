/* test_tls.c: the listener's certificate: loaded, refused with a message
 * naming the file, replaced on reload or kept when the new pair is bad.
 * The certificates are made here (EC P-256, self-signed, in /tmp). */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tls.h"
#include "unit.h"

/* Write a fresh key and a self-signed certificate for cn into dir. */
static void make_pair(const char *dir, const char *name, const char *cn, char *cert, char *key,
		      size_t size)
{
	snprintf(cert, size, "%s/%s.pem", dir, name);
	snprintf(key, size, "%s/%s.key", dir, name);
	EVP_PKEY *pk = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, pk);
	X509_NAME *n = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, n);
	X509_sign(x, pk, EVP_sha256());
	FILE *f = fopen(cert, "w");
	PEM_write_X509(f, x);
	fclose(f);
	f = fopen(key, "w");
	PEM_write_PrivateKey(f, pk, NULL, NULL, 0, NULL, NULL);
	fclose(f);
	X509_free(x);
	EVP_PKEY_free(pk);
}

TEST(tls_loads_refuses_and_reloads)
{
	char dir[] = "/tmp/ci-unit-tls-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char ca[256], ka[256], cb[256], kb[256], missing[300];
	make_pair(dir, "a", "alpha", ca, ka, sizeof(ca));
	make_pair(dir, "b", "beta", cb, kb, sizeof(cb));
	snprintf(missing, sizeof(missing), "%s/none.pem", dir);
	struct err *e = NULL;
	struct tls *t = tls_new(ca, ka, &e);
	CHECK(t != NULL && e == NULL);
	CHECK(t && strstr(tls_describe(t), "CN=alpha"));
	/* Refusals say which file and why. */
	CHECK(tls_new(ca, kb, &e) == NULL && e && strstr(e->message, "does not match") &&
	      strstr(e->message, kb));
	err_free(e);
	e = NULL;
	CHECK(tls_new(missing, ka, &e) == NULL && e && strstr(e->message, "No such file") &&
	      strstr(e->message, "tls-cert"));
	err_free(e);
	e = NULL;
	CHECK(tls_new(ka, ka, &e) == NULL && e &&
	      strstr(e->message, "cannot load a PEM certificate"));
	err_free(e);
	e = NULL;
	/* A bad pair on reload keeps what is in force; a good one replaces it. */
	CHECK(tls_reload(t, cb, ka, &e) < 0 && e != NULL);
	err_free(e);
	e = NULL;
	CHECK(strstr(tls_describe(t), "CN=alpha"));
	struct ssl_st *before = tls_ssl_new(t); /* holds the old context */
	CHECK(tls_reload(t, cb, kb, &e) == 0 && e == NULL);
	CHECK(strstr(tls_describe(t), "CN=beta"));
	SSL_free((SSL *)before); /* after the context it was made from was replaced */
	tls_free(t);
	tls_free(NULL);
	unlink(ca);
	unlink(ka);
	unlink(cb);
	unlink(kb);
	rmdir(dir);
}
